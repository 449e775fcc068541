package gate_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
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

// How long a lost lease was held is reported once: on EventLeaseLost by
// default (no settle follows), on the settle's event with
// ContinueOnLeaseLost (EventLeaseLost then carries no Held), so a
// hold-time metric counts each lease once. The stale owner's settle writes nothing and
// reports the state the lock holds (the new owner's Running).
func TestLostLeaseHeldReportedOnce(t *testing.T) {
	for _, cont := range []bool{false, true} {
		_, rdb := redistest.Miniredis(t)
		rec := newRecorder()
		g := newGate(t, rdb, gate.Options{Lease: 90 * time.Millisecond, Observer: rec, Redis: gate.RedisPolicy{ContinueOnLeaseLost: cont}})
		lock := keyspace.Job(gatetest.Prefix(g), "job")
		_ = g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
			rdb.Set(context.Background(), lock, "r:intruder", time.Minute) // another owner took over
			deadline := time.Now().Add(5 * time.Second)
			for !l.Lost() && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if !l.Lost() {
				t.Fatalf("continue=%v: lease not lost", cont)
			}
			return errTransient
		})
		var lost, settled []gate.Event
		for _, e := range rec.drain() {
			switch e.Kind {
			case gate.EventLeaseLost:
				lost = append(lost, e)
			case gate.EventSettled:
				settled = append(settled, e)
			}
		}
		if len(lost) != 1 {
			t.Fatalf("continue=%v: %d lease_lost events, want 1", cont, len(lost))
		}
		if !cont {
			if lost[0].Held <= 0 || len(settled) != 0 {
				t.Fatalf("default: lease_lost Held %v, %d settles; want Held set and no settle", lost[0].Held, len(settled))
			}
		} else if lost[0].Held != 0 || len(settled) != 1 || settled[0].Held <= 0 ||
			!errors.Is(settled[0].Err, gate.ErrNotOwned) || settled[0].State != gate.Running {
			t.Fatalf("ContinueOnLeaseLost: lease_lost Held %v, settles %+v; want Held on the settle alone", lost[0].Held, settled)
		}
	}
}

// With ContinueOnLeaseLost, fn runs on after its lease was taken over; its
// success then overwrites nothing, and Do says so (ErrNotOwned): fn's
// writes may overlap the new owner's.
func TestContinueSuccessAfterTakeoverIsNotOwned(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Lease: 90 * time.Millisecond, Redis: gate.RedisPolicy{ContinueOnLeaseLost: true}})
	lock := keyspace.Job(gatetest.Prefix(g), "job")
	err := g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
		rdb.Set(context.Background(), lock, "r:intruder", time.Minute)
		deadline := time.Now().Add(5 * time.Second)
		for !l.Lost() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	})
	if !errors.Is(err, gate.ErrNotOwned) {
		t.Fatalf("Do: %v, want ErrNotOwned", err)
	}
	if v, _ := rdb.Get(context.Background(), lock).Result(); v != "r:intruder" {
		t.Fatalf("new owner's lock is %q, want untouched", v)
	}
}

// renewCounter counts successful renewals, lease losses and Redis errors.
type renewCounter struct{ renewed, lost, redisErrors atomic.Int64 }

func (c *renewCounter) Observe(_ context.Context, e gate.Event) {
	switch {
	case e.Kind == gate.EventRenewed && e.Err == nil:
		c.renewed.Add(1)
	case e.Kind == gate.EventLeaseLost:
		c.lost.Add(1)
	case e.Kind == gate.EventRedisError:
		c.redisErrors.Add(1)
	}
}

