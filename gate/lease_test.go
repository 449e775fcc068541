package gate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/redistest"
)

func TestRenewalKeepsLongCallsLocked(t *testing.T) {
	for _, tg := range redistest.RealTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const lease = 150 * time.Millisecond
			rec := newRecorder()
			prefix := redistest.UniqueKey(t)
			g := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: lease, Observer: rec})
			other := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: lease})
			err := g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
				// Outlive the lease four times over; another process must
				// still be refused at every point.
				deadline := time.Now().Add(4 * lease)
				for time.Now().Before(deadline) {
					if _, err := other.Acquire(context.Background(), "job"); !errors.Is(err, gate.ErrInFlight) {
						t.Errorf("other process: %v, want ErrInFlight", err)
						return nil
					}
					if ctx.Err() != nil {
						t.Errorf("fn's context cancelled: %v", context.Cause(ctx))
						return nil
					}
					time.Sleep(lease / 5)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if n := countKind(rec.drain(), gate.EventRenewed); n < 6 {
				t.Fatalf("renewed %d times in 4 leases, want ≥ 6 (every Lease/3)", n)
			}
		})
	}
}

func TestLeaseLostWhenTakenOver(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const lease = 90 * time.Millisecond
			rec := newRecorder()
			g := newGate(t, tg.Client, gate.Options{Lease: lease, Observer: rec})
			lock := keyspace.Job(g.Options().Prefix, "job")
			var _ error
			const intruder = "r:someone-else"
			err := g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
				// Another owner took the job (our lease expired under a pause).
				if err := tg.Client.Set(context.Background(), lock, intruder, time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
					t.Fatal("fn's context not cancelled after losing the lease")
				}
				if !errors.Is(context.Cause(ctx), gate.ErrLeaseLost) {
					t.Fatalf("cause %v, want ErrLeaseLost", context.Cause(ctx))
				}
				if !l.Lost() {
					t.Fatal("Lost() = false")
				}
				return classify.Transient(ctx.Err(), 0)
			})
			if !errors.Is(err, gate.ErrLeaseLost) {
				t.Fatalf("Do: %v, want ErrLeaseLost", err)
			}
			// The settle was skipped: the new owner's lock is untouched.
			if v, _ := tg.Client.Get(context.Background(), lock).Result(); v != intruder {
				t.Fatalf("new owner's lock is %q, want untouched", v)
			}
			if n := countKind(rec.drain(), gate.EventLeaseLost); n != 1 {
				t.Fatalf("lease_lost events: %d, want 1", n)
			}
		})
	}
}

func TestLeaseLostAfterRenewFailures(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	f := &flaky{Client: rdb}
	const lease = 90 * time.Millisecond
	rec := newRecorder()
	g := newGate(t, f, gate.Options{Lease: lease, Observer: rec})
	start := time.Now()
	err := g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
		f.Down.Store(true) // Redis goes away while fn runs
		<-ctx.Done()
		return ctx.Err()
	})
	f.Down.Store(false)
	// Lost at the first failed renewal after the lock must have expired
	// by the local clock: the third, at Lease, plus one renewal timeout.
	if took := time.Since(start); took < lease || took > lease+lease/3+200*time.Millisecond {
		t.Fatalf("lease lost after %v", took)
	}
	if !errors.Is(err, gate.ErrLeaseLost) {
		t.Fatalf("Do: %v, want ErrLeaseLost", err)
	}
	evs := rec.drain()
	failed := 0
	for _, e := range evs {
		if e.Kind == gate.EventRenewed && e.Err != nil {
			failed++
		}
	}
	if failed != 3 || countKind(evs, gate.EventLeaseLost) != 1 {
		t.Fatalf("events: %d failed renewals, %d lease_lost; want 3 and 1", failed, countKind(evs, gate.EventLeaseLost))
	}
}

func TestContinueOnLeaseLostLetsFnFinish(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const lease = 90 * time.Millisecond
			rec := newRecorder()
			g := newGate(t, tg.Client, gate.Options{Lease: lease, ContinueOnLeaseLost: true, Observer: rec, Cooldown: time.Minute})
			lock := keyspace.Job(g.Options().Prefix, "job")
			var _ error
			err := g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
				tg.Client.Del(context.Background(), lock) // the lock vanished (eviction, failover)
				deadline := time.Now().Add(5 * time.Second)
				for !l.Lost() && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				if ctx.Err() != nil {
					t.Error("ContinueOnLeaseLost cancelled fn's context")
				}
				return classify.Transient(errBoom, 0)
			})
			var ce *gate.CallError
			if !errors.As(err, &ce) {
				t.Fatalf("Do: %v", err)
			}
			// Nobody acquired the job since, so the failure is still
			// recorded: no free retry.
			if exp, got := gate.CoolingDown, mustStatus(t, g, "job").State; exp != got {
				t.Fatalf("state: exp %v, got %v", exp, got)
			}
			if countKind(rec.drain(), gate.EventLeaseLost) != 1 {
				t.Fatal("loss not reported")
			}
		})
	}
}

