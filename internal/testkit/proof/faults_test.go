package proof_test

import (
	"context"
	"errors"
	"github.com/retrygate/retrygate/internal/keyspace"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/faultproxy"
	"github.com/retrygate/retrygate/internal/testkit/proof"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// newOwnerGate is a gate on the same keys as stale, for the owner that
// takes the job over. Its lease is long so that, on a loaded machine, its
// own renewals cannot time out while the test inspects its lock.
func newOwnerGate(t *testing.T, rdb *redis.Client, stale *gate.Gate) *gate.Gate {
	t.Helper()
	o := optionsOf(stale)
	o.Lease = 5 * time.Second
	return newGate(t, rdb, o)
}

// newOwner acquires job on g as soon as the lock is free (the stale
// owner's lock expired or vanished), writes its fence to store and
// returns the lease, the execution recorded for it and the lock's value.
func newOwner(t *testing.T, g *gate.Gate, rdb *redis.Client, store *proof.FenceStore, job string, within time.Duration) (*gate.Lease, *execution, string) {
	t.Helper()
	ctx := context.Background()
	var (
		l   *gate.Lease
		err error
	)
	called := time.Now()
	eventually(t, within, "a second owner acquires the job", func() bool {
		called = time.Now()
		l, err = g.Acquire(ctx, job)
		if err != nil && !errors.Is(err, gate.ErrInFlight) {
			t.Fatalf("second owner: Acquire: %v", err)
		}
		return err == nil
	})
	e := &execution{worker: 2, job: job, called: called, start: time.Now(), fence: l.Fence(), gated: l.Gated()}
	e.wroteAt, e.wrote = time.Now(), store.Write(job, l.Fence(), "second owner")
	if e.wrote != nil {
		t.Fatalf("the new owner's write was rejected: %v", e.wrote)
	}
	lock := keyspace.Job(optionsOf(g).Prefix, job)
	v, err := rdb.Get(ctx, lock).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", lock, err)
	}
	return l, e, v
}

// checkUntouched asserts that the job's key still holds the new owner's
// lease (its token, fence and attempt count) with its TTL.
func checkUntouched(t *testing.T, g *gate.Gate, rdb *redis.Client, job, lockValue string, fence int64, attempts string) {
	t.Helper()
	ctx := context.Background()
	key := keyspace.Job(optionsOf(g).Prefix, job)
	if got, err := rdb.Get(ctx, key).Result(); err != nil || got != lockValue {
		t.Errorf("new owner's lease: got %q (%v), want %q untouched", got, err, lockValue)
	}
	if p := rdb.PTTL(ctx, key).Val(); p <= 0 {
		t.Errorf("new owner's lease lost its TTL: %v", p)
	}
	if attempts == "" {
		attempts = "0"
	}
	// A lease taken on a free key holds "r:<token>:<fence>:0:" (its
	// acquire recorded the fence; "r:<token>" when that record failed)
	// until its first renewal; one taken by the script has it already.
	if want := ":" + formatFence(fence) + ":" + attempts; strings.Count(lockValue, ":") != 1 &&
		!strings.HasSuffix(lockValue, want) && !strings.HasSuffix(lockValue, want+":") {
		t.Errorf("new owner's lease %q does not end with its fence and attempts %q", lockValue, want)
	}
}

