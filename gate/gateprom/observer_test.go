package gateprom_test

import (
	"context"
	"errors"
	"github.com/retrygate/retrygate/internal/keyspace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateprom"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// Errors the test classifier maps to fixed verdicts.
var (
	errTimeout   = errors.New("upstream timed out")
	errInvalid   = errors.New("invalid request")
	errOdd       = errors.New("custom failure")
	errRateLimit = errors.New("429")
)

func testClassify(err error) classify.Verdict {
	switch {
	case errors.Is(err, errTimeout):
		return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonTimeout}
	case errors.Is(err, errInvalid):
		return classify.Verdict{Class: classify.ClassPermanent, Reason: classify.ReasonInvalidRequest}
	case errors.Is(err, errRateLimit):
		return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonRateLimited,
			ProviderWide: true, RetryAfter: 30 * time.Second}
	}
	return classify.Verdict{Class: classify.ClassTransient, Reason: "my_own_reason_code"}
}

var newGate = gatetest.New

func ok(context.Context, *gate.Lease) error { return nil }

func failWith(err error) func(context.Context, *gate.Lease) error {
	return func(context.Context, *gate.Lease) error { return err }
}

// TestObserverDrivesRealGate runs a gate through every ordinary outcome and
// checks the counters an operator's dashboards and alerts read.
func TestObserverDrivesRealGate(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			obs := gateprom.New(gateprom.Options{ConstLabels: prometheus.Labels{"service": "test"}})
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(obs)
			g := newGate(t, tg.Client, gate.Options{Upstream: "openai:test", Cooldown: time.Hour,
				Classify: testClassify, Observer: obs,
				Backoff: gate.Backoff{Jitter: -1}})

			if err := g.Do(ctx, "job-ok", ok); err != nil {
				t.Fatalf("success: %v", err)
			}
			_ = g.Do(ctx, "job-transient", failWith(errTimeout))
			if err := g.Do(ctx, "job-transient", ok); !errors.Is(err, gate.ErrCoolingDown) {
				t.Fatalf("exp ErrCoolingDown, got %v", err)
			}
			_ = g.Do(ctx, "job-permanent", failWith(errInvalid))
			if err := g.Do(ctx, "job-permanent", ok); !errors.Is(err, gate.ErrFailed) {
				t.Fatalf("exp ErrFailed, got %v", err)
			}
			_ = g.Do(ctx, "job-odd", failWith(errOdd))

			// A duplicate of a running job is refused in-process.
			entered, release := make(chan struct{}), make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = g.Do(ctx, "job-slow", func(context.Context, *gate.Lease) error {
					close(entered)
					<-release
					return nil
				})
			}()
			<-entered
			if err := g.Do(ctx, "job-slow", ok); !errors.Is(err, gate.ErrInFlight) {
				t.Fatalf("exp ErrInFlight, got %v", err)
			}
			close(release)
			wg.Wait()

			// A provider-wide rate limit cools the upstream; the next job is refused.
			_ = g.Do(ctx, "job-429", failWith(errRateLimit))
			if err := g.Do(ctx, "job-after-429", ok); !errors.Is(err, gate.ErrUpstreamCooling) {
				t.Fatalf("exp ErrUpstreamCooling, got %v", err)
			}

			exp := `
# HELP retrygate_acquisitions_total Calls that asked for a job's lock, by outcome (acquired, refused, fail_open, shadow_refused) and, for refusals, the refusing state.
# TYPE retrygate_acquisitions_total counter
retrygate_acquisitions_total{outcome="acquired",service="test",state="",upstream="openai:test"} 6
retrygate_acquisitions_total{outcome="refused",service="test",state="cooling_down",upstream="openai:test"} 1
retrygate_acquisitions_total{outcome="refused",service="test",state="failed",upstream="openai:test"} 1
retrygate_acquisitions_total{outcome="refused",service="test",state="running",upstream="openai:test"} 1
retrygate_acquisitions_total{outcome="refused",service="test",state="upstream_cooling",upstream="openai:test"} 1
# HELP retrygate_coalesced_total Refusals decided in-process: the job was already running in this process (no Redis round trip).
# TYPE retrygate_coalesced_total counter
retrygate_coalesced_total{service="test",upstream="openai:test"} 1
# HELP retrygate_settles_total Outcomes recorded in Redis after a call, by outcome (succeeded, cooled_down, marked_failed, released) and reason code.
# TYPE retrygate_settles_total counter
retrygate_settles_total{outcome="cooled_down",reason="other",service="test",upstream="openai:test"} 1
retrygate_settles_total{outcome="cooled_down",reason="rate_limited",service="test",upstream="openai:test"} 1
retrygate_settles_total{outcome="cooled_down",reason="timeout",service="test",upstream="openai:test"} 1
retrygate_settles_total{outcome="marked_failed",reason="invalid_request",service="test",upstream="openai:test"} 1
retrygate_settles_total{outcome="succeeded",reason="",service="test",upstream="openai:test"} 2
# HELP retrygate_upstream_transitions_total Provider-wide failures that cooled (state=cooling_down) or paused (state=paused) the upstream, by reason.
# TYPE retrygate_upstream_transitions_total counter
retrygate_upstream_transitions_total{reason="rate_limited",service="test",state="cooling_down",upstream="openai:test"} 1
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(exp),
				"retrygate_acquisitions_total", "retrygate_coalesced_total", "retrygate_settles_total",
				"retrygate_upstream_transitions_total"); err != nil {
				t.Fatal(err)
			}

			held := histograms(t, reg, "retrygate_lock_held_seconds")
			if exp, got := uint64(2), held["succeeded"].GetSampleCount(); exp != got {
				t.Errorf("held{succeeded} count: exp %d, got %d", exp, got)
			}
			if exp, got := uint64(3), held["cooled_down"].GetSampleCount(); exp != got {
				t.Errorf("held{cooled_down} count: exp %d, got %d", exp, got)
			}
			cool := histograms(t, reg, "retrygate_cooldown_seconds")
			// Two job cooldowns of exactly 1h (no jitter) and the 429's 30 s hint.
			if exp, got := uint64(3), cool["job"].GetSampleCount(); exp != got {
				t.Errorf("cooldown{job} count: exp %d, got %d", exp, got)
			}
			if got := cool["upstream"].GetSampleSum(); got < 29 || got > 30.001 {
				t.Errorf("cooldown{upstream} sum: exp ~30s, got %v", got)
			}
			assertNoJobLabel(t, reg, "job-")
		})
	}
}

// Lease loss: the lock vanishes under a running call (an operator deleted
// it, or it expired during a long pause). By default the call's context is
// cancelled and nothing is settled; with ContinueOnLeaseLost the settle is
// rejected as not owned.
func TestObserverLeaseLoss(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			for _, cont := range []bool{false, true} {
				ctx := context.Background()
				obs := gateprom.New(gateprom.Options{})
				g := newGate(t, tg.Client, gate.Options{Lease: 90 * time.Millisecond, Observer: obs, Redis: gate.RedisPolicy{ContinueOnLeaseLost: cont}})
				lock := keyspace.Job(gatetest.Prefix(g), "job")
				err := g.Do(ctx, "job", func(ctx context.Context, l *gate.Lease) error {
					if err := tg.Client.Del(ctx, lock).Err(); err != nil {
						return err
					}
					deadline := time.Now().Add(3 * time.Second)
					for !l.Lost() {
						if time.Now().After(deadline) {
							return errors.New("lease not lost within 3s")
						}
						time.Sleep(5 * time.Millisecond) // poll; renewal runs every 30 ms
					}
					return nil
				})
				exp := `
