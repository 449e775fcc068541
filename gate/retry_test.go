package gate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A duplicate of a running 4 s call is told about the call's time left,
// not its lease's minute, once 8 calls of that kind have ended anywhere:
// in the process that runs it and in another that settled a call, from
// the start (the durations travel with the settles); in a fresh one, once
// the runner's first renewal has recorded its estimate (within a second;
// before it, a young call's wait is a second). Status, Reset and a refused
// Do tell the same wait.
func TestRunningWaitIsTheCallsTimeLeft(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			const call = 4 * time.Second
			opts := gate.Options{Prefix: redistest.UniqueKey(t), Lease: time.Minute}
			runner := newGate(t, tg.Client, opts)
			second := newGate(t, tg.Client, opts)
			slow := func(context.Context, *gate.Lease) error { time.Sleep(call); return nil }
			// The upstream is known (a call settled with no budget): its
			// calls are not held to one at a time.
			if err := runner.Do(ctx, "known", okFn); err != nil {
				t.Fatal(err)
			}

			// Eight calls of 2 s end, in the runner's process.
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := runner.Do(ctx, jobName(i), slow); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if err := second.Do(ctx, "warm", okFn); err != nil { // the second process settles one call
				t.Fatal(err)
			}

			started := make(chan time.Time)
			done := make(chan error)
			go func() {
				done <- runner.Do(ctx, "job", func(context.Context, *gate.Lease) error {
					started <- time.Now()
					time.Sleep(call)
					return nil
				})
			}()
			start := <-started
			fresh := newGate(t, tg.Client, opts)
			check := func(who string, wait time.Duration) {
				t.Helper()
				left := call - time.Since(start)
				if left < time.Second {
					t.Skipf("%s: the machine is too slow to tell: %v of the call left", who, left)
				}
				if wait < left/2 || wait > 2*left {
					t.Errorf("%s: told %v with %v of the call left (the lease has a minute): want within half and twice that", who, wait, left)
				}
			}
			for _, g := range []struct {
				who string
				g   *gate.Gate
			}{{"the runner's process", runner}, {"a second process", second}, {"a fresh process", fresh}} {
				if g.g == fresh {
					// After the runner's first renewal (firstRenewal, a second).
					time.Sleep(time.Until(start.Add(1500 * time.Millisecond)))
				}
				var b *gate.BlockedError
				if err := g.g.Do(ctx, "job", okFn); !errors.As(err, &b) || !errors.Is(err, gate.ErrInFlight) {
					t.Fatalf("%s: Do: %v, want ErrInFlight", g.who, err)
				}
				check(g.who+", Do", b.RetryAfter)
				st, err := g.g.Status(ctx, "job")
				if err != nil || st.State != gate.Running {
					t.Fatalf("%s: Status: %+v %v", g.who, st, err)
				}
				check(g.who+", Status", st.RetryAfter)
				if err := g.g.Reset(ctx, "job"); !errors.As(err, &b) {
					t.Fatalf("%s: Reset of a running job: %v, want a refusal", g.who, err)
				}
				check(g.who+", Reset", b.RetryAfter)
				// The three were asked a moment apart: the same wait, within
				// a second (a lease's raw TTL would be 58 s apart).
				if d := st.RetryAfter - b.RetryAfter; d > time.Second || d < -time.Second {
					t.Errorf("%s: Status says %v, Reset %v: want the same wait", g.who, st.RetryAfter, b.RetryAfter)
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
