package gate_test

import (
	"context"
	"errors"
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
// which miniredis's moved clock leaves behind.)
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