func TestStaleOwnerCannotSettle(t *testing.T) {
	for _, tg := range redistest.RealTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const lease = 60 * time.Millisecond
			prefix := redistest.UniqueKey(t)
			// A worker paused past its lease: its renewals cannot reach
			// Redis, and ContinueOnLeaseLost with many allowed failures keeps it going.
			slow := &flaky{Client: tg.Client}
			g1 := newGate(t, slow, gate.Options{Prefix: prefix, Lease: lease, ContinueOnLeaseLost: true})
			g2 := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: time.Second})
			l1, err := g1.Acquire(context.Background(), "job")
			if err != nil {
				t.Fatal(err)
			}
			slow.Down.Store(true)
			var l2 *gate.Lease
			deadline := time.Now().Add(3 * time.Second)
			for l2 == nil {
				l2, err = g2.Acquire(context.Background(), "job")
				if err != nil && time.Now().After(deadline) {
					t.Fatalf("new owner could not acquire after the lease expired: %v", err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			slow.Down.Store(false)
			if l2.Fence() <= l1.Fence() {
				t.Fatalf("new fence %d not above stale %d", l2.Fence(), l1.Fence())
			}
			// The stale owner wakes up and reports: rejected, nothing written.
			if err := l1.Fail(context.Background(), errBoom); !errors.Is(err, gate.ErrNotOwned) {
				t.Fatalf("stale settle: %v, want ErrNotOwned", err)
			}
			if exp, got := gate.Running, mustStatus(t, g2, "job").State; exp != got {
				t.Fatalf("new owner's state: exp %v, got %v", exp, got)
			}
			if err := l2.Succeed(context.Background()); err != nil {
				t.Fatalf("new owner's release: %v", err)
			}
		})
	}
}

func TestSettleFailureKeepsLeaseAsCooldown(t *testing.T) {
	for _, tg := range redistest.RealTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const lease = 120 * time.Millisecond
			f := &flaky{Client: tg.Client}
			prefix := redistest.UniqueKey(t)
			g := newGate(t, f, gate.Options{Prefix: prefix, Lease: lease, Timeout: 100 * time.Millisecond})
			watcher := newGate(t, tg.Client, gate.Options{Prefix: prefix})
			err := g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
				f.Down.Store(true) // Redis unreachable when the failure is reported
				return errBoom
			})
			f.Down.Store(false)
			var ce *gate.CallError
			if !errors.As(err, &ce) || !errors.Is(err, gate.ErrUnavailable) || ce.State != gate.Running {
				t.Fatalf("Do: %v, want a CallError with an ErrUnavailable settle", err)
			}
			// It says so, and the wait it leaves: the lock's TTL, a lease.
			if ce.Written() || ce.RetryAfter != lease {
				t.Fatalf("CallError: written %v, RetryAfter %v; want unwritten, %v", ce.Written(), ce.RetryAfter, lease)
			}
			// No free retry: the job stays held until the lease runs out.
			if _, err := watcher.Acquire(context.Background(), "job"); !errors.Is(err, gate.ErrInFlight) {
				t.Fatalf("retry right after an unrecorded failure: %v, want ErrInFlight", err)
			}
			waitState(t, tg, watcher, "job", gate.Ready, lease)
		})
	}
}

// Settle, the adapters' verb after Acquire, returns what Do returns for
// the same outcome: nil for a success, a written *CallError with the
// cooldown for a failure, and ErrAlreadySettled's CallError when called
// twice.
func TestSettleReturnsWhatDoReturns(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			g := newGate(t, tg.Client, gate.Options{Cooldown: time.Minute, Jitter: -1})
			l, err := g.Acquire(ctx, "ok")
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Settle(ctx, nil); err != nil {
				t.Fatalf("Settle(nil): %v, want nil", err)
			}
			if l, err = g.Acquire(ctx, "ok"); err != nil {
				t.Fatalf("the job after a success: %v, want it free", err)
			}
			_ = l.Release(ctx)

			l, err = g.Acquire(ctx, "fails")
			if err != nil {
				t.Fatal(err)
			}
			err = l.Settle(ctx, errBoom)
			var ce *gate.CallError
			if !errors.As(err, &ce) || !errors.Is(err, errBoom) || !errors.Is(err, gate.ErrCoolingDown) {
				t.Fatalf("Settle(errBoom): %v, want a CallError cooling down that wraps it", err)
			}
			if !ce.Written() || ce.State != gate.CoolingDown || ce.RetryAfter != time.Minute || ce.Attempts != 1 {
				t.Fatalf("CallError: %+v, want written, cooling down for a minute, attempt 1", ce)
			}
			if wait, ok := gate.RetryAfter(err); !ok || wait != time.Minute {
				t.Fatalf("RetryAfter: %v %v, want a minute", wait, ok)
			}
			if err := l.Settle(ctx, errBoom); !errors.As(err, &ce) || !errors.Is(ce.SettleErr, gate.ErrAlreadySettled) || ce.Written() {
				t.Fatalf("second Settle: %v, want a CallError with ErrAlreadySettled", err)
			}
		})
	}
}