# HELP retrygate_lease_lost_total Leases lost while the call ran (expired, taken over, or renewals failing); the call's writes may overlap a newer owner's.
# TYPE retrygate_lease_lost_total counter
retrygate_lease_lost_total{upstream="default"} 1
`
				if cont {
					if !errors.Is(err, gate.ErrNotOwned) {
						t.Fatalf("ContinueOnLeaseLost: exp ErrNotOwned, got %v", err)
					}
					exp += `# HELP retrygate_not_owned_total Settles rejected because the lock was no longer the caller's ("lock not owned"); nothing was written.
# TYPE retrygate_not_owned_total counter
retrygate_not_owned_total{upstream="default"} 1
`
				} else if !errors.Is(err, gate.ErrLeaseLost) {
					t.Fatalf("Fence: exp ErrLeaseLost, got %v", err)
				}
				// The renewal reports the loss from its own goroutine, which
				// a loaded machine may run after Do returned: poll.
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					err := testutil.CollectAndCompare(obs, strings.NewReader(exp),
						"retrygate_lease_lost_total", "retrygate_not_owned_total")
					if err == nil {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("continue=%v: %v", cont, err)
					}
				}
			}
		})
	}
}

// An unreachable Redis counts a Redis error and, with FailOpen, an ungated call.
func TestObserverRedisDown(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	obs := gateprom.New(gateprom.Options{Namespace: "llm"})
	g := newGate(t, c, gate.Options{Observer: obs, Redis: gate.RedisPolicy{FailOpen: true}})
	if err := g.Do(context.Background(), "job", ok); err != nil {
		t.Fatalf("fail-open Do: %v", err)
	}
	if exp, got := 1.0, testutil.ToFloat64(metric(t, obs, "llm_redis_errors_total")); exp != got {
		t.Errorf("redis errors: exp %v, got %v", exp, got)
	}
	exp := `
