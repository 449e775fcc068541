package gate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
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
