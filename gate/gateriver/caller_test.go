package gateriver_test

import (
	"context"
	"errors"
	"testing"

	"github.com/riverqueue/river/rivertype"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gatequeue"
	"github.com/retrygate/retrygate/gate/gateriver"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// Options.Caller gives each job its class and tenant in its upstream's
// line: the gate's acquire sees them; a job whose caller cannot be told is
// cancelled without a call.
func TestCallerFromTheJob(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	rec := &gatetest.Events{Kinds: []gate.EventKind{gate.EventAcquired, gate.EventRefused}}
	g := gatetest.New(t, rdb, gate.Options{Observer: rec})
	errNoTenant := errors.New("no tenant in the args")
	m := gateriver.New(g, gateriver.Options{Job: byDocument, Caller: func(_ context.Context, job *rivertype.JobRow) (gatequeue.Caller, error) {
		if job.Kind != "summarise" {
			return gatequeue.Caller{}, errNoTenant
		}
		return gatequeue.Caller{Priority: gate.PriorityBatch, Tenant: "acme", Weight: 2}, nil
	}})
	ctx := context.Background()
	ran := 0
	work := func(context.Context) error { ran++; return nil }
	row := &rivertype.JobRow{ID: 1, Kind: "summarise", EncodedArgs: []byte(`{"doc":"d1"}`)}
	if err := m.Work(ctx, row, work); err != nil {
		t.Fatal(err)
	}
	if evs := rec.List(); len(evs) != 1 || evs[0].Priority != gate.PriorityBatch || evs[0].Tenant != "acme" {
		t.Fatalf("the acquire saw %+v, want class batch, tenant acme", evs)
	}

	err := m.Work(ctx, &rivertype.JobRow{ID: 2, Kind: "other", EncodedArgs: []byte(`{"doc":"d2"}`)}, work)
	var cancel *rivertype.JobCancelError
	if !errors.As(err, &cancel) || !errors.Is(err, errNoTenant) {
		t.Fatalf("a job without a caller: exp a JobCancel wrapping the cause, got %v", err)
	}
	if ran != 1 || len(rec.List()) != 1 {
		t.Fatalf("a job without a caller ran (%d runs) or asked the gate (%d events)", ran, len(rec.List()))
	}
}
