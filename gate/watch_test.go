package gate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/redistest"
)

// TestWatch: a watcher sees another process's failure and reset as they
// happen, and ends, leaving nothing subscribed, when its context ends.
func TestWatch(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			g := newGate(t, tg.Client, gate.Options{Prefix: prefix, Cooldown: time.Hour})
			other := newGate(t, tg.Client, gate.Options{Prefix: prefix, Cooldown: time.Hour})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch, err := g.Watch(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			nextState(t, ch, gate.Ready, time.Second)
			if err := failWith(t, other, "job", errBoom); !errors.Is(err, gate.ErrCoolingDown) {
				t.Fatal(err)
			}
			st := nextState(t, ch, gate.CoolingDown, time.Second)
			if st.Attempts != 1 || st.RetryAfter <= 50*time.Minute {
				t.Fatalf("cooling status %+v", st)
			}
			if err := other.Reset(context.Background(), "job"); err != nil {
				t.Fatal(err)
			}
			if st := nextState(t, ch, gate.Ready, time.Second); st.Attempts != 0 {
				t.Fatalf("after reset %+v", st)
			}
			cancel()
			select {
			case _, ok := <-ch:
				for ok {
					_, ok = <-ch
				}
			case <-time.After(5 * time.Second):
				t.Fatal("channel not closed after the context ended")
			}
			waitUntil(t, 5*time.Second, "listeners gone", func() bool { return gate.Listeners(g) == 0 })

			if _, err := g.Watch(context.Background(), ""); !errors.Is(err, gate.ErrInvalidJob) {
				t.Fatalf("Watch of an empty job: %v", err)
			}
		})
	}
}
