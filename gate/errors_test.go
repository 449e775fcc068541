package gate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// RetryAfter says how long to wait for every refusal a wait fixes, and
// false for those it does not (failed, done, a pause of unknown length),
// through any wrapping.
func TestRetryAfterOfEachError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		exp  time.Duration
		ok   bool
	}{
		{"cooling", &gate.BlockedError{Job: "j", State: gate.CoolingDown, RetryAfter: 5 * time.Second}, 5 * time.Second, true},
		{"running", &gate.BlockedError{Job: "j", State: gate.Running, RetryAfter: 2 * time.Second}, 2 * time.Second, true},
		{"failed", &gate.BlockedError{Job: "j", State: gate.Failed}, 0, false},
		{"done", &gate.BlockedError{Job: "j", State: gate.Done}, 0, false},
		{"upstream cooling", &gate.BlockedError{Job: "j", State: gate.UpstreamCooling, RetryAfter: 3 * time.Second,
			Upstreams: []gate.UpstreamStatus{{Upstream: "s", State: gate.CoolingDown, RetryAfter: 3 * time.Second}}}, 3 * time.Second, true},
		{"upstream paused", &gate.BlockedError{Job: "j", State: gate.UpstreamCooling, RetryAfter: 10 * time.Minute,
			Upstreams: []gate.UpstreamStatus{{Upstream: "s", State: gate.Paused, RetryAfter: 10 * time.Minute}}}, 10 * time.Minute, true},
		{"no wait known", &gate.BlockedError{Job: "j", State: gate.UpstreamCooling,
			Upstreams: []gate.UpstreamStatus{{Upstream: "s", State: gate.CoolingDown}}}, 0, false},
		{"call cooled", &gate.CallError{Job: "j", State: gate.CoolingDown, RetryAfter: 7 * time.Second, Err: errBoom}, 7 * time.Second, true},
		{"call failed", &gate.CallError{Job: "j", State: gate.Failed, Err: errBoom}, 0, false},
		{"wrapped", fmt.Errorf("handler: %w", &gate.BlockedError{Job: "j", State: gate.CoolingDown, RetryAfter: time.Second}), time.Second, true},
		{"other", errBoom, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := gate.RetryAfter(tc.err)
			if tc.exp != d || tc.ok != ok {
				t.Fatalf("RetryAfter: exp %v %v, got %v %v", tc.exp, tc.ok, d, ok)
			}
		})
	}
}

// An upstream paused by a quota failure is refused with the pause's time left,
// which RetryAfter reports.
func TestRetryAfterOfPausedUpstream(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := upstreamGate(t, tg, redistest.UniqueKey(t), gate.Options{UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Hour, PauseTTL: time.Hour}})
			_ = failWith(t, g, "a", errQuota)
			err := g.Do(context.Background(), "b", okFn)
			if !errors.Is(err, gate.ErrUpstreamCooling) {
				t.Fatalf("while paused: exp ErrUpstreamCooling, got %v", err)
			}
			d, ok := gate.RetryAfter(err)
			if !ok || d < 59*time.Minute || d > time.Hour {
				t.Fatalf("RetryAfter: exp about 1h, got %v %v", d, ok)
			}
			if !strings.Contains(err.Error(), "paused") {
				t.Errorf("message %q should say the upstream is paused", err)
			}
		})
	}
}

