package gate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A failure's settle reports what it did to the upstream in the lease's
// Result and to the Observer: a rate limit cools it for the provider's
// hint, a quota failure pauses it, another 5xx within the allowance
// leaves it ready.
func TestSettleReportsTheUpstream(t *testing.T) {
	upstreamForms(t, func(t *testing.T, rdb gate.Client, _ func(time.Duration)) {
		ctx := context.Background()
		rec := newRecorder()
		g := newGate(t, rdb, gate.Options{Upstream: "openai:prod-key", Cooldown: time.Minute, Observer: rec,
			Classify: upstreamClassifier(time.Minute), UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Hour, PauseTTL: time.Hour}})
		for _, tc := range []struct {
			err    error
			state  gate.State
			reason string
			wait   time.Duration
			event  gate.EventKind
		}{
			{errRateLimited, gate.CoolingDown, classify.ReasonRateLimited, time.Minute, gate.EventUpstreamCooling},
			{errQuota, gate.Paused, classify.ReasonQuotaExhausted, time.Hour, gate.EventUpstreamPaused},
			{err500, gate.Ready, "", 0, 0},
		} {
			if err := g.ResetUpstreams(ctx); err != nil {
				t.Fatal(err)
			}
			rec.drain()
			job := "job-" + tc.err.Error()
			l, err := g.Acquire(ctx, job)
			if err != nil {
				t.Fatalf("%s: Acquire: %v", job, err)
			}
			if err := l.Fail(ctx, tc.err); err != nil {
				t.Fatalf("%s: Fail: %v", job, err)
			}
			up := firstUpstream(t, g)
			if up.State != tc.state || up.Reason != tc.reason || up.RetryAfter > tc.wait || up.RetryAfter < tc.wait-time.Second {
				t.Errorf("%v: Upstreams()[0] = %+v, want %v (%s) for %v", tc.err, up, tc.state, tc.reason, tc.wait)
			}
			if exp, got := "openai:prod-key", up.Upstream; exp != got {
				t.Errorf("%v: Upstream.Upstream: exp %q, got %q", tc.err, exp, got)
			}
			evs := rec.drain()
			for _, k := range []gate.EventKind{gate.EventUpstreamCooling, gate.EventUpstreamPaused} {
				exp := 0
				if k == tc.event {
					exp = 1
				}
				if got := countKind(evs, k); exp != got {
					t.Errorf("%v: %v events: exp %d, got %d", tc.err, k, exp, got)
				}
			}
			if n := countKind(evs, gate.EventRedisError); n != 0 {
				t.Errorf("%v: %d redis_error events, want none", tc.err, n)
			}
		}
	})
}

// When an upstream's cooldown ends, a job that is cooling on its own does not
// keep the probe it claimed (cluster form: the claim is given back), and
// nothing about that is reported as a Redis error.
func TestRefusedJobGivesTheProbeBack(t *testing.T) {
	upstreamForms(t, func(t *testing.T, rdb gate.Client, advance func(time.Duration)) {
		ctx := context.Background()
		rec := newRecorder()
		o := gate.Options{Upstream: "openai:prod-key", Cooldown: time.Hour, Observer: rec, Prefix: redistest.UniqueKey(t),
			Classify: upstreamClassifier(time.Second)}
		g := newGate(t, rdb, o)
		_ = failWith(t, g, "cooling", classify.Transient(errBoom, 0))
		_ = failWith(t, g, "a", errRateLimited)
		advance(2 * time.Second)
		o.Observer = rec
		other := newGate(t, rdb, o) // has not seen the upstream cool
		rec.drain()
		if err := other.Do(ctx, "cooling", okFn); !errors.Is(err, gate.ErrCoolingDown) {
			t.Fatalf("job cooling on its own: exp ErrCoolingDown, got %v", err)
		}
		if up, err := upstreamStatus(ctx, other); err != nil || up.Probing {
			t.Fatalf("upstream after the refused job: %+v %v, want no probe claimed", up, err)
		}
		if err := other.Do(ctx, "b", okFn); err != nil {
			t.Fatalf("the next job probes: %v", err)
		}
		if n := countKind(rec.drain(), gate.EventRedisError); n != 0 {
			t.Errorf("%d redis_error events, want none", n)
		}
	})
}

var (
	errRateLimited = errors.New("429 rate limited")
	errOverloaded  = errors.New("503 overloaded")
	err500         = errors.New("500")
	errQuota       = errors.New("insufficient_quota")
)

