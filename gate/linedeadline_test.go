package gate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A caller answered at its deadline while Redis holds its turn's acquire
// is answered with what it waited for: its refusal event says it waited
// in line about the whole wait, not the first refusal's none.
func TestLineDeadlineRefusalSaysItWaited(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := budgetOptions(t)
			rec := newRecorder()
			opts.Observer = rec
			joins := &jobTrips{job: "j3", mark: true}
			c, h, a, l1 := stalledGate(t, tg, opts, time.Second, carriesTurn, joins)
			defer h.free()
			const wait = 3 * time.Second
			got := gatetest.AcquireWait(ctx, c, "j3", wait)
			gatetest.InLine(t, a, "j3")
			waitUntil(t, 10*time.Second, "j3's join answered", func() bool { return joins.back.Load() > 0 })
			if err := l1.Succeed(ctx); err != nil { // the room goes to j3's turn, whose acquire stalls
				t.Fatal(err)
			}
			r := gatetest.Answer(t, got, "j3 not answered at its deadline")
			if !errors.Is(r.Err, gate.ErrUpstreamCooling) {
				t.Fatalf("answered %v, want refused by the upstream", r.Err)
			}
			// Told to ask again after one refill, in its text as well.
			if d, ok := gate.RetryAfter(r.Err); !ok || !strings.Contains(r.Err.Error(), "retry in "+d.String()) {
				t.Fatalf("its text %q, want the wait RetryAfter tells (%v)", r.Err, d)
			}
			if h.stalled.Load() == 0 {
				t.Fatal("no turn's acquire was stalled: the test proves nothing")
			}
			var waited []time.Duration
			for _, e := range rec.drain() {
				if e.Kind == gate.EventRefused && e.Job == "j3" {
					waited = append(waited, e.Waited)
				}
			}
			if len(waited) != 1 || waited[0] < wait/2 {
				t.Fatalf("j3's refusal events say it waited %v, want one that says about %v", waited, wait)
			}
			h.free()
			waitUntil(t, 10*time.Second, "j3 given back", func() bool {
				st, err := a.Status(ctx, "j3")
				return err == nil && st.State != gate.Running
			})
		})
	}
}

// A caller whose turn's reservation lapsed before its acquire (its
// process stalled on the way) and whose room another call took meanwhile
// is refused by the budget at that acquire: it goes back in line and is
// admitted at the next refill within its wait, not answered with the
// refusal.
func TestLineTurnRefusedAtItsAcquireWaitsAgain(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := budgetOptions(t)
			// A request refills every 2 s: the room j4 takes is the only
			// one until then, so j3's lapsed turn meets a spent budget.
			collects := &stallCmds{match: func(args []any) bool { return isCollect(redis.NewCmd(context.Background(), args...)) }, release: make(chan struct{})}
			close(collects.release) // counted, not stalled
			c, h, a, l1 := stalledGate(t, tg, opts, 2*time.Second, carriesTurn, collects)
			got := gatetest.AcquireWait(ctx, c, "j3", 8*time.Second)
			gatetest.InLine(t, a, "j3")
			// Its join's round trip answered: a room freed before that is
			// given in the join, and the turn taken there (inTurn), not by
			// the acquire this test stalls (one busy run in eight).
			waitUntil(t, 20*time.Second, "j3's join answered", func() bool { return collects.sent.Load() > 0 })
			if err := l1.Succeed(ctx); err != nil { // the room goes to j3's turn, whose acquire stalls
				t.Fatal(err)
			}
			waitUntil(t, 20*time.Second, "j3's turn's acquire sent", func() bool { return h.stalled.Load() > 0 })
			// The reservation lapses (as it does when the process stalls
			// past it), and a call that does not wait takes the room.
			_, calls := keyspace.Budget(opts.Prefix, opts.Upstream)
			turns, err := tg.Client.ZRange(ctx, calls, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			lapsed := 0
			for _, m := range turns {
				if strings.HasPrefix(m, "turn:") {
					lapsed += int(tg.Client.ZRem(ctx, calls, m).Val())
				}
			}
			if lapsed != 1 {
				t.Fatalf("%d turns' reservations among %q, want j3's one", lapsed, turns)
			}
			l4, err := a.Acquire(ctx, "j4")
			if err != nil {
				t.Fatalf("the room j3's lapsed turn held: %v", err)
			}
			defer func() { _ = l4.Release(ctx) }()
			h.free()
			r := gatetest.Answer(t, got, "j3 not answered within its wait")
			if r.Err != nil {
				t.Fatalf("j3 answered %v, want a lease at the next refill", r.Err)
			}
			defer func() { _ = r.Lease.Release(ctx) }()
			if h.stalled.Load() < 2 {
				t.Fatalf("%d turns' acquires, want j3's second turn's too", h.stalled.Load())
			}
		})
	}
}
