package gate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/redistest"
)

// A wave of permanent verdicts is not the jobs' fault (issue 12): 100 jobs
// from 4 gates all fail with the same permanent reason (here an
// unclassified billing error that arrives as a 400). Once
// UpstreamPolicy.PermanentWave distinct jobs have failed for it, no more
// Failed marks are written: the other jobs cool, the scope pauses for the
// reason, and one loud warning names it.
func TestPermanentWavePausesTheScope(t *testing.T) {
	const (
		jobs  = 100
		gates = 4
		wave  = 10
	)
	errBilling := classify.WithReason(errors.New("400 your account is not active"), classify.ClassPermanent, "account_inactive", 0)
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			rec := newRecorder()
			gs := make([]*gate.Gate, gates)
			for i := range gs {
				gs[i] = scopeGate(t, tg, prefix, gate.Options{Observer: rec, Cooldown: time.Hour,
					UpstreamPolicy: gate.UpstreamPolicy{PermanentWave: wave, FailWindow: time.Minute}})
			}
			var wg sync.WaitGroup
			for j := 0; j < jobs; j++ {
				wg.Add(1)
				go func(j int) {
					defer wg.Done()
					_ = gs[j%gates].Do(context.Background(), jobName(j), func(context.Context, *gate.Lease) error { return errBilling })
				}(j)
			}
			wg.Wait()
			counts := map[gate.State]int{}
			for j := 0; j < jobs; j++ {
				counts[mustStatus(t, gs[0], jobName(j)).State]++
			}
			if counts[gate.Failed] > wave-1 {
				t.Fatalf("%d jobs marked failed, want at most %d before the wave was seen (states %v)", counts[gate.Failed], wave-1, counts)
			}
			if counts[gate.Failed]+counts[gate.CoolingDown]+counts[gate.Ready] != jobs {
				t.Fatalf("states %v", counts)
			}
			up, err := gs[1].ScopeStatus(context.Background())
			if err != nil || up.State != gate.UpstreamPaused || up.Reason != "account_inactive" {
				t.Fatalf("scope %+v %v, want paused for account_inactive", up, err)
			}
			warnings := 0
			for _, e := range rec.drain() {
				if e.Kind == gate.EventWarning && e.Reason == gate.WarnPermanentWave {
					warnings++
				}
			}
			if warnings != 1 {
				t.Fatalf("%d permanent_wave warnings, want 1", warnings)
			}
			// A permanent failure of another reason is still the job's own.
			other := scopeGate(t, tg, redistest.UniqueKey(t), gate.Options{UpstreamPolicy: gate.UpstreamPolicy{PermanentWave: wave}})
			var ce *gate.CallError
			if err := failWith(t, other, "x", classify.Permanent(errBoom)); !errors.As(err, &ce) || ce.State != gate.Failed {
				t.Fatalf("a lone permanent failure: %v, want failed", err)
			}
		})
	}
}
