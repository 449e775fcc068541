package gate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/gatetest"
	"github.com/retrygate/retrygate/internal/redistest"
)

// A custom classifier's reason code reaches HTTP bodies and metric labels:
// the gate keeps it only when it is 1 to 64 bytes of [a-z0-9_.-], else it
// records "unknown".
func TestReasonCodesAreSanitized(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Cooldown: time.Minute, Classify: func(err error) classify.Verdict {
		return classify.Verdict{Class: classify.ClassTransient, Reason: err.Error()}
	}})
	for i, tc := range []struct{ reason, want string }{
		{"a", "a"}, {"z", "z"}, {"0", "0"}, {"9", "9"},
		{"_", "_"}, {".", "."}, {"-", "-"},
		{"rate_limit.tokens-2", "rate_limit.tokens-2"},
		{strings.Repeat("x", 64), strings.Repeat("x", 64)},
		{strings.Repeat("x", 65), classify.ReasonUnknown},
		{"", classify.ReasonUnknown},
		{"A", classify.ReasonUnknown}, // just around each accepted range
		{"`", classify.ReasonUnknown},
		{"{", classify.ReasonUnknown},
		{"/", classify.ReasonUnknown},
		{":", classify.ReasonUnknown},
		{"rate limit", classify.ReasonUnknown},
		{"quota\n", classify.ReasonUnknown},
		{"rate_limit\x00", classify.ReasonUnknown},
	} {
		job := "job-" + strings.Repeat("r", i+1)
		var ce *gate.CallError
		if err := failWith(t, g, job, errors.New(tc.reason)); !errors.As(err, &ce) {
			t.Fatalf("%q: %v, want a *CallError", tc.reason, err)
		}
		if exp, got := tc.want, ce.Verdict.Reason; exp != got {
			t.Errorf("reason %q recorded as %q, want %q", tc.reason, got, exp)
		}
		if exp, got := tc.want, mustStatus(t, g, job).Reason; exp != got {
			t.Errorf("reason %q: Status says %q, want %q", tc.reason, got, exp)
		}
	}
}

// A lease's context ends when the lease is settled, whichever way, so work
// started under it (a stream, a goroutine) stops with the call.
func TestSettleEndsTheLeaseContext(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Cooldown: time.Minute})
	ctx := context.Background()
	for name, settle := range map[string]func(*gate.Lease) error{
		"succeed": func(l *gate.Lease) error { return l.Succeed(ctx) },
		"fail":    func(l *gate.Lease) error { return l.Fail(ctx, errTransient) },
		"release": func(l *gate.Lease) error { return l.Release(ctx) },
	} {
		l, err := g.Acquire(ctx, "job-"+name)
		if err != nil {
			t.Fatal(err)
		}
		if l.Context().Err() != nil {
			t.Fatalf("%s: lease context done before the settle", name)
		}
		if err := settle(l); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !errors.Is(l.Context().Err(), context.Canceled) {
			t.Errorf("%s: lease context %v after the settle, want cancelled", name, l.Context().Err())
		}
	}
}

// A transient failure that cannot be written is refused in this process
// for the cooldown it should have had, with a settle_unwritten warning.
func TestUnwrittenTransientRefusesAsCooling(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	f := &gatetest.Flaky{Client: rdb}
	rec := newRecorder()
	const cooldown = 10 * time.Minute
	g := newGate(t, f, gate.Options{Cooldown: cooldown, Jitter: -1, Observer: rec})
	err := g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error {
		f.Down.Store(true) // Redis goes away before the settle
		return errTransient
	})
	var ce *gate.CallError
	if !errors.As(err, &ce) || !errors.Is(ce.SettleErr, gate.ErrUnavailable) {
		t.Fatalf("Do: %v, want a CallError whose settle could not reach Redis", err)
	}
	b := blocked(t, g, "job") // Redis still down: refused in-process
	if b.State != gate.CoolingDown || b.RetryAfter < cooldown-time.Minute || b.RetryAfter > cooldown {
		t.Fatalf("retry: %v, retry in %v; want cooling down for about %v", b.State, b.RetryAfter, cooldown)
	}
	var warned bool
	for _, e := range rec.drain() {
		if e.Kind == gate.EventWarning && e.Reason == gate.WarnSettleUnwritten && e.State == gate.CoolingDown {
			warned = true
		}
	}
	if !warned {
		t.Fatal("no settle_unwritten warning")
	}
}

// A failure that cools the upstream writes the job and the upstream in one
// round trip: a failed Do is two round trips, as a successful one.
func TestScopeFailureIsOneSettle(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	names := &cmdNames{}
	rdb.AddHook(names)
	g := newGate(t, rdb, gate.Options{Upstream: "openai:prod-key", Cooldown: time.Minute, Classify: providerBusyClassifier})
	ctx := context.Background()
	_ = failWith(t, g, "warm-up", errProviderBusy) // loads the scripts
	if err := g.ResetUpstreams(ctx); err != nil {
		t.Fatal(err)
	}
	names.take()
	l, err := g.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Fail(ctx, errProviderBusy); err != nil {
		t.Fatal(err)
	}
	if got := names.take(); !equalNames(got, []string{"[pttl set time get evalsha]", "[evalsha evalsha]"}) {
		t.Fatalf("acquire and provider-wide failure sent %v, want two round trips: the upstream's GET and its budget's admission with the acquire, then the job's settle with the upstream's trip", got)
	}
	if up := l.Result().Upstream; up.State != gate.UpstreamCoolingDown {
		t.Fatalf("upstream after the failure: %+v, want cooling", up)
	}
}

