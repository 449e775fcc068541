package gate_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A running job's refusal says when its call should end, from how long
// this gate's calls run (issue 22): with fewer than 8 calls seen it is the
// lease's time left; after 8 short calls, about a second (the floor), not
// the minute of lease left. Status says the same.
func TestRunningWaitFollowsCallDurations(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			prefix := redistest.UniqueKey(t)
			g := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: time.Minute})
			other := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: time.Minute})
			refusal := func() time.Duration {
				t.Helper()
				l, err := other.Acquire(ctx, "running")
				if err != nil {
					t.Fatal(err)
				}
				defer l.Release(ctx)
				_, err = g.Acquire(ctx, "running")
				d, ok := gate.RetryAfter(err)
				if !errors.Is(err, gate.ErrInFlight) || !ok {
					t.Fatalf("duplicate: %v, want ErrInFlight with a wait", err)
				}
				if st := mustStatus(t, g, "running"); st.RetryAfter != d && (st.RetryAfter > d || st.RetryAfter < d-time.Second) {
					t.Errorf("Status.RetryAfter %v, refusal %v: want the same estimate", st.RetryAfter, d)
				}
				return d
			}
			// No calls seen: a young call's wait is the floor, a second,
			// not the lease's minute (it grows with the call's age).
			if d := refusal(); d < time.Second || d > 2*time.Second {
				t.Fatalf("no calls seen: %v, want about a second (the floor), not the lease's time left", d)
			}
			for i := 0; i < 8; i++ {
				if err := g.Do(ctx, "short", func(context.Context, *gate.Lease) error {
					time.Sleep(10 * time.Millisecond)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			if d := refusal(); d < time.Second || d > 2*time.Second {
				t.Fatalf("after 8 calls of 10 ms: %v, want about a second (the floor)", d)
			}
		})
	}
}

// The estimate is judged on Redis's clock: the run's time so far is from
// its fence (Redis's TIME at its acquire, in ms as the reading is), and
// its lease's time left is the key's PTTL; a running
// value held without a TTL (written by hand, not by a gate) counts as a
// whole lease left.
func TestRunningWaitOnRedisClock(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0) // Redis's clock moves only when told
	ctx := context.Background()
	prefix := redistest.UniqueKey(t)
	opts := gate.Options{Prefix: prefix, Lease: time.Minute}
	g := newGate(t, rdb, opts)
	other := newGate(t, rdb, opts)
	inFlight := func(job string) time.Duration {
		t.Helper()
		_, err := g.Acquire(ctx, job)
		d, ok := gate.RetryAfter(err)
		if !errors.Is(err, gate.ErrInFlight) || !ok {
			t.Fatalf("%s: %v, want ErrInFlight with a wait", job, err)
		}
		return d
	}
	l, err := other.Acquire(ctx, "running")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	redistest.Advance(m, 5*time.Second)
	// No calls seen: the run's age, 5 s (a client that comes back each
	// time waits twice as long), not the 55 s of lease left.
	if d := inFlight("running"); d < 4900*time.Millisecond || d > 6*time.Second {
		t.Fatalf("5 s into a 1 min lease, no calls seen: %v, want the 5 s the run has taken", d)
	}
	// Calls of 20 s seen: 20 s less the 5 s the run has taken (the
	// upstream's script reads Redis's clock to the millisecond).
	gate.SeedCallTimes(g, 20*time.Second, 8)
	if d := inFlight("running"); d < 14*time.Second || d > 15*time.Second {
		t.Fatalf("5 s into a run, calls of 20 s seen: %v, want about 15 s", d)
	}
	if err := rdb.Set(ctx, keyspace.Job(prefix, "foreign"), "r:0123456789abcdef0123456789abcdef", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if d := inFlight("foreign"); d != 20*time.Second {
		t.Fatalf("a running value without a TTL, calls of 20 s seen: %v, want 20 s (a whole lease left, nothing run yet known)", d)
	}
}