// TestLatencyAboveLeaseFences: when every round trip takes longer than
// the lease while fn runs, the gate fences the lease within Lease (the
// lock's TTL: renewals every Lease/3 keep failing until it must have
// expired) plus one renewal timeout of the fault's onset, cancels fn with ErrLeaseLost, and never settles over the owner
// that acquired the job after the lock expired.
func TestLatencyAboveLeaseFences(t *testing.T) {
	srv := redistest.Server(t)
	p := faultproxy.New(t, srv.Addr())
	const lease = 150 * time.Millisecond
	o := gate.Options{Lease: lease, Redis: gate.RedisPolicy{Timeout: time.Second}}
	g1 := newGate(t, faultClient(t, p.Addr(), time.Second, 0), o)
	direct := srv.Client(t)
	g2 := newOwnerGate(t, direct, g1)
	renewTimeout := min(lease/3, o.Redis.Timeout)
	bound := lease + renewTimeout

	const job = "doc-latency"
	var (
		h     history
		store proof.FenceStore
	)
	started := make(chan context.Context, 1)
	write := make(chan struct{})
	done := make(chan error, 1)
	e1 := &execution{worker: 1, job: job, called: time.Now()}
	go func() {
		done <- g1.Do(context.Background(), job, func(ctx context.Context, l *gate.Lease) error {
			e1.start, e1.fence, e1.gated = time.Now(), l.Fence(), l.Gated()
			started <- ctx
			<-write // a worker that ignores the cancellation: the worst case
			e1.wroteAt, e1.wrote = time.Now(), store.Write(job, l.Fence(), "stale owner")
			e1.end = time.Now()
			return nil
		})
	}()
	fctx := <-started
	onset := time.Now()
	p.SetLatency(lease + 250*time.Millisecond)

	select {
	case <-fctx.Done():
	case <-time.After(bound + slack):
		t.Fatalf("fn's context not cancelled within %v of the latency onset", bound+slack)
	}
	fencedIn := time.Since(onset)
	if !errors.Is(context.Cause(fctx), gate.ErrLeaseLost) {
		t.Fatalf("cause %v, want ErrLeaseLost", context.Cause(fctx))
	}
	t.Logf("lease fenced %v after the latency onset (bound Lease + renewal timeout = %v)", fencedIn, bound)

	l2, e2, lockValue := newOwner(t, g2, direct, &store, job, lease+slack)
	if l2.Fence() <= e1.fence {
		t.Fatalf("new owner's fence %d not above the stale one's %d", l2.Fence(), e1.fence)
	}
	close(write)
	err := <-done
	if !errors.Is(err, gate.ErrLeaseLost) {
		t.Fatalf("Do: %v, want ErrLeaseLost", err)
	}
	e1.err = err
	finishTakeover(t, &h, o, g2, direct, job, lockValue, l2, e1, e2)
}

// finishTakeover ends a scenario where a new owner took over a job whose
// stale owner kept running: the stale write was rejected, the new owner's
// lock is untouched by the stale settle, the new owner finishes, and the
// history shows exactly one overlap, with its stale write rejected.
func finishTakeover(t *testing.T, h *history, o gate.Options, gNew *gate.Gate, direct *redis.Client,
	job, lockValue string, lNew *gate.Lease, stale, fresh *execution) {
	t.Helper()
	if !errors.Is(stale.wrote, proof.ErrStaleFence) {
		t.Fatalf("stale owner's write: %v, want ErrStaleFence", stale.wrote)
	}
	checkUntouched(t, gNew, direct, job, lockValue, lNew.Fence(), "")
	if err := lNew.Succeed(context.Background()); err != nil {
		t.Fatalf("new owner's Succeed: %v", err)
	}
	fresh.end = time.Now()
	h.add(stale)
	h.add(fresh)
	if st := h.check(t, o); st.overlaps != 1 || st.staleRejected != 1 {
		t.Fatalf("expected one overlap with its stale write rejected: %+v", st)
	}
}

