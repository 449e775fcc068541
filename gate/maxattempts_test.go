package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// defaultMaxAttempts is Options.Backoff.MaxAttempts's documented default.
const defaultMaxAttempts = 8

// invalidOutput is a job whose model answers, every time, text that is not
// the JSON asked for: the job's own transient failure (bad_output), as the
// README's loop reports it.
func invalidOutput(context.Context, *gate.Lease) error {
	var out struct{ Summary string }
	err := json.Unmarshal([]byte("Sure! Here is the summary you asked for:"), &out)
	return classify.WithReason(err, classify.ClassTransient, classify.ReasonBadOutput, 0)
}

// With MaxAttempts left at zero, a job whose model never returns valid
// output ends Failed after the default number of attempts, instead of
// cooling 1 s, 2 s, 4 s … forever.
func TestMaxAttemptsDefaultEndsAJobThatKeepsFailing(t *testing.T) {
	const cooldown = 10 * time.Millisecond
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{Prefix: redistest.UniqueKey(t), Cooldown: cooldown, Backoff: gate.Backoff{Factor: 1, Jitter: -1}})
			for i := 1; i <= defaultMaxAttempts; i++ {
				if i > 1 {
					pass(tg, cooldown)
				}
				var ce *gate.CallError
				if err := retryUntilRun(t, g, "doc", invalidOutput); !errors.As(err, &ce) {
					t.Fatalf("attempt %d: %v, want a *gate.CallError", i, err)
				}
				want := gate.CoolingDown
				if i == defaultMaxAttempts {
					want = gate.Failed
				}
				if ce.State != want || ce.Attempts != i || ce.Verdict.Reason != classify.ReasonBadOutput {
					t.Fatalf("attempt %d: %v with %d attempts (%s), want %v", i, ce.State, ce.Attempts, ce.Verdict.Reason, want)
				}
			}
			pass(tg, cooldown)
			var b *gate.BlockedError
			if err := g.Do(context.Background(), "doc", okFn); !errors.As(err, &b) || !errors.Is(err, gate.ErrFailed) ||
				b.Reason != classify.ReasonBadOutput {
				t.Fatalf("after %d attempts: %v, want ErrFailed (bad_output)", defaultMaxAttempts, err)
			}

			// A negative MaxAttempts is unlimited.
			unlimited := newGate(t, tg.Client, gate.Options{Prefix: redistest.UniqueKey(t), Cooldown: cooldown, Backoff: gate.Backoff{MaxAttempts: -1, Factor: 1, Jitter: -1}})
			for i := 1; i <= defaultMaxAttempts+1; i++ {
				if i > 1 {
					pass(tg, cooldown)
				}
				var ce *gate.CallError
				if err := retryUntilRun(t, unlimited, "doc", invalidOutput); !errors.As(err, &ce) || ce.State != gate.CoolingDown {
					t.Fatalf("MaxAttempts -1, attempt %d: %v, want cooling", i, err)
				}
			}
		})
	}
}

// Provider-wide failures (a 503 overload, an exhausted quota) and a
// systemic failure of the job's own request never count an attempt: a job
// that meets them three times the default MaxAttempts is not Failed, and
// runs once they pass.
func TestMaxAttemptsNeverCountsProviderWideFailures(t *testing.T) {
	const cooldown = 10 * time.Millisecond
	modelGone := classify.Systemic(errors.New("the model `gpt-x` does not exist"))
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := upstreamGate(t, tg, redistest.UniqueKey(t), gate.Options{Cooldown: cooldown,
				UpstreamPolicy: gate.UpstreamPolicy{Cooldown: cooldown, PauseTTL: cooldown},
				Backoff:        gate.Backoff{Factor: 1, Jitter: -1}})
			for i := 0; i < 3*defaultMaxAttempts; i++ {
				if i > 0 {
					pass(tg, cooldown)
				}
				failure := []error{errOverloaded, errQuota, modelGone}[i%3]
				var ce *gate.CallError
				err := retryUntilRun(t, g, "doc", func(context.Context, *gate.Lease) error { return failure })
				if !errors.As(err, &ce) || ce.State != gate.CoolingDown || ce.Attempts != 0 {
					t.Fatalf("failure %d (%v): %v, want cooling with no attempt counted", i+1, failure, err)
				}
			}
			pass(tg, cooldown)
			if err := retryUntilRun(t, g, "doc", okFn); err != nil {
				t.Fatalf("after %d provider-wide and systemic failures: %v, want the job to run", 3*defaultMaxAttempts, err)
			}
		})
	}
}
