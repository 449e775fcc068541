package gatequeue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gatequeue"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A job the budget refuses while callers wait in its upstream's line runs
// again when its turn would come, after theirs (the refusal's wait), not
// when the next request refills: snoozed then, it would be refused again
// behind the same line. It is told its place (Plan.Ahead), and so is a
// worker that may wait (gate Options.Wait) and whose turn is further
// away.
func TestRunRefusedBehindTheLineWaitsForItsTurn(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			o := opts
			o.Prefix = redistest.UniqueKey(t)
			g := gatetest.New(t, tg.Client, o)
			// 3 of 60 a minute left, a request a second: two calls in
			// flight spend them, beside the reserve of one.
			gatetest.Report(t, g, "report", gatetest.OpenAIRequests(3, 60, "57s"))
			gatetest.Hold(t, g, "held-1", "held-2")
			for _, job := range []string{"w1", "w2"} {
				go func() { _, _ = g.AcquireWait(ctx, job, time.Minute) }()
				for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					if st, _ := g.Status(ctx, job); st.InLine {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s never waited in line", job)
					}
				}
			}
			// Two ahead at a request a second: its turn is about 3 s away.
			plan, err := gatequeue.Run(ctx, g, "queued", succeed, nil)
			var b *gate.BlockedError
			if !errors.As(err, &b) || plan.Action != gatequeue.Retry || plan.Counted || plan.Ahead != 2 {
				t.Fatalf("a job behind two callers in line: %+v, %v; want an uncounted retry, 2 ahead", plan, err)
			}
			if plan.Wait < 2500*time.Millisecond || plan.Wait != max(b.RetryAfter, 10*time.Millisecond) {
				t.Fatalf("snoozed for %v (the refusal said %v), want its turn after the line's, about 3 s", plan.Wait, b.RetryAfter)
			}

			// A worker whose gate waits (Options.Wait) a second, less than
			// its turn is away: told at once, with its place.
			o.Wait = time.Second
			w := gatetest.New(t, tg.Client, o)
			plan, err = gatequeue.Run(ctx, w, "queued-waiting", succeed, nil)
			if !errors.As(err, &b) || plan.Action != gatequeue.Retry || plan.Counted || plan.Ahead != 2 ||
				plan.Wait < 2500*time.Millisecond || !strings.HasPrefix(plan.Wrap(err).Error(), "retrygate: in line, 2 ahead, retry in ") {
				t.Fatalf("a waiting worker behind two callers: %+v, %v; want an uncounted retry in about 3 s, 2 ahead", plan, err)
			}
		})
	}
}
