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
