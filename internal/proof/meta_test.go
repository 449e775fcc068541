package proof_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/redistest"
)

// TestMetaOutlivesRunningLease: the meta key (attempt count and fence of
// the last failure) expires on its own schedule, Cooldown + AttemptsTTL
// after that failure, even in the middle of a later run. Nothing is lost
// then: the running lock's value carries the lease's fence and attempt
// count, so Status keeps reporting the running lease's fence, and a failure
// of this run still counts on top of the earlier attempts.
func TestMetaOutlivesRunningLease(t *testing.T) {
	srv := redistest.Server(t)
	rdb := srv.Client(t)
	const (
		lease       = 90 * time.Millisecond
		cooldown    = 30 * time.Millisecond
		attemptsTTL = 150 * time.Millisecond
	)
	g := newGate(t, rdb, gate.Options{Lease: lease, Cooldown: cooldown, NoJitter: true, AttemptsTTL: attemptsTTL, Classify: classifyTest})
	ctx := context.Background()
	const job = "doc-meta"
	if err := g.Do(ctx, job, func(context.Context, *gate.Lease) error { return errTransient }); !errors.Is(err, errTransient) {
		t.Fatalf("first run: %v", err)
	}
	// The meta key now expires Cooldown+AttemptsTTL (180ms) after that
	// failure; start the next run just before that.
	time.Sleep(cooldown + attemptsTTL - 40*time.Millisecond)
	_, meta, _ := g.Keys(job)
	err := g.Do(ctx, job, func(fctx context.Context, l *gate.Lease) error {
		if l.Attempt() != 2 {
			t.Errorf("second run: Attempt %d, want 2", l.Attempt())
		}
		// Run past the meta key's expiry; renewals keep the lease.
		for end := time.Now().Add(2 * lease); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			st, err := g.Status(ctx, job)
			if err != nil {
				t.Fatalf("Status: %v", err)
			}
			if st.State != gate.Running || st.Fence != l.Fence() || st.Attempts != 1 {
				t.Fatalf("while the lease runs: Status %v fence %d attempts %d (meta PTTL %v), want running fence %d attempts 1",
					st.State, st.Fence, st.Attempts, rdb.PTTL(ctx, meta).Val(), l.Fence())
			}
		}
		if n := rdb.Exists(ctx, meta).Val(); n != 0 {
			t.Errorf("meta key still there after its TTL; the test did not cover its expiry")
		}
		return errTransient
	})
	var ce *gate.CallError
	if !errors.As(err, &ce) || ce.Attempts != 2 {
		t.Fatalf("second run: %v, want a CallError with 2 attempts", err)
	}
	if st, _ := g.Status(ctx, job); st.Attempts != 2 || st.State != gate.CoolingDown {
		t.Fatalf("after the second failure: %+v, want cooling with 2 attempts", st)
	}
}
