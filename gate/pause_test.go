package gate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A provider-wide systemic failure ("insufficient quota", which some
// providers also say for a per-minute limit) pauses the upstream for the
// upstream's Cooldown first; each probe that finds the same answer pauses
// it BackoffFactor times longer, up to PauseTTL; a probe that gets through
// makes it ready. An ambiguous quota costs one short pause, a billing lapse
// settles into PauseTTL with one probe each.
func TestPauseStartsShortAndGrows(t *testing.T) {
	const (
		base     = 50 * time.Millisecond
		pauseTTL = 300 * time.Millisecond
	)
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			pass(tg, 0) // miniredis's clock still: each pause read before it ends
			g := upstreamGate(t, tg, redistest.UniqueKey(t), gate.Options{
				UpstreamPolicy: gate.UpstreamPolicy{Cooldown: base, PauseTTL: pauseTTL},
				Backoff:        gate.Backoff{Factor: 2, Jitter: -1}})
			var ce *gate.CallError
			if err := failWith(t, g, "a", errQuota); !errors.As(err, &ce) || ce.State != gate.CoolingDown || ce.Attempts != 0 ||
				ce.RetryAfter != base {
				t.Fatalf("quota: %v, want the job cooling for the first pause (%v), no attempt counted", err, base)
			}
			quotaAgain := func(context.Context, *gate.Lease) error { return errQuota }
			// Each pause is read just after the settle that wrote it: above
			// the step before, at most its own.
			prev := time.Duration(0)
			for i, want := range []time.Duration{base, 2 * base, 4 * base, pauseTTL} {
				up := firstUpstream(t, g)
				if up.State != gate.Paused || up.Reason != classify.ReasonQuotaExhausted ||
					up.RetryAfter > want || up.RetryAfter <= prev {
					t.Fatalf("pause %d: %+v, want paused (quota_exhausted) for %v", i+1, up, want)
				}
				prev = want
				if !awaitProbe(t, tg, g, "probe-"+itoa(i), up.RetryAfter, quotaAgain) {
					t.Fatalf("pause %d: no probe ran", i+1)
				}
			}
			// The quota came back: the next probe makes the upstream ready.
			up := firstUpstream(t, g)
			if !awaitProbe(t, tg, g, "ok", up.RetryAfter, okFn) {
				t.Fatal("no probe ran")
			}
			if err := g.Do(ctx, "after", okFn); err != nil {
				t.Fatalf("after a successful probe: %v", err)
			}
		})
	}
}

func firstUpstream(t *testing.T, g *gate.Gate) gate.UpstreamStatus {
	t.Helper()
	ups, err := g.Upstreams(context.Background())
	if err != nil || len(ups) == 0 {
		t.Fatalf("Upstreams: %v %v", ups, err)
	}
	return ups[0]
}
