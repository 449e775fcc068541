package gatequeue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gatequeue"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// Failures the test classifier maps to fixed verdicts.
var (
	errTimeout   = errors.New("timed out")
	errRateLimit = errors.New("429")
	errQuota     = errors.New("quota")
	errInvalid   = errors.New("invalid request")
	errSnooze    = errors.New("snooze")
)

func testClassify(err error) classify.Verdict {
	switch {
	case errors.Is(err, errRateLimit):
		return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonRateLimited, ProviderWide: true, RetryAfter: 30 * time.Second}
	case errors.Is(err, errQuota):
		return classify.Verdict{Class: classify.ClassSystemic, Reason: classify.ReasonQuotaExhausted, ProviderWide: true}
	case errors.Is(err, errTimeout):
		return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonTimeout}
	case errors.Is(err, errInvalid):
		return classify.Verdict{Class: classify.ClassPermanent, Reason: classify.ReasonInvalidRequest}
	case errors.Is(err, context.Canceled):
		return classify.Verdict{Class: classify.ClassCanceled, Reason: classify.ReasonCanceled}
	}
	return classify.Default(err)
}

var opts = gate.Options{
	Cooldown: time.Minute, Lease: time.Minute, Retention: gate.Retention{Done: time.Hour},
	Classify: testClassify, Upstream: "llm",
	UpstreamPolicy: gate.UpstreamPolicy{Cooldown: 5 * time.Second, PauseTTL: 10 * time.Minute},
	Backoff:        gate.Backoff{Jitter: -1},
}

func fail(err error) func(context.Context) error { return func(context.Context) error { return err } }

func succeed(context.Context) error { return nil }

func isSnooze(err error) bool { return errors.Is(err, errSnooze) }

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before runs on the same gate first: failures of the job (or
		// another job of the upstream) that set up the refusal.
		before func(t *testing.T, g *gate.Gate, advance func(time.Duration))
		job    string
		fn     func(context.Context) error
		want   gatequeue.Plan
		// wantWait, when set, bounds want.Wait from below (it is a time left).
		wantWait time.Duration
		wantRan  bool
	}{
		{name: "success", fn: succeed, wantRan: true, want: gatequeue.Plan{Action: gatequeue.Complete}},
		{name: "transient failure counts", fn: fail(errTimeout), wantRan: true,
			want: gatequeue.Plan{Action: gatequeue.Retry, Wait: time.Minute, Counted: true, Reason: classify.ReasonTimeout}},
		{name: "provider-wide 429 does not count", fn: fail(errRateLimit), wantRan: true,
			want: gatequeue.Plan{Action: gatequeue.Retry, Wait: 30 * time.Second, Reason: classify.ReasonRateLimited}},
		// The upstream's first pause is its Cooldown (5 s); the job waits as long.
		{name: "systemic does not count", fn: fail(errQuota), wantRan: true,
			want: gatequeue.Plan{Action: gatequeue.Retry, Wait: 5 * time.Second, Reason: classify.ReasonQuotaExhausted}},
		{name: "permanent cancels", fn: fail(errInvalid), wantRan: true,
			want: gatequeue.Plan{Action: gatequeue.Cancel, Reason: classify.ReasonInvalidRequest}},
		{name: "queue instruction releases", fn: fail(errSnooze), wantRan: true, want: gatequeue.Plan{}},
		{name: "refused: failed", before: runJob("doc", fail(errInvalid)), job: "doc", fn: succeed,
			want: gatequeue.Plan{Action: gatequeue.Cancel, Reason: classify.ReasonInvalidRequest}},
		{name: "refused: cooling", before: runJob("doc", fail(errTimeout)), job: "doc", fn: succeed,
			want: gatequeue.Plan{Action: gatequeue.Retry, Reason: classify.ReasonTimeout}, wantWait: 59 * time.Second},
		{name: "refused: done", before: runJob("doc", succeed), job: "doc", fn: succeed,
			want: gatequeue.Plan{Action: gatequeue.Complete}},
		// A young run's wait is a second, growing with its age (the
		// gate has timed no call): not its lease's minute.
		{name: "refused: running", before: holdJob("doc"), job: "doc", fn: succeed,
			want: gatequeue.Plan{Action: gatequeue.Retry}, wantWait: time.Second},
		{name: "refused: upstream cooling", before: runJob("other", fail(errRateLimit)), job: "doc", fn: succeed,
			want: gatequeue.Plan{Action: gatequeue.Retry, Reason: classify.ReasonRateLimited}, wantWait: 29 * time.Second},
		{name: "refused: upstream paused", before: runJob("other", fail(errQuota)), job: "doc", fn: succeed,
			want: gatequeue.Plan{Action: gatequeue.Retry, Reason: classify.ReasonQuotaExhausted}, wantWait: 4 * time.Second},
		// The probe holds the upstream for a lease (1 min); the others come
		// back when the gate expects the probe's call to end, as for any
		// running call (a second while it is young), not after a minute.
		{name: "refused: upstream probing", before: probing, job: "doc", fn: succeed,
			want: gatequeue.Plan{Action: gatequeue.Retry, Wait: time.Second, Reason: classify.ReasonRateLimited}},
		{name: "invalid job key", job: "", fn: succeed,
			want: gatequeue.Plan{Action: gatequeue.Cancel, Reason: gatequeue.ReasonInvalidJob}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, c := redistest.Miniredis(t)
			g := gatetest.New(t, c, opts)
			if tc.before != nil {
				tc.before(t, g, func(d time.Duration) { redistest.Advance(m, d) })
			}
			job := tc.job
			if job == "" && tc.name != "invalid job key" {
				job = "doc"
			}
			ran := false
			plan, err := gatequeue.Run(context.Background(), g, job, func(ctx context.Context) error {
				ran = true
				return tc.fn(ctx)
			}, isSnooze)
			if exp, got := tc.wantRan, ran; exp != got {
				t.Errorf("fn ran: exp %v, got %v (err %v)", exp, got, err)
			}
			if tc.wantWait > 0 {
				if plan.Wait < tc.wantWait || plan.Wait > tc.wantWait+2*time.Second {
					t.Errorf("wait: exp about %v, got %v", tc.wantWait+time.Second, plan.Wait)
				}
				plan.Wait = 0
			}
			if exp, got := tc.want, plan; exp != got {
				t.Errorf("plan: exp %+v, got %+v (err %v)", exp, got, err)
			}
			if (plan.Action == gatequeue.Complete) != (err == nil || errors.Is(err, gate.ErrDone)) {
				t.Errorf("err %v with plan %v", err, plan.Action)
			}
		})
	}
}

