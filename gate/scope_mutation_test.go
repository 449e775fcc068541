package gate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/gatetest"
	"github.com/retrygate/retrygate/internal/redistest"
)

// scopeForms runs f on one miniredis through the one-node client and
// through a scripting-only wrapper, which makes the gate take the cluster
// form (the scope read and written on its own slot).
func scopeForms(t *testing.T, f func(t *testing.T, rdb gate.Client, advance func(time.Duration))) {
	for _, form := range []string{"one node", "cluster form"} {
		t.Run(form, func(t *testing.T) {
			m, c := redistest.Miniredis(t)
			var rdb gate.Client = c
			if form == "cluster form" {
				rdb = &gatetest.Flaky{Client: c}
			}
			f(t, rdb, func(d time.Duration) { redistest.Advance(m, d) })
		})
	}
}

// A failure's settle reports what it did to the scope in the lease's
// Result and to the Observer: a rate limit cools it for the provider's
// hint, a quota failure pauses it, another 5xx within the allowance
// leaves it open.
func TestSettleReportsTheScope(t *testing.T) {
	scopeForms(t, func(t *testing.T, rdb gate.Client, _ func(time.Duration)) {
		ctx := context.Background()
		rec := newRecorder()
		g := newGate(t, rdb, gate.Options{Upstream: "openai:prod-key", Cooldown: time.Minute, Observer: rec,
			Classify: upstreamClassifier(time.Minute), UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Hour, PauseTTL: time.Hour}})
		for _, tc := range []struct {
			err    error
			state  gate.UpstreamState
			reason string
			wait   time.Duration
			event  gate.EventKind
		}{
			{errRateLimited, gate.UpstreamCoolingDown, classify.ReasonRateLimited, time.Minute, gate.EventUpstreamCooling},
			{errQuota, gate.UpstreamPaused, classify.ReasonQuotaExhausted, time.Hour, gate.EventUpstreamPaused},
			{err500, gate.UpstreamOpen, "", 0, 0},
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
			up := l.Result().Upstream
			if up.State != tc.state || up.Reason != tc.reason || up.RetryAfter > tc.wait || up.RetryAfter < tc.wait-time.Second {
				t.Errorf("%v: Result().Upstream = %+v, want %v (%s) for %v", tc.err, up, tc.state, tc.reason, tc.wait)
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

// When a scope's cooldown ends, a job that is cooling on its own does not
// keep the probe it claimed (cluster form: the claim is given back), and
// nothing about that is reported as a Redis error.
func TestRefusedJobGivesTheProbeBack(t *testing.T) {
	scopeForms(t, func(t *testing.T, rdb gate.Client, advance func(time.Duration)) {
		ctx := context.Background()
		rec := newRecorder()
		o := gate.Options{Upstream: "openai:prod-key", Cooldown: time.Hour, Observer: rec, Prefix: redistest.UniqueKey(t),
			Classify: upstreamClassifier(time.Second)}
		g := newGate(t, rdb, o)
		_ = failWith(t, g, "cooling", classify.Transient(errBoom, 0))
		_ = failWith(t, g, "a", errRateLimited)
		advance(2 * time.Second)
		o.Observer = rec
		other := newGate(t, rdb, o) // has not seen the scope cool
		rec.drain()
		if err := other.Do(ctx, "cooling", okFn); !errors.Is(err, gate.ErrCoolingDown) {
			t.Fatalf("job cooling on its own: exp ErrCoolingDown, got %v", err)
		}
		if up, err := other.ScopeStatus(ctx); err != nil || up.Probing {
			t.Fatalf("scope after the refused job: %+v %v, want no probe held", up, err)
		}
		if err := other.Do(ctx, "b", okFn); err != nil {
			t.Fatalf("the next job probes: %v", err)
		}
		if n := countKind(rec.drain(), gate.EventRedisError); n != 0 {
			t.Errorf("%d redis_error events, want none", n)
		}
	})
}