// A renewal that succeeds keeps the lease: fn runs on, its context alive,
// and the lock's TTL is back to a full Lease after each renewal. Nothing
// is reported as a Redis error.
func TestRenewalKeepsTheLease(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	const lease = 60 * time.Millisecond
	c := &renewCounter{}
	g := newGate(t, rdb, gate.Options{Lease: lease, Observer: c})
	lock := keyspace.Job(gatetest.Prefix(g), "job")
	err := g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
		for i := 1; i <= 3; i++ {
			// Redis time passes; two more renewals make sure one came after.
			want := c.renewed.Load() + 2
			m.FastForward(lease / 2)
			deadline := time.Now().Add(5 * time.Second)
			for c.renewed.Load() < want && c.lost.Load() == 0 && time.Now().Before(deadline) {
				time.Sleep(2 * time.Millisecond)
			}
			if c.renewed.Load() < want || l.Lost() || ctx.Err() != nil {
				t.Fatalf("step %d: %d renewed, lost %v, ctx %v", i, c.renewed.Load(), l.Lost(), context.Cause(ctx))
			}
			if ttl := m.TTL(lock); ttl <= lease/2 {
				t.Fatalf("step %d: lock TTL %v, want it extended to about %v", i, ttl, lease)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if n := c.redisErrors.Load(); n != 0 {
		t.Fatalf("%d Redis errors reported by renewals Redis answered", n)
	}
}

// A renewal rewrites the running job's value (its fence, attempts and
// estimate): the attempt count it writes is the job's failures so far, so
// Status and another process's refusal read the same count before and
// after the run's renewals.
func TestRenewalKeepsTheAttemptCount(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	c := &renewCounter{}
	opts := gate.Options{Prefix: redistest.UniqueKey(t), Lease: 90 * time.Millisecond, Observer: c}
	g := newGate(t, rdb, opts)
	other := newGate(t, rdb, gate.Options{Prefix: opts.Prefix, Lease: opts.Lease})
	ctx := context.Background()
	for failures := 0; failures <= 1; failures++ {
		if failures > 0 {
			_ = failWith(t, g, "job", errTransient)
			redistest.Advance(m, mustStatus(t, g, "job").TTL+time.Millisecond) // the cooldown ends
		}
		l, err := g.Acquire(ctx, "job")
		if err != nil {
			t.Fatalf("after %d failures: %v", failures, err)
		}
		want := c.renewed.Load() + 2
		waitUntil(t, 5*time.Second, "two renewals", func() bool { return c.renewed.Load() >= want })
		if st := mustStatus(t, g, "job"); st.State != gate.Running || st.Attempts != failures {
			t.Errorf("after %d failures, renewed: Status %v with %d attempts, want running with %d", failures, st.State, st.Attempts, failures)
		}
		if b := blocked(t, other, "job"); b.State != gate.Running || b.Attempts != failures {
			t.Errorf("after %d failures, renewed: another process's refusal %v with %d attempts, want running with %d", failures, b.State, b.Attempts, failures)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A renewal is one round trip. Only a lease's first renewal, on a gate
// that knows no call durations yet, first reads the gate's in a trip of
// its own (renew.go, shareCalls); later ones do not, though none is known
// still. With no durations of its own to share, a renewal sends its
// renewal script alone, not the read of the gate's durations beside it.
func TestRenewalIsOneRoundTrip(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	names := &redistest.Commands{}
	rdb.AddHook(names)
	c := &renewCounter{}
	g := newGate(t, rdb, gate.Options{Lease: 60 * time.Millisecond, Observer: c})
	// The upstream is known (a call settled with no budget): the call is
	// not held to one at a time, with a reservation renewed beside it.
	if err := g.Do(context.Background(), "warm", okFn); err != nil {
		t.Fatal(err)
	}
	err := g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error {
		// The first renewals load the scripts (EVALSHA, then EVAL).
		waitUntil(t, 5*time.Second, "two renewals", func() bool { return c.renewed.Load() >= 2 })
		names.Take()
		from := c.renewed.Load()
		waitUntil(t, 5*time.Second, "six more renewals", func() bool { return c.renewed.Load() >= from+6 })
		// One renewal may be on its way.
		trips, renewed := names.Take(), c.renewed.Load()-from
		if int64(len(trips)) > renewed+1 {
			t.Errorf("%d round trips for %d renewals, want one each: %v", len(trips), renewed, trips)
		}
		for _, trip := range trips {
			if trip != "evalsha" {
				t.Fatalf("a renewal with nothing to share sent %v, want its script alone", trips)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
}