# HELP llm_redis_errors_total Redis operations that failed, by operation and cause (unavailable: Redis could not serve the call now; refused: Redis answered with an error no wait fixes, such as NOPERM or OOM).
# TYPE llm_redis_errors_total counter
llm_redis_errors_total{cause="unavailable",op="acquire",upstream="default"} 1
`
	if err := testutil.CollectAndCompare(obs, strings.NewReader(exp), "llm_redis_errors_total"); err != nil {
		t.Fatal(err)
	}
	exp = `
# HELP llm_acquisitions_total Calls that asked for a job's lock, by outcome (acquired, refused, fail_open, shadow_refused) and, for refusals, the refusing state.
# TYPE llm_acquisitions_total counter
llm_acquisitions_total{outcome="fail_open",state="",upstream="default"} 1
`
	if err := testutil.CollectAndCompare(obs, strings.NewReader(exp), "llm_acquisitions_total"); err != nil {
		t.Fatal(err)
	}
}

// Unknown reason codes collapse into "other", so a buggy classifier cannot
// explode the series count; classify's own codes and Options.Reasons are
// kept.
func TestObserverBoundsLabels(t *testing.T) {
	obs := gateprom.New(gateprom.Options{Reasons: []string{"mine"}})
	ctx := context.Background()
	for i := range 100 {
		obs.Observe(ctx, gate.Event{Kind: gate.EventSettled, State: gate.CoolingDown, Job: "job", Reason: "r" + string(rune('a'+i%26)) + strings.Repeat("x", i)})
	}
	obs.Observe(ctx, gate.Event{Kind: gate.EventSettled, State: gate.Failed, Reason: "mine"})
	obs.Observe(ctx, gate.Event{Kind: gate.EventSettled, State: gate.Failed, Reason: classify.ReasonBadStream})
	exp := `
# HELP retrygate_settles_total Outcomes recorded in Redis after a call, by outcome (succeeded, cooled_down, marked_failed, released) and reason code.
# TYPE retrygate_settles_total counter
retrygate_settles_total{outcome="cooled_down",reason="other",upstream=""} 100
retrygate_settles_total{outcome="marked_failed",reason="bad_stream",upstream=""} 1
retrygate_settles_total{outcome="marked_failed",reason="mine",upstream=""} 1
`
	if err := testutil.CollectAndCompare(obs, strings.NewReader(exp), "retrygate_settles_total"); err != nil {
		t.Fatal(err)
	}
}

func TestObserverLint(t *testing.T) {
	obs := everySeries()
	problems, err := testutil.CollectAndLint(obs)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	// acquisitions 5 (acquired, fail_open, refused with no state,
	// running and upstream_cooling), coalesced, settles 4, held 6 (4
	// settles, lease_lost, not_owned), cooldown 2, renewals 2, lease_lost,
	// not_owned, redis_errors, upstream_transitions 2, warnings, budget_left 2
	// (requests, tokens), budget_refusals, line_calls and line_wait 3 each
	// (class 0 acquired and refused, interactive acquired): every kind
	// lands in its series.
	if exp, got := 35, testutil.CollectAndCount(obs); exp != got {
		t.Errorf("series: exp %d, got %d", exp, got)
	}
}

// everySeries returns an Observer that has seen every event kind, and every
// settle and renewal outcome.
func everySeries() *gateprom.Observer {
	obs := gateprom.New(gateprom.Options{})
	for k := gate.EventAcquired; k <= gate.EventWarning; k++ {
		obs.Observe(context.Background(), gate.Event{Kind: k, Reason: "timeout", Op: "acquire", Held: time.Second, Cooldown: time.Minute})
	}
	// The settles and renewals each kind stands for.
	for _, e := range []gate.Event{
		{Kind: gate.EventSettled, State: gate.Done},
		{Kind: gate.EventSettled, State: gate.CoolingDown, Reason: "timeout"},
		{Kind: gate.EventSettled, State: gate.Failed, Reason: "timeout"},
		{Kind: gate.EventSettled, State: gate.Ready, Reason: "timeout"},
		{Kind: gate.EventSettled, Err: gate.ErrNotOwned},
		{Kind: gate.EventRenewed, Err: errors.New("down")},
		{Kind: gate.EventRefused, State: gate.Running, Local: true},
		{Kind: gate.EventAcquired, Priority: gate.PriorityInteractive, Tenant: "acme", Waited: time.Second},
		{Kind: gate.EventRefused, State: gate.UpstreamCooling, Budget: gate.UpstreamBudget{Spent: true,
			Requests: gate.BudgetLimit{Reported: true, Left: 0}, Tokens: gate.BudgetLimit{Reported: true, Left: 120}}},
	} {
		e.Held, e.Cooldown = time.Second, time.Minute
		obs.Observe(context.Background(), e)
	}
	return obs
}

// histograms returns the histograms of a family by their last label value
// (outcome or kind).
func histograms(t *testing.T, g prometheus.Gatherer, name string) map[string]*dto.Histogram {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.Histogram{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "outcome" || lp.GetName() == "kind" {
					out[lp.GetValue()] = m.GetHistogram()
				}
			}
		}
	}
	return out
}

// assertNoJobLabel fails if any label value contains a job key.
func assertNoJobLabel(t *testing.T, g prometheus.Gatherer, job string) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if strings.Contains(lp.GetValue(), job) {
					t.Errorf("%s has job key %q as label %s", mf.GetName(), lp.GetValue(), lp.GetName())
				}
			}
		}
	}
}

// metric returns the collector of one metric family, for testutil.ToFloat64.
func metric(t *testing.T, c prometheus.Collector, name string) prometheus.Collector {
	t.Helper()
	return filtered{c, name}
}

type filtered struct {
	prometheus.Collector
	name string
}

func (f filtered) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() { f.Collector.Collect(all); close(all) }()
	for m := range all {
		if strings.Contains(m.Desc().String(), `"`+f.name+`"`) {
			ch <- m
		}
	}
}

// A shadow gate's refusals are counted as shadow_refused, never refused:
// the calls ran, and a dashboard of refusals counts enforcement alone.
func TestObserverShadowRefusals(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	obs := gateprom.New(gateprom.Options{Namespace: "llm"})
	g := newGate(t, rdb, gate.Options{Observer: obs, Shadow: true, Cooldown: time.Hour})
	ctx := context.Background()
	ran := 0
	for range 3 {
		_ = g.Do(ctx, "job", func(context.Context, *gate.Lease) error {
			ran++
			return classify.Transient(errors.New("invalid output"), 0)
		})
	}
	if ran != 3 {
		t.Fatalf("the shadow gate ran %d of 3 calls", ran)
	}
	exp := `
