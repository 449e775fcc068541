package gate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A turn given to a caller that left the line before its process took it
// goes on: the call it reserved in the budget is given back at once, and
// its room is the next caller's, with no Redis error reported. On
// miniredis, whose clock stands still, the reservation never lapses by
// itself: without the give-back the next caller would wait for ever.
func TestLineTurnOfACallerThatLeftGoesOn(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0) // its clock still: nothing refills or lapses
	ctx := context.Background()
	opts := budgetOptions(t)
	a, b := newGate(t, rdb, opts), newGate(t, rdb, opts)
	cut := &flaky{Client: rdb}
	rec := newRecorder()
	copts := opts
	copts.Observer = rec
	c := newGate(t, cut, copts)
	l1, l2 := spend(t, a, b)
	defer func() { _ = l2.Release(ctx) }()

	ctx3, cancel3 := context.WithCancel(ctx)
	defer cancel3()
	got3 := gatetest.AcquireWait(ctx3, c, "j3", time.Hour)
	gatetest.InLine(t, a, "j3")
	got4 := gatetest.AcquireWait(ctx, c, "j4", time.Hour)
	if st := gatetest.InLine(t, a, "j4"); st.Ahead != 1 {
		t.Fatalf("the second caller in line: %+v, want one ahead", st)
	}
	// c's process cannot reach Redis: the turn l1's settle gives j3 (and
	// the call it reserves) is granted in Redis, not taken by c.
	cut.Down.Store(true)
	if err := l1.Succeed(ctx); err != nil {
		t.Fatal(err)
	}
	cancel3()
	if r := gatetest.Answer(t, got3, "j3 not answered when its caller left"); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("j3, its caller gone: %v, want context.Canceled", r.Err)
	}
	rec.drain()
	cut.Down.Store(false)
	l4 := granted(t, got4, "j4, once the turn of the caller that left went on")
	if err := l4.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range rec.drain() {
		if e.Kind == gate.EventRedisError {
			t.Fatalf("a Redis error reported with Redis reachable: %+v", e)
		}
	}
}