// An observer hears of the scope only when it cools: a 5xx the scope
// tolerates (below AllowedFails) is counted without a scope event; a rate
// limit cools it with one.
func TestScopeEventOnlyWhenItCools(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	rec := newRecorder()
	err5xx := errors.New("500 internal server error")
	g := newGate(t, rdb, gate.Options{Upstream: "openai:prod-key", Cooldown: time.Minute, Observer: rec,
		Classify: func(err error) classify.Verdict {
			if errors.Is(err, err5xx) {
				return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonUpstream5xx}
			}
			return providerBusyClassifier(err)
		}})
	_ = failWith(t, g, "a", err5xx)
	evs := rec.drain()
	if n := countKind(evs, gate.EventUpstreamCooling) + countKind(evs, gate.EventUpstreamPaused); n != 0 {
		t.Fatalf("one tolerated 5xx: events %+v, want no scope event", evs)
	}
	_ = failWith(t, g, "b", errProviderBusy)
	evs = rec.drain()
	if n := countKind(evs, gate.EventUpstreamCooling); n != 1 {
		t.Fatalf("rate limit: events %+v, want one scope_cooling", evs)
	}
}

// A provider-wide failure cools its job for the provider's hint (at least
// a second), else for the scope's cooldown with a Scope, else Cooldown; it
// never counts an attempt.
func TestProviderWideJobCooldown(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	busyFor := func(hint time.Duration) error { return classify.Transient(errProviderBusy, hint) }
	classifier := func(err error) classify.Verdict {
		v := classify.Default(err)
		if errors.Is(err, errProviderBusy) {
			v.ProviderWide, v.Reason = true, classify.ReasonRateLimited
		}
		return v
	}
	noScope := newGate(t, rdb, gate.Options{Cooldown: time.Minute, Jitter: -1, Classify: classifier})
	scoped := newGate(t, rdb, gate.Options{Cooldown: time.Minute, Jitter: -1, Classify: classifier,
		Upstream: "openai:prod-key", UpstreamPolicy: gate.UpstreamPolicy{Cooldown: 20 * time.Second}})
	for i, tc := range []struct {
		g    *gate.Gate
		hint time.Duration
		want time.Duration
	}{
		{noScope, 0, time.Minute},
		{scoped, 0, 20 * time.Second},
		{noScope, 7 * time.Second, 7 * time.Second},
		{noScope, 200 * time.Millisecond, time.Second},
	} {
		var ce *gate.CallError
		if err := failWith(t, tc.g, "job-"+strings.Repeat("p", i+1), busyFor(tc.hint)); !errors.As(err, &ce) {
			t.Fatalf("case %d: %v", i, err)
		}
		if ce.State != gate.CoolingDown || ce.RetryAfter != tc.want || ce.Attempts != 0 {
			t.Errorf("case %d (hint %v): %v for %v after %d attempts, want cooling down for %v, no attempt",
				i, tc.hint, ce.State, ce.RetryAfter, ce.Attempts, tc.want)
		}
	}
}

// A "canceled" verdict is the caller giving up only when the caller's own
// context was cancelled: with the caller still there it is a transient
// failure (the job cools), as is a class no code can be.
func TestCanceledVerdictWithoutTheCallerIsTransient(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	for _, class := range []classify.Class{classify.ClassCanceled, classify.ClassCanceled + 7} {
		g := newGate(t, rdb, gate.Options{Cooldown: time.Minute, Classify: func(error) classify.Verdict {
			return classify.Verdict{Class: class, Reason: classify.ReasonCanceled}
		}})
		job := "job-" + class.String()
		var ce *gate.CallError
		if err := failWith(t, g, job, errors.New("stream reset")); !errors.As(err, &ce) {
			t.Fatalf("class %v: %v, want a *CallError", class, err)
		}
		if ce.Verdict.Class != classify.ClassTransient || ce.State != gate.CoolingDown {
			t.Errorf("class %v with the caller still there: verdict %v, state %v; want transient, cooling down",
				class, ce.Verdict.Class, ce.State)
		}
	}
}

// A custom classifier's evidence reaches the same outputs as its reason:
// kept when it is evidence's form, dropped otherwise. Its Suspect mark
// counts for a permanent verdict only (the job cools before it fails) and
// is dropped from any other.
func TestCustomVerdictEvidenceAndSuspect(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	for i, tc := range []struct {
		v        classify.Verdict
		evidence string
		suspect  bool
		state    gate.State
	}{
		{classify.Verdict{Class: classify.ClassTransient, Reason: "x", Evidence: "http:429"}, "http:429", false, gate.CoolingDown},
		{classify.Verdict{Class: classify.ClassTransient, Reason: "x", Evidence: "http:429\x1b[31m"}, "", false, gate.CoolingDown},
		{classify.Verdict{Class: classify.ClassTransient, Reason: "x", Suspect: true}, "", false, gate.CoolingDown},
		{classify.Verdict{Class: classify.ClassPermanent, Reason: "x", Suspect: true}, "", true, gate.CoolingDown},
		{classify.Verdict{Class: classify.ClassPermanent, Reason: "x"}, "", false, gate.Failed},
	} {
		g := newGate(t, rdb, gate.Options{Cooldown: time.Minute, Classify: func(error) classify.Verdict { return tc.v }})
		var ce *gate.CallError
		if err := failWith(t, g, fmt.Sprint("job-", i), errBoom); !errors.As(err, &ce) {
			t.Fatalf("%d: %v, want a *CallError", i, err)
		}
		if ce.Verdict.Evidence != tc.evidence || ce.Verdict.Suspect != tc.suspect || ce.State != tc.state {
			t.Errorf("%d: %+v gave evidence %q, suspect %v, state %v; want %q, %v, %v",
				i, tc.v, ce.Verdict.Evidence, ce.Verdict.Suspect, ce.State, tc.evidence, tc.suspect, tc.state)
		}
	}
}
