package gate_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A wave, one failure at a time: the first PermanentWave-1 jobs failing
// for one permanent reason are marked Failed; the one that makes the wave
// cools instead, pauses the upstream for the reason and warns once; a job
// already running when the wave started, failing for the same reason,
// cools too without a second warning; another reason is the job's own.
func TestPermanentWaveStepByStep(t *testing.T) {
	errBilling := classify.WithReason(errors.New("400 your account is not active"), classify.ClassPermanent, "account_inactive", 0)
	upstreamForms(t, func(t *testing.T, rdb gate.Client, _ func(time.Duration)) {
		ctx := context.Background()
		rec := newRecorder()
		g := newGate(t, rdb, gate.Options{Upstream: "openai:prod-key", Observer: rec, Cooldown: time.Hour,
			UpstreamPolicy: gate.UpstreamPolicy{PermanentWave: 3, FailWindow: time.Minute, PauseTTL: 10 * time.Minute}})
		knownUpstream(t, g)                 // calls beside a running one: not one at a time
		late, err := g.Acquire(ctx, "late") // running before the wave
		if err != nil {
			t.Fatal(err)
		}
		for _, job := range []string{"j1", "j2"} {
			var ce *gate.CallError
			if err := failWith(t, g, job, errBilling); !errors.As(err, &ce) || ce.State != gate.Failed {
				t.Fatalf("%s before the wave: %v, want Failed", job, err)
			}
		}
		if evs := rec.drain(); countKind(evs, gate.EventUpstreamPaused)+countKind(evs, gate.EventWarning) != 0 {
			t.Fatalf("before the wave: %v", evs)
		}

		var ce *gate.CallError
		if err := failWith(t, g, "j3", errBilling); !errors.As(err, &ce) || ce.State != gate.CoolingDown || errors.Is(err, gate.ErrFailed) {
			t.Fatalf("j3 makes the wave: %v, want it cooling, not Failed", err)
		}
		up, err := upstreamStatus(ctx, g)
		if err != nil || up.State != gate.Paused || up.Reason != "account_inactive" ||
			up.RetryAfter > 10*time.Minute || up.RetryAfter < 9*time.Minute {
			t.Fatalf("upstream after the wave: %+v %v, want paused for account_inactive for 10m", up, err)
		}
		evs := rec.drain()
		var warns []gate.Event
		for _, e := range evs {
			if e.Kind == gate.EventWarning {
				warns = append(warns, e)
			}
		}
		if len(warns) != 1 || warns[0].Reason != gate.WarnPermanentWave || warns[0].Job != "j3" || warns[0].Cooldown != 10*time.Minute {
			t.Fatalf("warnings: %+v, want one %s for j3 with the pause", warns, gate.WarnPermanentWave)
		}
		if n := countKind(evs, gate.EventUpstreamPaused); n < 1 {
			t.Fatalf("no upstream_paused event for the wave")
		}

		if err := late.Settle(ctx, errBilling); !errors.As(err, &ce) || ce.SettleErr != nil {
			t.Fatalf("late, in the wave: %v, want a written *CallError", err)
		}
		if st := ce.State; st != gate.CoolingDown {
			t.Fatalf("late, in the wave: %v, want CoolingDown", st)
		}
		for _, e := range rec.drain() {
			if e.Kind == gate.EventWarning {
				t.Fatalf("a second warning for the same wave: %+v", e)
			}
		}
		if err := g.ResetUpstreams(ctx); err != nil {
			t.Fatal(err)
		}
		if err := failWith(t, g, "other", classify.Permanent(errBoom)); !errors.As(err, &ce) || ce.State != gate.Failed {
			t.Fatalf("another reason: %v, want Failed", err)
		}
	})
}

// A negative PermanentWave turns waves off: every permanent failure is
// the job's own, and the upstream stays ready.
func TestPermanentWaveOff(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	errBilling := classify.WithReason(errors.New("400 your account is not active"), classify.ClassPermanent, "account_inactive", 0)
	g := newGate(t, rdb, gate.Options{Upstream: "openai:prod-key", UpstreamPolicy: gate.UpstreamPolicy{PermanentWave: -1}})
	for i := 0; i < 12; i++ {
		var ce *gate.CallError
		if err := failWith(t, g, jobName(i), errBilling); !errors.As(err, &ce) || ce.State != gate.Failed {
			t.Fatalf("job %d: %v, want Failed", i, err)
		}
	}
	if up, err := upstreamStatus(context.Background(), g); err != nil || up.State != gate.Ready {
		t.Fatalf("upstream: %+v %v, want ready", up, err)
	}
}