// TestBlackholeAtAcquire: a Redis that accepts connections but never
// answers fails the acquire closed within the client's bound, or runs fn
// once ungated with FailOpen.
//
// Measured on a loaded 2-core machine under -race with ReadTimeout 100ms
// and MaxRetries 1: ErrUnavailable after about 215ms (two 100ms reads
// plus go-redis's retry backoff), bounded by
// ReadTimeout×(MaxRetries+1) + MaxRetryBackoff (512ms).
func TestBlackholeAtAcquire(t *testing.T) {
	srv := redistest.Server(t)
	const (
		readTimeout = 100 * time.Millisecond
		maxRetries  = 1
		backoff     = 512 * time.Millisecond // go-redis's default MaxRetryBackoff
	)
	bound := readTimeout*(maxRetries+1) + backoff

	setup := func(t *testing.T, o gate.Options) (*gate.Gate, *faultproxy.Proxy) {
		p := faultproxy.New(t, srv.Addr())
		g := newGate(t, faultClient(t, p.Addr(), readTimeout, maxRetries), o)
		if _, err := g.Status(context.Background(), "warm"); err != nil { // a pooled connection, as in production
			t.Fatal(err)
		}
		p.Blackhole(true)
		return g, p
	}

	t.Run("fail closed", func(t *testing.T) {
		g, p := setup(t, gate.Options{})
		called := 0
		start := time.Now()
		err := g.Do(context.Background(), "doc", func(context.Context, *gate.Lease) error { called++; return nil })
		took := time.Since(start)
		if !errors.Is(err, gate.ErrUnavailable) || called != 0 {
			t.Fatalf("Do: %v, fn called %d times; want ErrUnavailable and no call", err, called)
		}
		if took < readTimeout || took > bound+slack {
			t.Fatalf("ErrUnavailable after %v, want within [%v, %v]", took, readTimeout, bound+slack)
		}
		t.Logf("blackhole: ErrUnavailable after %v (bound ReadTimeout×(MaxRetries+1) + MaxRetryBackoff = %v)", took, bound)

		// Not sticky: once the network is back, the gate works again.
		p.Blackhole(false)
		eventually(t, 2*time.Second, "the gate recovers after the blackhole", func() bool {
			return g.Do(context.Background(), "doc", func(context.Context, *gate.Lease) error { called++; return nil }) == nil
		})
	})

	t.Run("fail closed on the caller's deadline", func(t *testing.T) {
		// The caller's deadline reaches the socket (ContextTimeoutEnabled)
		// and ends the wait first; Acquire then reports the caller's
		// context error, not ErrUnavailable, and never runs fn.
		g, _ := setup(t, gate.Options{Redis: gate.RedisPolicy{FailOpen: true}})
		const deadline = 60 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		called := 0
		start := time.Now()
		err := g.Do(ctx, "doc", func(context.Context, *gate.Lease) error { called++; return nil })
		took := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) || called != 0 {
			t.Fatalf("Do: %v, fn called %d times; want the deadline and no call", err, called)
		}
		if took > deadline+slack {
			t.Fatalf("returned after %v, want about %v", took, deadline)
		}
	})

	t.Run("fail open", func(t *testing.T) {
		g, _ := setup(t, gate.Options{Redis: gate.RedisPolicy{FailOpen: true}})
		called := 0
		start := time.Now()
		err := g.Do(context.Background(), "doc", func(_ context.Context, l *gate.Lease) error {
			called++
			if l.Gated() || l.Fence() != 0 {
				t.Errorf("fail-open lease: Gated %v, Fence %d; want ungated, 0", l.Gated(), l.Fence())
			}
			return nil
		})
		took := time.Since(start)
		if err != nil || called != 1 {
			t.Fatalf("Do: %v, fn called %d times; want nil and one call", err, called)
		}
		if took > bound+slack {
			t.Fatalf("fail-open call took %v, want within %v", took, bound+slack)
		}
	})
}

// TestRedisRestartMidCall: a redis-server killed and restarted empty
// while fn runs loses the lock, so a second owner may run at once; it gets
// a higher fence (fences come from Redis TIME, not from the lost meta
// key), the first owner's write is rejected and its settle writes nothing.
func TestRedisRestartMidCall(t *testing.T) {
	srv := redistest.Server(t)
	const lease = 300 * time.Millisecond
	o := gate.Options{Lease: lease, Redis: gate.RedisPolicy{Timeout: time.Second}}
	g1 := newGate(t, faultClient(t, srv.Addr(), time.Second, 1), o)
	direct := faultClient(t, srv.Addr(), time.Second, 1)
	g2 := newOwnerGate(t, direct, g1)

	const job = "doc-restart"
	var store proof.FenceStore
	started := make(chan struct{})
	write := make(chan struct{})
	done := make(chan error, 1)
	e1 := &execution{worker: 1, job: job, called: time.Now()}
	go func() {
		done <- g1.Do(context.Background(), job, func(ctx context.Context, l *gate.Lease) error {
			e1.start, e1.fence, e1.gated = time.Now(), l.Fence(), l.Gated()
			close(started)
			<-write
			e1.wroteAt, e1.wrote = time.Now(), store.Write(job, l.Fence(), "first owner")
			e1.end = time.Now()
			return nil
		})
	}()
	<-started
	srv.Kill()
	srv.Restart(t)

	l2, e2, lockValue := newOwner(t, g2, direct, &store, job, slack)
	if l2.Fence() <= e1.fence {
		t.Fatalf("fence after restart %d not above %d", l2.Fence(), e1.fence)
	}
	close(write)
	err := <-done
	if !errors.Is(err, gate.ErrLeaseLost) && !errors.Is(err, gate.ErrNotOwned) {
		t.Fatalf("first owner's Do: %v, want ErrLeaseLost or ErrNotOwned", err)
	}
	if !errors.Is(e1.wrote, proof.ErrStaleFence) {
		t.Fatalf("first owner's write: %v, want ErrStaleFence", e1.wrote)
	}
	checkUntouched(t, g2, direct, job, lockValue, l2.Fence(), "")
	if err := l2.Succeed(context.Background()); err != nil {
		t.Fatalf("second owner's Succeed: %v", err)
	}
	e2.end = time.Now()

	// The restarted server serves the first gate's pooled client too.
	var f3 int64
	eventually(t, 2*time.Second, "the first gate acquires after the restart", func() bool {
		return g1.Do(context.Background(), job, func(_ context.Context, l *gate.Lease) error { f3 = l.Fence(); return nil }) == nil
	})
	if f3 <= l2.Fence() {
		t.Fatalf("fence %d not above %d", f3, l2.Fence())
	}
	// Invariant 1 does not hold here by design: the restart dropped a live
	// lock, so the overlap is not bounded by the lease. What still holds is
	// fencing: the stale write was rejected (checked above).
}