# HELP llm_acquisitions_total Calls that asked for a job's lock, by outcome (acquired, refused, fail_open, shadow_refused) and, for refusals, the refusing state.
# TYPE llm_acquisitions_total counter
llm_acquisitions_total{outcome="acquired",state="",upstream="default"} 1
llm_acquisitions_total{outcome="shadow_refused",state="cooling_down",upstream="default"} 2
`
	if err := testutil.CollectAndCompare(obs, strings.NewReader(exp), "llm_acquisitions_total"); err != nil {
		t.Fatal(err)
	}
}

// An operator's pause shows in the metrics: a paused transition with
// reason "operator" (not "other") where it was set, and the refusals it
// causes in every process.
func TestObserverCountsAnOperatorsPause(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	ctx := context.Background()
	obs := gateprom.New(gateprom.Options{})
	other := gateprom.New(gateprom.Options{})
	prefix := redistest.UniqueKey(t)
	g := newGate(t, rdb, gate.Options{Prefix: prefix, Upstream: "openai", Observer: obs})
	g2 := newGate(t, rdb, gate.Options{Prefix: prefix, Upstream: "openai", Observer: other})
	if err := g.PauseUpstream(ctx, "openai", time.Hour, "key rotation"); err != nil {
		t.Fatal(err)
	}
	if err := g2.Do(ctx, "job", ok); !errors.Is(err, gate.ErrUpstreamCooling) {
		t.Fatalf("Do while paused: %v", err)
	}
	exp := `
# HELP retrygate_upstream_transitions_total Provider-wide failures that cooled (state=cooling_down) or paused (state=paused) the upstream, by reason.
# TYPE retrygate_upstream_transitions_total counter
retrygate_upstream_transitions_total{reason="operator",state="paused",upstream="openai"} 1
`
	if err := testutil.CollectAndCompare(obs, strings.NewReader(exp), "retrygate_upstream_transitions_total"); err != nil {
		t.Fatal(err)
	}
	exp = `
# HELP retrygate_acquisitions_total Calls that asked for a job's lock, by outcome (acquired, refused, fail_open, shadow_refused) and, for refusals, the refusing state.
# TYPE retrygate_acquisitions_total counter
retrygate_acquisitions_total{outcome="refused",state="upstream_cooling",upstream="openai"} 1
`
	if err := testutil.CollectAndCompare(other, strings.NewReader(exp), "retrygate_acquisitions_total"); err != nil {
		t.Fatal(err)
	}
}
