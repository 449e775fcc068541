package gate_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A refusal is one round trip of native commands, the job's SET NX GET,
// PTTL and TIME (no script), and with a Retention.Done of SuccessMemory or more
// the GET of its done key, whether or not this process was refused by
// the job before: a cooldown, a failed mark and a done mark alike, and
// each says the same as the first.
func TestRefusalIsOneRoundTrip(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			names := &redistest.Commands{}
			hook(tg, names)
			// Upstreams off: the job's commands alone (with its upstream the
			// acquire is one script, as TestRoundTripsPerPath counts).
			g := newGate(t, tg.Client, gate.Options{Cooldown: time.Minute, Retention: gate.Retention{Done: time.Minute}, Backoff: gate.Backoff{Jitter: -1}, UpstreamPolicy: gate.UpstreamPolicy{Off: true}})
			_ = failWith(t, g, "cooling", errTransient)
			_ = failWith(t, g, "failed", classify.Permanent(errBoom))
			if err := g.Do(context.Background(), "done", okFn); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				job   string
				state gate.State
			}{{"cooling", gate.CoolingDown}, {"failed", gate.Failed}, {"done", gate.Done}} {
				names.Take()
				first := blocked(t, g, tc.job)
				for i := 0; i < 3; i++ {
					if got := names.Take(); !slices.Equal(got, []string{"[pttl set time evalsha get]"}) {
						t.Fatalf("%s: refusal %d sent %v, want the job's PTTL, SET NX GET, TIME and the fence script, and its done key's GET", tc.job, i, got)
					}
					again := blocked(t, g, tc.job)
					if again.State != tc.state || again.State != first.State || again.Attempts != first.Attempts ||
						again.Reason != first.Reason || again.Job != tc.job {
						t.Fatalf("%s: refusal %+v, want %v as the first %+v", tc.job, again, tc.state, first)
					}
					if again.RetryAfter > first.RetryAfter {
						t.Fatalf("%s: RetryAfter %v grew from %v", tc.job, again.RetryAfter, first.RetryAfter)
					}
				}
			}
		})
	}
}

// A refusal reads Redis every time: a reset, another failure, a failed
// mark or the cooldown's end elsewhere is seen at once.
func TestRefusalSeesChanges(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			opts := gate.Options{Prefix: prefix, Cooldown: time.Minute, Backoff: gate.Backoff{Jitter: -1}}
			g := newGate(t, tg.Client, opts)
			other := newGate(t, tg.Client, opts) // another process
			ctx := context.Background()

			// Reset elsewhere: the next call runs.
			_ = failWith(t, g, "reset", errTransient)
			blocked(t, g, "reset")
			if err := other.Reset(ctx, "reset"); err != nil {
				t.Fatal(err)
			}
			ran := false
			if err := g.Do(ctx, "reset", func(context.Context, *gate.Lease) error { ran = true; return nil }); err != nil || !ran {
				t.Fatalf("after a reset elsewhere: ran %v, err %v", ran, err)
			}

			// Reset and a permanent failure elsewhere: refused as failed.
			_ = failWith(t, g, "perm", errTransient)
			blocked(t, g, "perm")
			if err := other.Reset(ctx, "perm"); err != nil {
				t.Fatal(err)
			}
			_ = failWith(t, other, "perm", classify.Permanent(errBoom))
			b := blocked(t, g, "perm")
			if !errors.Is(b, gate.ErrFailed) || b.RetryAfter != 0 {
				t.Fatalf("after a failed mark elsewhere: %+v, want ErrFailed", b)
			}
			if b := blocked(t, g, "perm"); !errors.Is(b, gate.ErrFailed) {
				t.Fatalf("failed mark, known: %+v, want ErrFailed", b)
			}

			// The cooldown ends in Redis: the call runs.
			if tg.FastForward != nil {
				// miniredis's TIME follows the real clock until it is first
				// moved: fixed here, the cooldown ends only in pass, not
				// between the failure and the refusal a busy machine keeps
				// 40 ms apart.
				tg.FastForward(0)
			}
			short := newGate(t, tg.Client, gate.Options{Prefix: prefix, Cooldown: 40 * time.Millisecond, Backoff: gate.Backoff{Jitter: -1}})
			_ = failWith(t, short, "short", errTransient)
			blocked(t, short, "short")
			pass(tg, 40*time.Millisecond)
			for deadline := time.Now().Add(3 * time.Second); ; {
				err := short.Do(ctx, "short", okFn)
				if err == nil {
					break
				}
				if !errors.Is(err, gate.ErrCoolingDown) || time.Now().After(deadline) {
					t.Fatalf("after the cooldown: %v", err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}

// A retry of a cooling job fails closed when Redis is unreachable:
// ErrUnavailable, or with FailOpen one ungated call.
func TestRefusalRedisDown(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		_, rdb := redistest.Miniredis(t)
		f := &flaky{Client: rdb}
		g := newGate(t, f, gate.Options{Cooldown: time.Minute, Redis: gate.RedisPolicy{FailOpen: failOpen}})
		_ = failWith(t, g, "job", errTransient)
		blocked(t, g, "job")
		f.Down.Store(true)
		ran := false
		err := g.Do(context.Background(), "job", func(_ context.Context, l *gate.Lease) error {
			ran = true
			if l.Gated() {
				t.Error("lease gated while Redis is down")
			}
			return nil
		})
		if failOpen != ran || (!failOpen && !errors.Is(err, gate.ErrUnavailable)) {
			t.Fatalf("FailOpen %v: ran %v, err %v", failOpen, ran, err)
		}
	}
}

// While the upstream cools, its refusal comes first: the job's own state
// is not read.
func TestUpstreamRefusalComesFirst(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := upstreamGate(t, tg, redistest.UniqueKey(t), gate.Options{UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Hour}, Cooldown: time.Minute, Classify: upstreamClassifier(time.Hour)})
			_ = failWith(t, g, "job", errTransient)
			if b := blocked(t, g, "job"); !errors.Is(b, gate.ErrCoolingDown) {
				t.Fatalf("job cooling: %+v", b)
			}
			_ = failWith(t, g, "other", errRateLimited)
			if b := blocked(t, g, "job"); !errors.Is(b, gate.ErrUpstreamCooling) {
				t.Fatalf("with the upstream cooling: %+v, want ErrUpstreamCooling", b)
			}
		})
	}
}

// Gate A sees a 1-minute systemic cooldown; gate B resets the job and a
// second systemic failure sets 1 hour. Both failures carry the same state,
// attempts and reason. A must report the hour.
func TestRewrittenCooldownIsSeen(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			prefix := redistest.UniqueKey(t)
			a := newGate(t, tg.Client, gate.Options{Prefix: prefix, Cooldown: time.Minute, Backoff: gate.Backoff{Jitter: -1}})
			b := newGate(t, tg.Client, gate.Options{Prefix: prefix, Cooldown: time.Hour, Backoff: gate.Backoff{Jitter: -1}})
			systemic := classify.Systemic(errBoom)
			_ = failWith(t, a, "job", systemic)
			if got := blocked(t, a, "job").RetryAfter; got > time.Minute {
				t.Fatalf("first refusal: %v, want at most a minute", got)
			}
			if err := b.Reset(ctx, "job"); err != nil {
				t.Fatal(err)
			}
			_ = failWith(t, b, "job", systemic)
			if got := blocked(t, a, "job").RetryAfter; got < time.Hour-time.Minute {
				t.Fatalf("refusal after the job was reset and failed for an hour: retry in %v, want about an hour", got)
			}
		})
	}
}