// TestPausedWorkerIsFenced: a worker whose fn blocks past its lease while
// its renewals cannot reach Redis (its network is blackholed) loses the
// job to another worker; when it wakes, its write is rejected by the
// fence-checking store and its settle writes nothing: ErrLeaseLost by
// default (no Redis call), ErrNotOwned with ContinueOnLeaseLost (the
// settle reaches Redis and finds another owner).
func TestPausedWorkerIsFenced(t *testing.T) {
	for _, tc := range []struct {
		name string
		cont bool
		out  outcome
		want error
	}{
		{"fence policy, success", false, succeed, gate.ErrLeaseLost},
		{"fence policy, failure", false, failTransient, gate.ErrLeaseLost},
		{"continue policy, success", true, succeed, gate.ErrNotOwned},
		{"continue policy, failure", true, failTransient, gate.ErrNotOwned},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Server(t)
			p := faultproxy.New(t, srv.Addr())
			const lease = 150 * time.Millisecond
			o := gate.Options{Lease: lease, Redis: gate.RedisPolicy{ContinueOnLeaseLost: tc.cont, Timeout: time.Second}}
			gA := newGate(t, faultClient(t, p.Addr(), 50*time.Millisecond, 0), o)
			direct := srv.Client(t)
			gB := newOwnerGate(t, direct, gA)

			const job = "doc-paused"
			var (
				h     history
				store proof.FenceStore
			)
			started := make(chan context.Context, 1)
			resume := make(chan struct{})
			done := make(chan error, 1)
			eA := &execution{worker: 1, job: job, called: time.Now(), outcome: tc.out}
			go func() {
				done <- gA.Do(context.Background(), job, func(ctx context.Context, l *gate.Lease) error {
					eA.start, eA.fence, eA.gated = time.Now(), l.Fence(), l.Gated()
					started <- ctx
					<-resume // paused: a stop-the-world pause, a swapped-out process
					eA.wroteAt, eA.wrote = time.Now(), store.Write(job, l.Fence(), "paused worker")
					eA.end = time.Now()
					return tc.out.err()
				})
			}()
			fctx := <-started
			p.Blackhole(true)

			lB, eB, lockValue := newOwner(t, gB, direct, &store, job, lease+slack)
			if !tc.cont {
				eventually(t, lease+slack, "the paused worker's context is cancelled", func() bool { return fctx.Err() != nil })
				if !errors.Is(context.Cause(fctx), gate.ErrLeaseLost) {
					t.Fatalf("cause %v, want ErrLeaseLost", context.Cause(fctx))
				}
			}
			p.Blackhole(false) // the worker wakes with a working network
			close(resume)
			err := <-done
			eA.err = err
			if !errors.Is(err, tc.want) {
				t.Fatalf("paused worker's Do: %v, want %v", err, tc.want)
			}
			finishTakeover(t, &h, o, gB, direct, job, lockValue, lB, eA, eB)
		})
	}
}
