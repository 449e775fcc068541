package gate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/redistest"
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
			if d := refusal(); d < 55*time.Second {
				t.Fatalf("no calls seen: %v, want the lease's time left (about a minute)", d)
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