func runJob(job string, fn func(context.Context) error) func(*testing.T, *gate.Gate, func(time.Duration)) {
	return func(t *testing.T, g *gate.Gate, _ func(time.Duration)) {
		t.Helper()
		_, _ = gatequeue.Run(context.Background(), g, job, fn, nil)
	}
}

func holdJob(job string) func(*testing.T, *gate.Gate, func(time.Duration)) {
	return func(t *testing.T, g *gate.Gate, _ func(time.Duration)) {
		t.Helper()
		l, err := g.Acquire(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Release(context.Background()) })
	}
}

// probing cools the upstream, lets the cooldown pass and leaves another job
// holding the probe.
func probing(t *testing.T, g *gate.Gate, advance func(time.Duration)) {
	t.Helper()
	runJob("first", fail(errRateLimit))(t, g, advance)
	advance(31 * time.Second)
	holdJob("probe")(t, g, advance)
	ups, err := g.Upstreams(context.Background())
	if err != nil || !ups[0].Probing {
		t.Fatalf("upstream: exp probing, got %+v, %v", ups, err)
	}
}

func TestRunSnoozeReleasesTheJob(t *testing.T) {
	_, c := redistest.Miniredis(t)
	g := gatetest.New(t, c, opts)
	ctx := context.Background()
	if _, err := gatequeue.Run(ctx, g, "doc", fail(errSnooze), isSnooze); err != errSnooze {
		t.Fatalf("exp fn's own error back, got %v", err)
	}
	st, err := g.Status(ctx, "doc")
	if err != nil {
		t.Fatal(err)
	}
	if exp, got := gate.Ready, st.State; exp != got {
		t.Fatalf("state: exp %v, got %v", exp, got)
	}
}

