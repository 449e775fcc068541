package gate_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A shadow gate beside an enforcing one, on the same traffic: every call
// of the shadow gate runs, and the calls it reports it would have refused
// are the calls the enforcing gate refuses, call for call, through a
// storm of one job's failures, a bad key and a spent budget. The
// provider's answer is a function of the job and the time alone, so the
// calls the shadow lets through change nothing the two gates see.
func TestShadowReportsWhatEnforcementRefuses(t *testing.T) {
	errJob := classify.Transient(errors.New("the model's output was invalid"), 0)
	for _, tc := range []struct {
		name string
		// answer is the provider's answer to a call of job at t.
		answer func(l *gate.Lease, job int, t time.Duration) error
	}{
		{"a storm", func(_ *gate.Lease, job int, t time.Duration) error {
			if t < time.Duration(40+10*job)*time.Second {
				return errJob
			}
			return nil
		}},
		{"a bad key", func(_ *gate.Lease, _ int, t time.Duration) error {
			if t >= 10*time.Second && t < 50*time.Second {
				return errQuota
			}
			return nil
		}},
		{"a budget", func(l *gate.Lease, _ int, t time.Duration) error {
			left := int64(100)
			if t >= 20*time.Second && t < 45*time.Second {
				left = 0
			}
			l.ObserveBudget(classify.Budget{At: time.Now(),
				Requests: classify.Quota{Reported: true, Remaining: left, Limit: 100, Reset: time.Now().Add(20 * time.Second)}})
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, rdb := redistest.Miniredis(t)
			redistest.Advance(m, 0)
			ctx := context.Background()
			opts := gate.Options{Prefix: redistest.UniqueKey(t), Upstream: "openai:prod-key", Cooldown: 20 * time.Second,
				Backoff: gate.Backoff{Jitter: -1}, Classify: upstreamClassifier(0)}
			enforce := newGate(t, rdb, opts)
			rec := newRecorder()
			opts.Shadow, opts.Observer = true, rec
			shadow := newGate(t, rdb, opts)

			var refused, wouldRefuse, shadowRan, calls int
			for now := time.Duration(0); now < 2*time.Minute; now += 5 * time.Second {
				for job := range 6 {
					name := fmt.Sprint("doc-", job)
					calls++
					err := enforce.Do(ctx, name, func(_ context.Context, l *gate.Lease) error { return tc.answer(l, job, now) })
					var b *gate.BlockedError
					enforced := errors.As(err, &b)
					if enforced {
						refused++
					}
					var ungated bool
					err = shadow.Do(ctx, name, func(_ context.Context, l *gate.Lease) error {
						shadowRan++
						ungated = !l.Gated()
						return tc.answer(l, job, now)
					})
					if errors.As(err, &b) {
						t.Fatalf("at %v %s: the shadow gate refused: %v", now, name, err)
					}
					if ungated {
						wouldRefuse++
					}
					if ungated != enforced {
						t.Fatalf("at %v %s: enforced refused %v, the shadow let it through as refused %v", now, name, enforced, ungated)
					}
				}
				redistest.Advance(m, 5*time.Second)
			}
			if refused == 0 {
				t.Fatal("enforcement refused nothing: the scenario proves nothing")
			}
			if shadowRan != calls {
				t.Fatalf("the shadow gate ran %d of %d calls, want all", shadowRan, calls)
			}
			reported := 0
			for _, e := range rec.drain() {
				if !e.Shadow {
					t.Fatalf("an event of the shadow gate without Shadow: %+v", e)
				}
				if e.Kind == gate.EventRefused {
					reported++
				}
			}
			t.Logf("%d calls, %d refused by enforcement", calls, refused)
			if reported != refused || wouldRefuse != refused {
				t.Fatalf("enforcement refused %d calls; the shadow reported %d refusals and let %d through ungated", refused, reported, wouldRefuse)
			}
		})
	}
}

// A shadow gate writes nothing an enforcing gate obeys: after a storm of
// failures through it, an enforcing gate on the same prefix finds no key
// and runs the job at once.
func TestShadowWritesNothingEnforcementObeys(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := gate.Options{Prefix: redistest.UniqueKey(t), Upstream: "openai:prod-key", Cooldown: time.Hour, Classify: upstreamClassifier(time.Hour)}
			shadowOpts := opts
			shadowOpts.Shadow = true
			shadow := newGate(t, tg.Client, shadowOpts)
			for _, err := range []error{errRateLimited, errQuota, classify.Permanent(errors.New("prompt too long"))} {
				for range 3 {
					_ = shadow.Do(ctx, "job", func(context.Context, *gate.Lease) error { return err })
				}
			}
			if st := mustStatus(t, shadow, "job"); st.State == gate.Ready {
				t.Fatalf("the shadow gate's own status: %v, want what it would enforce", st.State)
			}
			keys, err := tg.Client.Keys(ctx, opts.Prefix+":*").Result()
			if err != nil || len(keys) != 0 {
				t.Fatalf("keys under the enforcing prefix after the shadow gate: %v, %v; want none", keys, err)
			}
			if n, _ := tg.Client.Exists(ctx, keyspace.Job(keyspace.Shadow(opts.Prefix), "job")).Result(); n != 1 {
				t.Fatal("the shadow gate kept no state of its own")
			}
			ran := false
			if err := newGate(t, tg.Client, opts).Do(ctx, "job", func(context.Context, *gate.Lease) error { ran = true; return nil }); err != nil || !ran {
				t.Fatalf("an enforcing gate after the shadow: ran %v, %v; want it run", ran, err)
			}
		})
	}
}
