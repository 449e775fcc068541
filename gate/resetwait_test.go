package gate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// Reset refuses a running job with the wait Status reports for it, read
// from the lease's time left, not from a whole lease: with most of the
// lease gone (Redis's clock moved), both say the same.
func TestResetOfARunningJobSaysStatusWait(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0)
	ctx := context.Background()
	opts := gate.Options{Prefix: redistest.UniqueKey(t), Lease: time.Minute}
	a, b := newGate(t, rdb, opts), newGate(t, rdb, opts)
	l, err := a.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	redistest.Advance(m, 50*time.Second) // 10 s of the lease left
	st, err := b.Status(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	var bl *gate.BlockedError
	if err := b.Reset(ctx, "job"); !errors.As(err, &bl) || bl.State != gate.Running {
		t.Fatalf("Reset of a running job: %v, want refused, Running", err)
	}
	if st.State != gate.Running || st.RetryAfter <= 0 || st.RetryAfter > 10*time.Second {
		t.Fatalf("Status of the running job: %+v, want Running within the 10 s left", st)
	}
	if bl.RetryAfter != st.RetryAfter {
		t.Fatalf("Reset's wait %v, Status's %v: want the same", bl.RetryAfter, st.RetryAfter)
	}
}