// Each refusal matches its own sentinel and no other, so a caller's
// errors.Is switch takes the right branch.
func TestBlockedErrorSentinels(t *testing.T) {
	sentinels := []error{gate.ErrCoolingDown, gate.ErrInFlight, gate.ErrFailed, gate.ErrDone, gate.ErrUpstreamCooling}
	for _, tc := range []struct {
		err  *gate.BlockedError
		exp  error
		text string
	}{
		{&gate.BlockedError{Job: "j", State: gate.CoolingDown, Reason: "rate_limited", RetryAfter: time.Second}, gate.ErrCoolingDown, `gate: job "j" is cooling down (rate_limited), retry in 1s`},
		{&gate.BlockedError{Job: "j", State: gate.Running}, gate.ErrInFlight, `gate: job "j" is already running`},
		{&gate.BlockedError{Job: "j", State: gate.Failed, Reason: "bad_request"}, gate.ErrFailed, `gate: job "j" failed permanently (bad_request)`},
		{&gate.BlockedError{Job: "j", State: gate.Done}, gate.ErrDone, `gate: job "j" is done`},
		{&gate.BlockedError{Job: "j", State: gate.Running, RetryAfter: 4 * time.Second}, gate.ErrInFlight, `gate: job "j" is already running, retry in about 4s`},
		{&gate.BlockedError{Job: "j", State: gate.UpstreamCooling, Reason: "overloaded", RetryAfter: time.Second,
			Upstreams: []gate.UpstreamStatus{{Upstream: "s", State: gate.CoolingDown, Reason: "overloaded", RetryAfter: time.Second}}},
			gate.ErrUpstreamCooling, `gate: upstream "s" is cooling down (overloaded), retry in 1s`},
		{&gate.BlockedError{Job: "j", State: gate.UpstreamCooling, Reason: "quota_exhausted", RetryAfter: time.Minute,
			Upstreams: []gate.UpstreamStatus{{Upstream: "s", State: gate.Paused, Reason: "quota_exhausted", RetryAfter: time.Minute}}},
			gate.ErrUpstreamCooling, `gate: upstream "s" is paused (quota_exhausted) for 1m0s or until reset`},
		{&gate.BlockedError{Job: "j", State: gate.UpstreamCooling, Reason: "rate_limited", RetryAfter: 2 * time.Second,
			Upstreams: []gate.UpstreamStatus{
				{Upstream: "a", State: gate.CoolingDown, Reason: "rate_limited", RetryAfter: 2 * time.Second},
				{Upstream: "b", State: gate.CoolingDown, Reason: "overloaded", Probing: true, RetryAfter: 5 * time.Second}}},
			gate.ErrUpstreamCooling, `gate: upstream "a" is cooling down (rate_limited), retry in 2s; upstream "b" is being probed (overloaded), retry in 5s`},
	} {
		t.Run(tc.text, func(t *testing.T) {
			for _, s := range sentinels {
				if exp, got := s == tc.exp, errors.Is(tc.err, s); exp != got {
					t.Errorf("errors.Is(%v): exp %v, got %v", s, exp, got)
				}
			}
			if exp, got := tc.text, tc.err.Error(); exp != got {
				t.Errorf("Error: exp %q, got %q", exp, got)
			}
		})
	}
}

// A CallError matches the sentinel of the state it left the job in, and
// its text carries a settle error when there is one.
func TestCallErrorSentinelsAndText(t *testing.T) {
	for _, tc := range []struct {
		state gate.State
		exp   error // nil: neither
	}{
		{gate.Failed, gate.ErrFailed},
		{gate.CoolingDown, gate.ErrCoolingDown},
		{gate.Ready, nil},
		{gate.Running, nil},
	} {
		e := &gate.CallError{Job: "j", State: tc.state, Err: errBoom}
		for _, s := range []error{gate.ErrFailed, gate.ErrCoolingDown} {
			if exp, got := s == tc.exp, errors.Is(e, s); exp != got {
				t.Errorf("state %v: errors.Is(%v): exp %v, got %v", tc.state, s, exp, got)
			}
		}
		if !errors.Is(e, errBoom) {
			t.Errorf("state %v: fn's error is not reachable", tc.state)
		}
	}
	e := &gate.CallError{Job: "j", State: gate.Running, Err: errBoom}
	if exp, got := `gate: job "j": boom`, e.Error(); exp != got {
		t.Errorf("Error: exp %q, got %q", exp, got)
	}
	e.SettleErr = gate.ErrNotOwned
	if exp, got := `gate: job "j": boom (settle: gate: lock not owned)`, e.Error(); exp != got {
		t.Errorf("Error with settle error: exp %q, got %q", exp, got)
	}
	if !errors.Is(e, gate.ErrNotOwned) || !errors.Is(e, errBoom) {
		t.Errorf("exp both fn's and the settle's error reachable from %v", e)
	}
}

// Error text quotes a job of up to 64 bytes whole and shortens a longer
// one, so a 1 KiB key does not flood logs.
func TestErrorTextShortensLongJobs(t *testing.T) {
	for _, tc := range []struct {
		job, exp string
	}{
		{strings.Repeat("a", 64), `"` + strings.Repeat("a", 64) + `"`},
		{strings.Repeat("b", 65), `"` + strings.Repeat("b", 64) + `"…`},
		{strings.Repeat("c", 1024), `"` + strings.Repeat("c", 64) + `"…`},
	} {
		b := &gate.BlockedError{Job: tc.job, State: gate.Done}
		if exp, got := "gate: job "+tc.exp+" is done", b.Error(); exp != got {
			t.Errorf("len %d: exp %q, got %q", len(tc.job), exp, got)
		}
	}
}