func TestUpstreamCoolsEveryJob(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			g := upstreamGate(t, tg, prefix, gate.Options{})
			other := upstreamGate(t, tg, prefix, gate.Options{Upstream: "anthropic:key"})
			ctx := context.Background()

			var ce *gate.CallError
			if err := failWith(t, g, "doc-a", errRateLimited); !errors.As(err, &ce) || ce.State != gate.CoolingDown {
				t.Fatalf("first failure: %v", err)
			}
			// The provider's limit is not the job's fault: no attempt is
			// counted, and the job waits the provider's hint (at least a
			// second), not its own backoff.
			if ce.Attempts != 0 || ce.RetryAfter != time.Second {
				t.Fatalf("the failing job: attempts %d, retry in %v; want 0 and the hint (1s floor)", ce.Attempts, ce.RetryAfter)
			}
			// Every other job of the upstream is refused without running.
			err := g.Do(ctx, "doc-b", func(context.Context, *gate.Lease) error {
				t.Fatal("fn ran while the upstream cools down")
				return nil
			})
			var b *gate.BlockedError
			if !errors.As(err, &b) || !errors.Is(err, gate.ErrUpstreamCooling) || upstream(b).Upstream != "openai:prod-key" || (upstream(b).State == gate.Paused) {
				t.Fatalf("doc-b: %v, want ErrUpstreamCooling", err)
			}
			if d, ok := gate.RetryAfter(err); !ok || d <= 0 || d > 300*time.Millisecond {
				t.Fatalf("RetryAfter = %v %v, want the upstream's time left", d, ok)
			}
			if errors.Is(err, gate.ErrCoolingDown) {
				t.Fatal("an upstream refusal must not look like the job's own cooldown")
			}
			// No job attempt counted, no job key written.
			if n := tg.Client.Exists(ctx, keyspace.Job(gatetest.Prefix(g), "doc-b")).Val(); n != 0 {
				t.Fatalf("refused job has %d keys", n)
			}
			st := mustStatus(t, g, "doc-b")
			if st.State != gate.Ready || st.Upstream.State != gate.CoolingDown || st.Upstream.Reason != classify.ReasonRateLimited {
				t.Fatalf("status %+v", st)
			}
			// Another upstream on the same client is not affected.
			if err := other.Do(ctx, "doc-b", func(context.Context, *gate.Lease) error { return nil }); err != nil {
				t.Fatalf("other upstream: %v", err)
			}
			// The upstream recovers when the provider's hint has passed.
			pass(tg, 300*time.Millisecond)
			deadline := time.Now().Add(3 * time.Second)
			for {
				err := g.Do(ctx, "doc-b", func(context.Context, *gate.Lease) error { return nil })
				if err == nil {
					break
				}
				if time.Now().After(deadline) || !errors.Is(err, gate.ErrUpstreamCooling) {
					t.Fatalf("after the hint: %v", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func TestUpstreamCooldownWithoutHint(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0) // its clock still: the cooldown read whole
	g := newGate(t, rdb, gate.Options{UpstreamPolicy: gate.UpstreamPolicy{Cooldown: 7 * time.Second}, Upstream: "s", Classify: upstreamClassifier(0)})
	_ = failWith(t, g, "a", errOverloaded)
	up, err := upstreamStatus(context.Background(), g)
	if err != nil || up.State != gate.CoolingDown || up.RetryAfter > 7*time.Second || up.RetryAfter < 7*time.Second-50*time.Millisecond || up.Reason != classify.ReasonOverloaded {
		t.Fatalf("upstream %+v %v, want cooling 7s", up, err)
	}
}

func TestUpstreamAllowsSome5xx(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := upstreamGate(t, tg, redistest.UniqueKey(t), gate.Options{UpstreamPolicy: gate.UpstreamPolicy{AllowedFails: 2, Cooldown: time.Minute}})
			for i, job := range []string{"a", "b"} {
				_ = failWith(t, g, job, err500)
				if up, _ := upstreamStatus(context.Background(), g); up.State != gate.Ready {
					t.Fatalf("after %d 5xx: upstream %v, want ready", i+1, up.State)
				}
			}
			_ = failWith(t, g, "c", err500)
			up, err := upstreamStatus(context.Background(), g)
			if err != nil || up.State != gate.CoolingDown || up.Reason != classify.ReasonUpstream5xx {
				t.Fatalf("after 3 5xx: %+v %v, want cooling", up, err)
			}
		})
	}
}

