package gate_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/redistest"
)

// A running lease's fence is in Redis within a second of its start: a
// lease taken on a free key (a plain SET NX, which cannot know the fence
// TIME gives it in the same round trip) records it at its first renewal,
// which comes within a second; Status then reports it to the lease's end.
func TestRunningFenceIsRecorded(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	const lease = 300 * time.Millisecond
	g := newGate(t, rdb, gate.Options{Lease: lease})
	ctx := context.Background()
	l, err := g.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	waitUntil(t, 5*time.Second, "the fence recorded", func() bool {
		return mustStatus(t, g, "job").Fence == l.Fence()
	})
	redistest.Advance(m, lease-50*time.Millisecond) // near the lease's end
	if st := mustStatus(t, g, "job"); st.State != gate.Running || st.Fence != l.Fence() {
		t.Fatalf("near the lease's end: %+v, want running with fence %d", st, l.Fence())
	}
}
