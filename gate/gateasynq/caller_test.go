package gateasynq_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateasynq"
	"github.com/retrygate/retrygate/gate/gatequeue"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// Options.Caller gives each task its class and tenant in its upstream's
// line: the gate's acquire sees them; a task whose caller cannot be told
// is archived without a call.
func TestCallerFromTheTask(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	rec := &gatetest.Events{Kinds: []gate.EventKind{gate.EventAcquired, gate.EventRefused}}
	g := gatetest.New(t, rdb, gate.Options{Observer: rec})
	errNoTenant := errors.New("no tenant in the payload")
	mw := gateasynq.Middleware(g, gateasynq.Options{
		Job: func(_ context.Context, t *asynq.Task) (string, error) { return "summarise:" + string(t.Payload()), nil },
		Caller: func(_ context.Context, t *asynq.Task) (gatequeue.Caller, error) {
			if t.Type() != "summarise" {
				return gatequeue.Caller{}, errNoTenant
			}
			return gatequeue.Caller{Priority: gate.PriorityInteractive, Tenant: "acme"}, nil
		},
	})
	ran := 0
	h := mw(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { ran++; return nil }))
	ctx := context.Background()
	if err := h.ProcessTask(ctx, asynq.NewTask("summarise", []byte("d1"))); err != nil {
		t.Fatal(err)
	}
	if evs := rec.List(); len(evs) != 1 || evs[0].Priority != gate.PriorityInteractive || evs[0].Tenant != "acme" {
		t.Fatalf("the acquire saw %+v, want class interactive, tenant acme", evs)
	}
	err := h.ProcessTask(ctx, asynq.NewTask("other", []byte("d2")))
	if !errors.Is(err, asynq.SkipRetry) || !errors.Is(err, errNoTenant) {
		t.Fatalf("a task without a caller: exp SkipRetry wrapping the cause, got %v", err)
	}
	if ran != 1 || len(rec.List()) != 1 {
		t.Fatalf("a task without a caller ran (%d runs) or asked the gate (%d events)", ran, len(rec.List()))
	}
}