func TestUpstream5xxWindowSlides(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0) // the window is read from Redis TIME: it moves with Advance only
	g := newGate(t, rdb, gate.Options{UpstreamPolicy: gate.UpstreamPolicy{AllowedFails: 1, FailWindow: time.Minute}, Upstream: "s", Classify: upstreamClassifier(0)})
	_ = failWith(t, g, "a", err500)
	redistest.Advance(m, 2*time.Minute)
	_ = failWith(t, g, "b", err500)
	if up, _ := upstreamStatus(context.Background(), g); up.State != gate.Ready {
		t.Fatalf("two 5xx further apart than the window cooled the upstream")
	}
	redistest.Advance(m, 30*time.Second)
	_ = failWith(t, g, "c", err500)
	if up, _ := upstreamStatus(context.Background(), g); up.State != gate.CoolingDown {
		t.Fatalf("two 5xx inside the window, one more than allowed: upstream %v, want cooling", up.State)
	}
}

func TestUpstreamSystemicPausesUntilReset(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			rec := newRecorder()
			g := upstreamGate(t, tg, redistest.UniqueKey(t), gate.Options{UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Hour, PauseTTL: time.Hour}, Observer: rec, Backoff: gate.Backoff{MaxAttempts: 1}})
			var ce *gate.CallError
			if err := failWith(t, g, "a", errQuota); !errors.As(err, &ce) || ce.State != gate.CoolingDown || ce.Attempts != 0 {
				t.Fatalf("quota failure: %v (%+v), want the job cooling with no attempt counted", err, ce)
			}
			err := g.Do(context.Background(), "b", func(context.Context, *gate.Lease) error { return nil })
			var b *gate.BlockedError
			if !errors.As(err, &b) || upstream(b).State != gate.Paused || b.RetryAfter < 59*time.Minute {
				t.Fatalf("while paused: %v", err)
			}
			if countKind(rec.drain(), gate.EventUpstreamPaused) != 1 {
				t.Fatal("no upstream_paused event")
			}
			if err := g.ResetUpstreams(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := g.Do(context.Background(), "b", func(context.Context, *gate.Lease) error { return nil }); err != nil {
				t.Fatalf("after ResetUpstreams: %v", err)
			}
		})
	}
}

func TestUpstreamPauseOutranksCooldown(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	prefix := redistest.UniqueKey(t)
	pauser := newGate(t, rdb, gate.Options{UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Hour, PauseTTL: time.Hour}, Prefix: prefix, Upstream: "s", Classify: upstreamClassifier(0)})
	cooler := newGate(t, rdb, gate.Options{Prefix: prefix, Upstream: "s", Classify: upstreamClassifier(time.Second)})
	knownUpstream(t, cooler) // two calls at once: not one at a time
	_ = failWith(t, pauser, "a", errQuota)
	// A job that was already running reports a rate limit afterwards.
	if err := pauser.ResetUpstreams(context.Background()); err != nil {
		t.Fatal(err)
	}
	l, err := cooler.Acquire(context.Background(), "b")
	if err != nil {
		t.Fatal(err)
	}
	_ = failWith(t, pauser, "a2", errQuota)
	if err := l.Fail(context.Background(), errRateLimited); err != nil {
		t.Fatal(err)
	}
	up, _ := upstreamStatus(context.Background(), cooler)
	if up.State != gate.Paused || up.RetryAfter < 59*time.Minute {
		t.Fatalf("upstream %+v, want the pause kept", up)
	}
}

func TestUpstreamCheckRoundTrips(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			rt := &roundTrips{}
			hook(tg, rt)
			g := upstreamGate(t, tg, redistest.UniqueKey(t), gate.Options{UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Minute}, Classify: upstreamClassifier(time.Minute)})
			okFn := func(context.Context, *gate.Lease) error { return nil }
			measure := func(job string) int64 {
				// Once unmeasured first: on a cluster, scripts are cached per node.
				_ = g.Do(context.Background(), job, okFn)
				before := rt.n.Load()
				_ = g.Do(context.Background(), job, okFn)
				return rt.n.Load() - before
			}
			success := measure("x")
			_ = failWith(t, g, "y", errRateLimited)
			blocked := measure("z")
			// The upstream's GET goes in the acquire's pipeline on one node,
			// beside it (in parallel, a second exchange in the same round
			// trip) on a cluster, where the job's commands go to its
			// master; once this process has seen the upstream refuse, it
			// reads the upstream alone.
			wantSuccess, wantBlocked := int64(2), int64(1)
			if tg.IsCluster {
				wantSuccess = 3
			}
			if success != wantSuccess || blocked != wantBlocked {
				t.Fatalf("round trips: success %d (want %d), blocked %d (want %d)", success, wantSuccess, blocked, wantBlocked)
			}
		})
	}
}
