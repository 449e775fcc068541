package gate_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// Status and Reset, in the process that runs a job and in another, and
// an acquire refused in another, tell one wait for the running job:
// read from the lease's time left, not a whole lease (with most of the
// lease gone, Redis's clock moved), and from a whole lease where its key
// has no TTL (a value no gate wrote, or one an operator persisted: as
// far as anyone knows it runs for a lease). (The process that runs it
// refuses its own second call from the lease it holds, by its own clock,
// which miniredis's moved clock leaves behind: the test below shows it in
// real time.)
func TestRunningJobIsToldOneWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		// after moves the job's key on once it runs; bound is the most
		// the wait may then be.
		after func(t *testing.T, m *miniredis.Miniredis, rdb *redis.Client, key string)
		bound time.Duration
	}{
		{"lease mostly gone", func(t *testing.T, m *miniredis.Miniredis, _ *redis.Client, _ string) {
			redistest.Advance(m, 50*time.Second) // 10 s of the lease left
		}, 10 * time.Second},
		{"no TTL", func(t *testing.T, m *miniredis.Miniredis, rdb *redis.Client, key string) {
			redistest.Advance(m, 50*time.Second)
			if ok, err := rdb.Persist(context.Background(), key).Result(); err != nil || !ok {
				t.Fatalf("PERSIST %s: %v %v", key, ok, err)
			}
		}, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
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
			tc.after(t, m, rdb, keyspace.Job(opts.Prefix, "job"))
			for _, g := range []*gate.Gate{a, b} {
				st, err := g.Status(ctx, "job")
				if err != nil {
					t.Fatal(err)
				}
				if st.State != gate.Running || st.RetryAfter <= 0 || st.RetryAfter > tc.bound {
					t.Fatalf("Status of the running job: %+v, want Running within %v", st, tc.bound)
				}
				var reset, refused *gate.BlockedError
				if err := g.Reset(ctx, "job"); !errors.As(err, &reset) || reset.State != gate.Running {
					t.Fatalf("Reset of a running job: %v, want refused, Running", err)
				}
				if _, err := b.Acquire(ctx, "job"); !errors.As(err, &refused) || refused.State != gate.Running {
					t.Fatalf("Acquire of a running job in another process: %v, want refused, Running", err)
				}
				if reset.RetryAfter != st.RetryAfter || refused.RetryAfter != st.RetryAfter {
					t.Fatalf("waits: Status %v, Reset %v, a refused acquire %v: want one", st.RetryAfter, reset.RetryAfter, refused.RetryAfter)
				}
			}
		})
	}
}

// The process that runs a job answers a second call of it without Redis
// (its flight), from the lease it holds. That refusal tells the wait the
// job's value records, as Status, Reset and another process's refusal
// read it: the estimate the last renewal wrote, not the one this process
// has learned since. Real time, no moved clock, on every target.
func TestRunningJobIsToldOneWaitInItsOwnProcess(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := gate.Options{Prefix: redistest.UniqueKey(t), Lease: time.Minute}
			a, b := newGate(t, tg.Client, opts), newGate(t, tg.Client, opts)
			// a's calls take 30 s as far as it knows: its first renewal
			// (a second into the run) records that in the job's value.
			gate.SeedCallTimes(a, 30*time.Second, 64)
			started, release := make(chan struct{}), make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- a.Do(ctx, "job", func(context.Context, *gate.Lease) error {
					close(started)
					<-release
					return nil
				})
			}()
			<-started
			defer func() {
				close(release)
				if err := <-done; err != nil {
					t.Errorf("the run: %v", err)
				}
			}()
			// b has no calls of its own: until the value records an
			// estimate, b's Status says a second or so.
			deadline := time.Now().Add(10 * time.Second)
			for {
				st, err := b.Status(ctx, "job")
				if err != nil {
					t.Fatal(err)
				}
				if st.RetryAfter > 20*time.Second {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no renewal recorded a's estimate within 10s: %+v", st)
				}
				time.Sleep(50 * time.Millisecond)
			}
			// Since then a learned its calls take 2 s. The value still says
			// 30 s until the next renewal, 20 s on.
			gate.SeedCallTimes(a, 2*time.Second, 64)

			var waits []time.Duration
			var names []string
			for _, g := range []struct {
				name string
				g    *gate.Gate
			}{{"a", a}, {"b", b}} {
				st, err := g.g.Status(ctx, "job")
				if err != nil || st.State != gate.Running {
					t.Fatalf("%s.Status: %+v %v, want Running", g.name, st, err)
				}
				var refused, reset *gate.BlockedError
				err = g.g.Do(ctx, "job", func(context.Context, *gate.Lease) error {
					t.Errorf("%s ran the running job again", g.name)
					return nil
				})
				if !errors.As(err, &refused) || refused.State != gate.Running {
					t.Fatalf("%s.Do of the running job: %v, want refused, Running", g.name, err)
				}
				if err := g.g.Reset(ctx, "job"); !errors.As(err, &reset) || reset.State != gate.Running {
					t.Fatalf("%s.Reset of the running job: %v, want refused, Running", g.name, err)
				}
				waits = append(waits, st.RetryAfter, refused.RetryAfter, reset.RetryAfter)
				names = append(names, g.name+".Status", g.name+".Do", g.name+".Reset")
			}
			// The readings are taken moments apart, and each counts the
			// run's time from its own clock: they agree within a second
			// (the wrong estimate is 27 s off).
			lo, hi := slices.Min(waits), slices.Max(waits)
			if lo < 20*time.Second || hi-lo > time.Second {
				t.Fatalf("waits %v of %v: want one, about 28s", waits, names)
			}
		})
	}
}