// Once this process has made a wave, it knows the upstream is paused: the
// next job is refused by one read of the upstream (no acquire to undo), and
// a lone permanent failure, no wave, teaches it nothing (a retry of a job
// seen cooling stays the upstream's GET with the job's acquire).
func TestPermanentWaveRefusalCost(t *testing.T) {
	errBilling := classify.WithReason(errors.New("400 your account is not active"), classify.ClassPermanent, "account_inactive", 0)
	t.Run("after a wave", func(t *testing.T) {
		_, c := redistest.Miniredis(t)
		names := &redistest.Commands{}
		c.AddHook(names)
		g := newGate(t, &gatetest.Flaky{Client: c}, gate.Options{Upstream: "openai:prod-key", Cooldown: time.Hour,
			UpstreamPolicy: gate.UpstreamPolicy{PermanentWave: 2}})
		_ = failWith(t, g, "j1", errBilling)
		_ = failWith(t, g, "j2", errBilling)
		for i := 0; i < 2; i++ {
			names.Take()
			if b := blocked(t, g, "next"); !errors.Is(b, gate.ErrUpstreamCooling) || upstream(b).State != gate.Paused {
				t.Fatalf("next: %v, want the paused upstream's refusal", b)
			}
		}
		if got := names.Take(); !slices.Equal(got, []string{"evalsha"}) {
			t.Fatalf("refusal after the wave sent %v, want one read of the upstream", got)
		}
	})
	t.Run("after a lone permanent failure", func(t *testing.T) {
		_, c := redistest.Miniredis(t)
		names := &redistest.Commands{}
		c.AddHook(names)
		g := newGate(t, c, gate.Options{Upstream: "openai:prod-key", Cooldown: time.Hour})
		_ = failWith(t, g, "warm-up", classify.Transient(errBoom, 0))
		_ = failWith(t, g, "cooling", classify.Transient(errBoom, 0))
		_ = blocked(t, g, "cooling")
		_ = failWith(t, g, "lone", errBilling)
		names.Take()
		if b := blocked(t, g, "cooling"); !errors.Is(b, gate.ErrCoolingDown) {
			t.Fatalf("cooling: %v, want ErrCoolingDown", b)
		}
		if got := names.Take(); !slices.Equal(got, []string{"evalsha"}) {
			t.Fatalf("a known cooldown's retry sent %v, want [evalsha] (the job's acquire and its upstream's admission, one script on one node)", got)
		}
	})
}

// A pause for a wave makes its reason the upstream's, and only its: the
// probe that ends the pause and fails with another permanent reason fails
// its own job, while one that fails with the wave's reason cools.
func TestWaveReasonIsOnlyTheWaves(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	tg := redistest.Target{Name: "miniredis", Client: rdb}
	errR := classify.WithReason(errors.New("400 account inactive"), classify.ClassPermanent, "account_inactive", 0)
	rec := newRecorder()
	g := upstreamGate(t, tg, redistest.UniqueKey(t), gate.Options{Cooldown: time.Hour, Observer: rec,
		UpstreamPolicy: gate.UpstreamPolicy{PermanentWave: 2, FailWindow: time.Minute, PauseTTL: time.Minute}})
	_ = failWith(t, g, "a", errR)
	_ = failWith(t, g, "b", errR) // the wave: the upstream pauses for account_inactive
	if up, err := upstreamStatus(context.Background(), g); err != nil || up.State != gate.Paused || up.Reason != "account_inactive" {
		t.Fatalf("after the wave: %+v %v, want paused for account_inactive", up, err)
	}
	probe := func(job string, fail error) gate.State {
		t.Helper()
		redistest.Advance(m, 61*time.Second) // the pause is over: this call probes
		var ce *gate.CallError
		if err := failWith(t, g, job, fail); !errors.As(err, &ce) {
			t.Fatalf("%s, the probe: %v, want its own failure", job, err)
		}
		return ce.State
	}
	if st := probe("c", classify.Permanent(errBoom)); st != gate.Failed {
		t.Fatalf("a probe failing for another reason: %v, want its job Failed", st)
	}
	// The upstream answered: ready again, and a new wave of the reason
	// pauses it again; its probe failing for that reason cools.
	_ = failWith(t, g, "d", errR)
	_ = failWith(t, g, "e", errR)
	if st := probe("f", errR); st != gate.CoolingDown {
		t.Fatalf("a probe failing for the wave's reason: %v, want its job cooling", st)
	}
	// Every wave check reached Redis: no Redis error was reported.
	for _, e := range rec.drain() {
		if e.Kind == gate.EventRedisError {
			t.Errorf("%s error event for job %s: %v", e.Op, e.Job, e.Err)
		}
	}
}

// A wave of permanent verdicts is not the jobs' fault (issue 12): 100 jobs
// from 4 gates all fail with the same permanent reason (here an
// unclassified billing error that arrives as a 400). Once
// UpstreamPolicy.PermanentWave distinct jobs have failed for it, no more
// Failed marks are written: the other jobs cool, the upstream pauses for the
// reason, and one loud warning names it.
func TestPermanentWavePausesTheUpstream(t *testing.T) {
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
				gs[i] = upstreamGate(t, tg, prefix, gate.Options{Observer: rec, Cooldown: time.Hour,
					UpstreamPolicy: gate.UpstreamPolicy{PermanentWave: wave, FailWindow: time.Minute}})
			}
			knownUpstream(t, gs[0]) // calls at once: not one at a time
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
			up, err := upstreamStatus(context.Background(), gs[1])
			if err != nil || up.State != gate.Paused || up.Reason != "account_inactive" {
				t.Fatalf("upstream %+v %v, want paused for account_inactive", up, err)
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
			other := upstreamGate(t, tg, redistest.UniqueKey(t), gate.Options{UpstreamPolicy: gate.UpstreamPolicy{PermanentWave: wave}})
			var ce *gate.CallError
			if err := failWith(t, other, "x", classify.Permanent(errBoom)); !errors.As(err, &ce) || ce.State != gate.Failed {
				t.Fatalf("a lone permanent failure: %v, want failed", err)
			}
		})
	}
}
