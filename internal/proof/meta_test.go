package proof_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/redistest"
)

// TestMetaOutlivesRunningLease: gate/doc.go promises the meta hash (last
// fence, attempts) lives as long as its lock plus AttemptsTTL. A job whose
// meta key was created a while ago (by an earlier run) and that runs again
// must keep its meta while the lease is held: Status reports the running
// lease's fence throughout.
//
// It was a gate bug once: acquire.lua set the meta TTL only when it created
// the key, and neither renew.lua nor release.lua extended it, so the meta
// key expired on its old schedule in the middle of a run. acquire.lua now
// refreshes the TTL once half of AttemptsTTL is used, and renew.lua extends
// it with the lease.
func TestMetaOutlivesRunningLease(t *testing.T) {
	srv := redistest.Server(t)
	rdb := srv.Client(t)
	const (
		lease       = 300 * time.Millisecond
		attemptsTTL = time.Second
		// left is what remains of the meta key's TTL when the job runs
		// again: an earlier run created it long ago.
		left = 250 * time.Millisecond
	)
	g := newGate(t, rdb, gate.Options{Lease: lease, AttemptsTTL: attemptsTTL})
	ctx := context.Background()
	const job = "doc-meta"
	if err := g.Do(ctx, job, func(context.Context, *gate.Lease) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// Age the meta key rather than wait for it to age: a sleep that
	// overshoots on a loaded machine would let it expire before the second
	// run, which would then pass without testing anything.
	_, meta := keyspace.Job(g.Options().Prefix, job)
	aged := time.Now()
	if ok, err := rdb.PExpire(ctx, meta, left).Result(); err != nil || !ok {
		t.Fatalf("PEXPIRE meta: %v, %v (the first run left no meta key?)", ok, err)
	}
	err := g.Do(ctx, job, func(fctx context.Context, l *gate.Lease) error {
		if d := time.Since(aged); d >= left {
			t.Fatalf("the run started %v after the meta key was aged, past its old TTL %v: nothing to test", d, left)
		}
		// Run past the old meta deadline by a lease; renewals keep the
		// lease.
		for end := aged.Add(left + lease); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			st, err := g.Status(ctx, job)
			if err != nil {
				t.Fatalf("Status: %v", err)
			}
			if st.State != gate.Running || st.Fence != l.Fence() {
				t.Fatalf("while the lease runs: Status %v fence %d (meta PTTL %v), want running fence %d",
					st.State, st.Fence, rdb.PTTL(ctx, meta).Val(), l.Fence())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
}