func TestCoalescingInProcess(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			rt := &roundTrips{}
			hook(tg, rt)
			g := newGate(t, tg.Client, gate.Options{Lease: time.Second})
			release := make(chan struct{})
			started := make(chan struct{})
			go func() {
				_ = g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error {
					close(started)
					<-release
					return nil
				})
			}()
			<-started
			before := rt.n.Load()
			var wg sync.WaitGroup
			var mu sync.Mutex
			refused := 0
			for i := 0; i < 50; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error {
						t.Error("duplicate ran")
						return nil
					})
					var b *gate.BlockedError
					if errors.As(err, &b) && errors.Is(err, gate.ErrInFlight) && b.RetryAfter > 0 {
						mu.Lock()
						refused++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if exp, got := int64(0), rt.n.Load()-before; exp != got {
				t.Fatalf("round trips for 50 local duplicates: exp %d, got %d", exp, got)
			}
			if refused != 50 {
				t.Fatalf("refused %d of 50", refused)
			}
			close(release)
		})
	}
}

func TestRoundTripsPerPath(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			rt := &roundTrips{}
			hook(tg, rt)
			g := newGate(t, tg.Client, gate.Options{Cooldown: time.Minute})
			// Load the scripts first: EVALSHA's first NOSCRIPT miss is a
			// one-off extra trip per server, not per call.
			_ = g.Do(context.Background(), "warm", func(context.Context, *gate.Lease) error { return errBoom })
			_ = g.Do(context.Background(), "warm2", func(context.Context, *gate.Lease) error { return nil })
			_, _ = g.Status(context.Background(), "warm")

			measure := func(fn func()) int64 {
				before := rt.n.Load()
				fn()
				return rt.n.Load() - before
			}
			// Each path runs once unmeasured on the same key first: on a
			// cluster, scripts are cached per node.
			okFn := func(context.Context, *gate.Lease) error { return nil }
			_ = g.Do(context.Background(), "s", okFn)
			success := measure(func() { _ = g.Do(context.Background(), "s", okFn) })
			_ = g.Do(context.Background(), "b", func(context.Context, *gate.Lease) error { return errBoom })
			_ = g.Do(context.Background(), "b", okFn)
			blocked := measure(func() { _ = g.Do(context.Background(), "b", okFn) })
			_, _ = g.Status(context.Background(), "b")
			status := measure(func() { _, _ = g.Status(context.Background(), "b") })
			if success != 2 || blocked != 1 || status != 1 {
				t.Fatalf("round trips: success %d (want 2), blocked %d (want 1), status %d (want 1)", success, blocked, status)
			}
		})
	}
}

// Calls coalesced behind an acquire that is still in flight get that
// acquire's answer: a cooling job is reported as cooling, with its wait,
// not as running.
func TestCoalescedCallsShareTheRefusal(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{Cooldown: time.Minute, Jitter: -1})
			_ = failWith(t, g, "job", errBoom)
			var wg sync.WaitGroup
			errs := make(chan error, 50)
			start := make(chan struct{})
			for i := 0; i < 50; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					errs <- g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error {
						t.Error("fn ran during the cooldown")
						return nil
					})
				}()
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				var b *gate.BlockedError
				if !errors.As(err, &b) || !errors.Is(err, gate.ErrCoolingDown) || b.RetryAfter < 50*time.Second || b.Attempts != 1 {
					t.Fatalf("coalesced refusal: %v (%+v), want cooling_down with the cooldown's wait", err, b)
				}
			}
		})
	}
}

// The context fn runs under names its lease, deep in the job's code (the
// upstream to call, the fence to write with); any other context names none.
func TestLeaseFromContext(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Upstream: "primary"})
	ctx := context.Background()
	if l := gate.LeaseFromContext(ctx); l != nil {
		t.Fatalf("a plain context names lease %v", l)
	}
	err := g.Do(ctx, "job", func(ctx context.Context, l *gate.Lease) error {
		derived, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if got := gate.LeaseFromContext(derived); got != l || got.Upstream() != "primary" || got.Fence() == 0 {
			t.Errorf("LeaseFromContext: %v, want fn's lease %v", got, l)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// An ungated lease (FailOpen, Redis down) is named too.
	f := &flaky{Client: rdb}
	f.Down.Store(true)
	down := newGate(t, f, gate.Options{FailOpen: true})
	err = down.Do(ctx, "job", func(ctx context.Context, l *gate.Lease) error {
		if got := gate.LeaseFromContext(ctx); got != l || got.Gated() {
			t.Errorf("LeaseFromContext of the ungated run: %v, want fn's ungated lease", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
