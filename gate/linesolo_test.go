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

// A job that waited in line before, and left it, is still alone in its
// process's line the next time: its turn, given in its join's round trip,
// takes the job in that trip (two round trips on one node, as for a job
// that never waited; TestLineTakesTheTurnInTheJoinsRoundTrip).
func TestLineTurnInTheJoinAfterAnEarlierWait(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		if tg.IsCluster {
			continue // takes the job before it asks its upstreams: no turn in the join
		}
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := budgetOptions(t)
			own := tg.OwnClient(t)
			trips := &jobTrips{job: "inter2"}
			hookClient(own, trips)
			// No request refills during the test: the turns are the settles'.
			a, b, l1, l2 := spentPairRefilling(t, tg.Client, opts, slowRefill)
			c := newGate(t, own, opts)
			inter := gate.WithPriority(ctx, gate.PriorityInteractive)
			// A first wait, with the budget spent, in line until its
			// caller gives up.
			first, cancel := context.WithCancel(inter)
			defer cancel()
			waiting := gatetest.AcquireWait(first, c, "inter2", time.Minute)
			gatetest.InLine(t, a, "inter2")
			cancel()
			if r := gatetest.Answer(t, waiting, "the first wait not answered when its caller gave up"); !errors.Is(r.Err, context.Canceled) {
				t.Fatalf("the first wait, its caller gone: %v, want context.Canceled", r.Err)
			}
			waitUntil(t, 10*time.Second, "inter2's first place left", func() bool {
				st, err := a.Status(ctx, "inter2")
				return err == nil && !st.InLine
			})
			batch, head := interactiveAtTheHead(t, a, b, l1)
			defer func() { _ = head.Release(ctx) }()
			// l2's settle frees the last call beside the reserve: headroom.
			if err := l2.Succeed(ctx); err != nil {
				t.Fatal(err)
			}
			trips.n.Store(0)
			again, err := c.AcquireWait(inter, "inter2", time.Minute)
			got := trips.n.Load()
			if err != nil {
				t.Fatalf("the second wait, with the headroom its class keeps: %v, want admitted", err)
			}
			defer func() { _ = again.Release(ctx) }()
			if want := int64(2); got != want {
				t.Fatalf("the second wait of a job given its turn in its join: %d round trips, want %d (acquire, join)", got, want)
			}
			_ = batch
		})
	}
}