// Once the first renewal recorded the run's fence (Redis's clock at its
// acquire), the run's time so far is Redis's clock less the fence.
func TestRunningWaitFromTheFence(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0) // Redis's clock moves only when told
	ctx := context.Background()
	opts := gate.Options{Prefix: redistest.UniqueKey(t), Lease: time.Minute}
	g := newGate(t, rdb, opts)
	other := newGate(t, rdb, opts)
	l, err := other.Acquire(ctx, "running")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	waitUntil(t, 5*time.Second, "the first renewal recorded the fence", func() bool { return mustStatus(t, g, "running").Fence == l.Fence() })
	redistest.Advance(m, 5*time.Second)
	gate.SeedCallTimes(g, 20*time.Second, 8)
	_, err = g.Acquire(ctx, "running")
	if d, ok := gate.RetryAfter(err); !errors.Is(err, gate.ErrInFlight) || !ok || d < 14*time.Second || d > 15*time.Second+time.Millisecond {
		t.Fatalf("5 s into a fenced run, calls of 20 s seen: %v (%v), want about 15 s (Redis time is read in ms, the fence in µs)", d, err)
	}
}

// The estimate is the 90th percentile of the recent calls, not their
// shortest or their mean: with calls of 1 s to 10 s seen, a run that just
// began is expected to end in 10 s.
func TestRunningWaitIsTheNinetiethPercentile(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0)
	ctx := context.Background()
	opts := gate.Options{Prefix: redistest.UniqueKey(t), Lease: time.Minute}
	g := newGate(t, rdb, opts)
	other := newGate(t, rdb, opts)
	for i := 10; i >= 1; i-- {
		gate.SeedCallTimes(g, time.Duration(i)*time.Second, 1)
	}
	l, err := other.Acquire(ctx, "running")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	_, err = g.Acquire(ctx, "running")
	if d, ok := gate.RetryAfter(err); !errors.Is(err, gate.ErrInFlight) || !ok || d != 10*time.Second {
		t.Fatalf("calls of 1 s to 10 s seen, a run just begun: %v (%v), want 10 s", d, err)
	}
}

// A run past its estimate (calls of 2 s seen; a stuck call) is not
// refused with a second's wait until its lease ends: a client that asks
// again on each Retry-After waits 1 s, 1 s, 2 s, 4 s, … (the run's
// overrun), up to the lease's time left, and Status says the same.
func TestRunningWaitGrowsPastTheEstimate(t *testing.T) {
	for _, tc := range []struct {
		name string
		seed bool // 8 calls of 2 s seen; else none
		exp  []time.Duration
	}{
		// Past a 2 s estimate, 2 s into the run: 54 is the lease's time left.
		{"past the estimate", true, []time.Duration{1, 1, 2, 4, 8, 16, 32, 54}},
		// No call seen at all, from the run's start: its age, never the
		// whole lease at once, never a second at a time (56: the lease's
		// time left).
		{"no history", false, []time.Duration{1, 1, 2, 4, 8, 16, 32, 56}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, rdb := redistest.Miniredis(t)
			redistest.Advance(m, 0) // Redis's clock moves only when told
			ctx := context.Background()
			// Upstreams off: the job's own clock, to the microsecond (the
			// upstream's script reads Redis's clock to the millisecond).
			opts := gate.Options{Prefix: redistest.UniqueKey(t), Lease: 2 * time.Minute, UpstreamPolicy: gate.UpstreamPolicy{Off: true}}
			g := newGate(t, rdb, opts)
			other := newGate(t, rdb, opts)
			if tc.seed {
				gate.SeedCallTimes(g, 2*time.Second, 8)
			}
			l, err := other.Acquire(ctx, "stuck")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(ctx)
			if tc.seed {
				redistest.Advance(m, 2*time.Second) // the estimate is spent
			}
			var got []time.Duration
			for range 8 {
				_, err := g.Acquire(ctx, "stuck")
				d, ok := gate.RetryAfter(err)
				if !errors.Is(err, gate.ErrInFlight) || !ok {
					t.Fatalf("after %v: %v, want ErrInFlight with a wait", got, err)
				}
				if st := mustStatus(t, g, "stuck"); st.RetryAfter != d {
					t.Errorf("Status.RetryAfter %v, refusal %v: want the same", st.RetryAfter, d)
				}
				got = append(got, d)
				redistest.Advance(m, d) // the client comes back when told
			}
			exp := slices.Clone(tc.exp)
			for i := range exp {
				exp[i] *= time.Second
			}
			if !slices.Equal(exp, got) {
				t.Fatalf("waits of a client that keeps asking: %v, want %v", got, exp)
			}
		})
	}
}
