package gate_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// At a storm's start no reading has come back from the upstream: a first
// call that stalls does not let the calls queued behind it through at
// once (issue 37.5). With the default upstream and no reading, every
// other job is refused with a wait to come back (a call's length), and
// none reaches the upstream until the first settles; then the next goes.
func TestNoReadingYetCallsGoOneAtATime(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Prefix: redistest.UniqueKey(t), Cooldown: time.Second})
	ctx := context.Background()
	started, stalled, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- g.Do(ctx, "first", func(context.Context, *gate.Lease) error {
			close(started)
			<-stalled
			return nil
		})
	}()
	<-started
	var calls atomic.Int32
	for i := range 10 {
		err := g.Do(ctx, fmt.Sprintf("queued-%d", i), func(context.Context, *gate.Lease) error {
			calls.Add(1)
			return nil
		})
		if wait, ok := gate.RetryAfter(err); err == nil || !ok || wait <= 0 {
			t.Fatalf("a call behind the stalled first: %v (wait %v), want refused with a wait", err, wait)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d calls reached the upstream behind the stalled first, want none", n)
	}
	close(stalled)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := g.Do(ctx, "queued-0", okFn); err != nil {
		t.Fatalf("the next call once the first settled: %v", err)
	}
}

// A provider that sends no budget and never refuses a call is not paced:
// before its first 429 only its calls in flight are bounded, 32 at first
// and one more for each call it accepted. 32 callers at once are all
// served at once; once they came back, 64 are, then 128: no caller is
// refused, so none waits. (With the bound at one more than it served, or
// growing on time instead of on answers, a round is refused.)
func TestNoBudgetProviderIsNotPaced(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{Prefix: redistest.UniqueKey(t), Lease: time.Minute})
			ctx := context.Background()
			if err := g.Do(ctx, "known", okFn); err != nil { // it sends no budget
				t.Fatal(err)
			}
			for round, n := range []int{32, 64, 128} {
				var inFlight atomic.Int32 // never falls: each call waits for all
				all := make(chan struct{})
				errs := make(chan error, n)
				for i := range n {
					go func() {
						errs <- g.Do(ctx, fmt.Sprintf("r%d-%d", round, i), func(context.Context, *gate.Lease) error {
							inFlight.Add(1)
							<-all // every caller's call runs at once
							return nil
						})
					}()
				}
				for deadline := time.Now().Add(30 * time.Second); inFlight.Load() < int32(n) && time.Now().Before(deadline); {
					if len(errs) > 0 {
						break // a caller was refused
					}
					time.Sleep(time.Millisecond)
				}
				most := inFlight.Load()
				close(all)
				for range n {
					if err := <-errs; err != nil {
						t.Fatalf("round %d, %d callers at once: %v, want every call served without a wait", round, n, err)
					}
				}
				if most != int32(n) {
					t.Fatalf("round %d: %d calls ran at once, want all %d", round, most, n)
				}
			}
		})
	}
}

// The first 429 of a call the bound before any 429 admitted starts the
// learned rate, as an unbounded call's did: the upstream cools for one
// call's length, not for UpstreamPolicy.Cooldown (an hour here), which
// every caller would wait out. (Read as a call no rate judged, it cooled
// for the Cooldown: a storm's service stopped for ten seconds.)
func TestFirst429OfABoundedCallStartsTheRate(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			// A 429 with no wait, classified so.
			g := upstreamGate(t, tg, redistest.UniqueKey(t), gate.Options{Lease: time.Minute, Classify: upstreamClassifier(0),
				UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Hour}})
			ctx := context.Background()
			if err := g.Do(ctx, "known", okFn); err != nil { // it sends no budget
				t.Fatal(err)
			}
			_ = failWith(t, g, "a", errRateLimited)
			up, err := upstreamStatus(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			if up.State != gate.Ready && up.RetryAfter > time.Minute {
				t.Fatalf("after the first 429: %+v, want a wait of about one call's length, not the hour's Cooldown", up)
			}
			if up.Budget.LearnedRPM <= 0 {
				t.Fatalf("after the first 429: %+v, want a rate learned", up)
			}
		})
	}
}

// Under the budget's documented ACL (redistest.ACLUpstream), a provider
// that sends no budget is learned, and the callers its learned rate
// refuses are told their turns with no command refused: the queue of
// turns is read with HMGET and written with HSET, which the ACL grants
// (read with HGET, which it does not, every such refusal was a Redis
// error).
func TestLearnedTurnsUnderTheDocumentedACL(t *testing.T) {
	prefix := "acllearned"
	s := redistest.ACLServer(t, prefix, redistest.ACLUpstream)
	rec := newRecorder()
	// The default upstream, a 429 with no wait in it, as the Quickstart meets.
	g := newGate(t, s.Client(t), gate.Options{Prefix: prefix, Lease: time.Minute, Classify: upstreamClassifier(0), Observer: rec})
	ctx := context.Background()
	if err := g.Do(ctx, "known", okFn); err != nil { // it sends no budget
		t.Fatal(err)
	}
	_ = failWith(t, g, "first-429", errRateLimited)
	refused := false
	for i := 0; i < 20 && !refused; i++ {
		err := g.Do(ctx, fmt.Sprintf("j%d", i), okFn)
		if err == nil {
			continue
		}
		wait, ok := gate.RetryAfter(err)
		if !ok || wait <= 0 {
			t.Fatalf("call %d after the first 429: %v, want served or refused with a wait", i, err)
		}
		refused = true
	}
	if !refused {
		t.Fatal("20 calls in a row after the first 429 all served, want the learned rate to refuse one")
	}
	for _, e := range rec.drain() {
		if e.Kind == gate.EventRedisError {
			t.Fatalf("a command refused under the budget's ACL: %+v", e)
		}
	}
}
