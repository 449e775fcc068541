package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// --shadow reads what a shadow gate decided: the job it would have cooled
// is cooling there, and nothing of it is under the enforcing prefix.
func TestStatusShadow(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			g, err := gate.New(tg.Client, gate.Options{Prefix: prefix, Shadow: true, Cooldown: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			_ = g.Do(context.Background(), "doc-1", func(context.Context, *gate.Lease) error {
				return classify.Transient(errors.New("invalid output"), 0)
			})
			args := append(redisArgs(t, tg), "--prefix", prefix, "--json")
			if st := statusOf(t, runCLI(t, nil, append(args, "--shadow", "status", "doc-1")...)); st.State != "cooling_down" || st.Attempts != 1 {
				t.Fatalf("--shadow status: %+v, want cooling down after one attempt", st)
			}
			if st := statusOf(t, runCLI(t, nil, append(args, "status", "doc-1")...)); st.State != "ready" || st.Attempts != 0 {
				t.Fatalf("status without --shadow: %+v, want ready: the shadow gate writes nothing enforced", st)
			}
		})
	}
}
