package proof_test

import (
	"context"
	"github.com/retrygate/retrygate/internal/keyspace"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
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
		lease       = 90 * time.Millisecond
		attemptsTTL = 150 * time.Millisecond
	)
	g := newGate(t, rdb, gate.Options{Lease: lease, AttemptsTTL: attemptsTTL})
	ctx := context.Background()
	const job = "doc-meta"
	if err := g.Do(ctx, job, func(context.Context, *gate.Lease) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// The meta key now expires Lease+AttemptsTTL (240ms) after that run.
	time.Sleep(lease + attemptsTTL - 40*time.Millisecond)
	_, meta := keyspace.Job(g.Options().Prefix, job)
	err := g.Do(ctx, job, func(fctx context.Context, l *gate.Lease) error {
		// Run past the old meta deadline; renewals keep the lease.
		for end := time.Now().Add(2 * lease); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
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
