package gate_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/redistest"
)

// The meta hash (attempts, last fence) outlives a running lease however
// old it is: an acquire refreshes it once it has used half of AttemptsTTL,
// so a call shorter than a renewal still finds its fence in Redis when the
// lease is about to end.
func TestOldMetaOutlivesTheNextLease(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	const lease, attemptsTTL = 10 * time.Second, time.Minute
	g := newGate(t, rdb, gate.Options{Lease: lease, AttemptsTTL: attemptsTTL})
	ctx := context.Background()
	if err := g.Do(ctx, "job", okFn); err != nil { // creates the meta hash
		t.Fatal(err)
	}
	redistest.Advance(m, attemptsTTL+lease/2) // the meta hash has lease/2 left
	l, err := g.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	redistest.Advance(m, lease-time.Second) // the lease has a second left
	st := mustStatus(t, g, "job")
	if st.State != gate.Running || st.Fence != l.Fence() {
		t.Fatalf("near the lease's end: %+v, want running with fence %d", st, l.Fence())
	}
}
