package gate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/redistest"
)

// A custom classifier's reason code reaches HTTP bodies and metric labels:
// the gate keeps it only when it is 1 to 64 bytes of [a-z0-9_.-], else it
// records "unknown".
func TestReasonCodesAreSanitized(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Cooldown: time.Minute, Classify: func(err error) classify.Verdict {
		return classify.Verdict{Class: classify.ClassTransient, Reason: err.Error()}
	}})
	for i, tc := range []struct{ reason, want string }{
		{"a", "a"}, {"z", "z"}, {"0", "0"}, {"9", "9"},
		{"_", "_"}, {".", "."}, {"-", "-"},
		{"rate_limit.tokens-2", "rate_limit.tokens-2"},
		{strings.Repeat("x", 64), strings.Repeat("x", 64)},
		{strings.Repeat("x", 65), classify.ReasonUnknown},
		{"", classify.ReasonUnknown},
		{"A", classify.ReasonUnknown}, // just around each accepted range
		{"`", classify.ReasonUnknown},
		{"{", classify.ReasonUnknown},
		{"/", classify.ReasonUnknown},
		{":", classify.ReasonUnknown},
		{"rate limit", classify.ReasonUnknown},
		{"quota\n", classify.ReasonUnknown},
		{"rate_limit\x00", classify.ReasonUnknown},
	} {
		job := "job-" + strings.Repeat("r", i+1)
		var ce *gate.CallError
		if err := failWith(t, g, job, errors.New(tc.reason)); !errors.As(err, &ce) {
			t.Fatalf("%q: %v, want a *CallError", tc.reason, err)
		}
		if exp, got := tc.want, ce.Verdict.Reason; exp != got {
			t.Errorf("reason %q recorded as %q, want %q", tc.reason, got, exp)
		}
		if exp, got := tc.want, mustStatus(t, g, job).Reason; exp != got {
			t.Errorf("reason %q: Status says %q, want %q", tc.reason, got, exp)
		}
	}
}

// A lease's context ends when the lease is settled, whichever way, so work
// started under it (a stream, a goroutine) stops with the call.
func TestSettleEndsTheLeaseContext(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Cooldown: time.Minute})
	ctx := context.Background()
	for name, settle := range map[string]func(*gate.Lease) error{
		"succeed": func(l *gate.Lease) error { return l.Succeed(ctx) },
		"fail":    func(l *gate.Lease) error { return l.Fail(ctx, errTransient) },
		"release": func(l *gate.Lease) error { return l.Release(ctx) },
	} {
		l, err := g.Acquire(ctx, "job-"+name)
		if err != nil {
			t.Fatal(err)
		}
		if l.Context().Err() != nil {
			t.Fatalf("%s: lease context done before the settle", name)
		}
		if err := settle(l); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !errors.Is(l.Context().Err(), context.Canceled) {
			t.Errorf("%s: lease context %v after the settle, want cancelled", name, l.Context().Err())
		}
	}
}