func TestRunPanicCoolsTheJob(t *testing.T) {
	_, c := redistest.Miniredis(t)
	g := gatetest.New(t, c, opts)
	ctx := context.Background()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		_, _ = gatequeue.Run(ctx, g, "doc", func(context.Context) error { panic("boom") }, nil)
	}()
	st, err := g.Status(ctx, "doc")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != gate.CoolingDown || st.Reason != classify.ReasonPanic {
		t.Fatalf("exp cooling down for %q, got %v %q", classify.ReasonPanic, st.State, st.Reason)
	}
}

func TestRunRedisDownPasses(t *testing.T) {
	m, c := redistest.Miniredis(t)
	g := gatetest.New(t, c, opts)
	m.Close()
	plan, err := gatequeue.Run(context.Background(), g, "doc", succeed, nil)
	if !errors.Is(err, gate.ErrUnavailable) || plan.Action != gatequeue.Pass {
		t.Fatalf("exp Pass with ErrUnavailable, got %v, %v", plan.Action, err)
	}
}

// Redis lost while fn ran: the failure cannot be written, so the job's
// lock, at most a lease (1 min), is its cooldown; the queue waits that
// long and counts the attempt.
func TestRunUnwrittenFailureWaitsALease(t *testing.T) {
	m, c := redistest.Miniredis(t)
	g := gatetest.New(t, c, opts)
	plan, err := gatequeue.Run(context.Background(), g, "doc", func(context.Context) error {
		m.Close()
		return errTimeout
	}, nil)
	var ce *gate.CallError
	if !errors.As(err, &ce) || ce.SettleErr == nil {
		t.Fatalf("exp an unwritten *gate.CallError, got %v", err)
	}
	if exp, got := (gatequeue.Plan{Action: gatequeue.Retry, Wait: time.Minute, Counted: true, Reason: classify.ReasonTimeout}), plan; exp != got {
		t.Fatalf("plan: exp %+v, got %+v", exp, got)
	}
}

// TestFailedWithFallbackRetriesAtOnce: with another upstream ready, a
// provider-wide failure is retried at once, on that upstream, and not
// counted (it was not the job's fault); the retry runs on the backup.
func TestFailedWithFallbackRetriesAtOnce(t *testing.T) {
	_, c := redistest.Miniredis(t)
	o := opts
	o.UpstreamPolicy.Fallbacks = []string{"llm-backup"}
	g := gatetest.New(t, c, o)
	var ran []string
	fn := func(err error) func(context.Context) error {
		return func(ctx context.Context) error {
			ran = append(ran, gate.LeaseFromContext(ctx).Upstream())
			return err
		}
	}
	plan, err := gatequeue.Run(context.Background(), g, "doc", fn(errRateLimit), isSnooze)
	if want := (gatequeue.Plan{Action: gatequeue.Retry, Wait: 10 * time.Millisecond, Reason: classify.ReasonRateLimited}); plan != want {
		t.Fatalf("plan: exp %+v, got %+v (err %v)", want, plan, err)
	}
	if plan, err = gatequeue.Run(context.Background(), g, "doc", fn(nil), isSnooze); plan.Action != gatequeue.Complete {
		t.Fatalf("the retry: %+v (%v), want complete", plan, err)
	}
	if len(ran) != 2 || ran[0] != "llm" || ran[1] != "llm-backup" {
		t.Fatalf("ran on %v, want llm then llm-backup", ran)
	}
}

// A task whose tenant the gate rejects (a control byte, from
// Options.Caller) would be refused on every run: cancelled, not retried.
func TestRunWithAnInvalidTenantIsCancelled(t *testing.T) {
	_, c := redistest.Miniredis(t)
	g := gatetest.New(t, c, opts)
	ctx := gate.WithTenant(context.Background(), "acme\nx", 1)
	plan, err := gatequeue.Run(ctx, g, "doc", succeed, isSnooze)
	if !errors.Is(err, gate.ErrInvalidTenant) || plan.Action != gatequeue.Cancel || plan.Reason != gatequeue.ReasonInvalidTenant {
		t.Fatalf("a task with an invalid tenant: %+v, %v; want cancelled (invalid_tenant)", plan, err)
	}
}
