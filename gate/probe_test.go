package gate_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// No herd at the upstream boundary (issue 12): 1,000 jobs from 4 gates are
// retried every 100 ms while the provider keeps answering 429 with a
// 300 ms hint. When an upstream window ends, one call, across all gates,
// probes the upstream and the others stay refused until it settles, so
// after the first failure there is at most one upstream call per window.
func TestUpstreamProbeStopsTheHerd(t *testing.T) {
	const (
		jobs    = 1000
		gates   = 4
		workers = 8 // per gate
		hint    = 300 * time.Millisecond
		windows = 5
	)
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			gs := make([]*gate.Gate, gates)
			for i := range gs {
				gs[i] = upstreamGate(t, tg, prefix, gate.Options{Classify: upstreamClassifier(hint)})
			}
			var (
				calls     atomic.Int64
				firstFail atomic.Int64 // unix ns of the first settled 429
				mu        sync.Mutex
				after     []time.Time // calls whose Do began after it
			)
			// upstream is the model; entered is when its Do began, so calls
			// already past the upstream check when it was written count as
			// in flight.
			upstream := func(entered time.Time) func(context.Context, *gate.Lease) error {
				return func(context.Context, *gate.Lease) error {
					calls.Add(1)
					if f := firstFail.Load(); f != 0 && entered.UnixNano() > f {
						mu.Lock()
						after = append(after, time.Now())
						mu.Unlock()
					}
					return errRateLimited
				}
			}
			// The windows count from the first 429, not from the start: on a
			// busy machine (a cluster's first round trips) it may come late.
			start := time.Now()
			running := func() bool {
				if f := firstFail.Load(); f != 0 {
					return time.Now().Before(time.Unix(0, f).Add(windows*hint + hint/2))
				}
				return time.Since(start) < 30*time.Second
			}
			var wg sync.WaitGroup
			for g := 0; g < gates; g++ {
				for w := 0; w < workers; w++ {
					wg.Add(1)
					go func(g, w int) {
						defer wg.Done()
						ctx := context.Background()
						// Each worker sweeps its share of the jobs, one
						// retry per job every 100 ms.
						for sweep := 0; running(); sweep++ {
							begin := time.Now()
							for j := w; j < jobs; j += workers {
								if j%gates != g {
									continue
								}
								err := gs[g].Do(ctx, jobName(j), upstream(time.Now()))
								var ce *gate.CallError
								if errors.As(err, &ce) && ce.SettleErr == nil {
									firstFail.CompareAndSwap(0, time.Now().UnixNano())
								}
							}
							if d := 100*time.Millisecond - time.Since(begin); d > 0 {
								time.Sleep(d)
							}
						}
					}(g, w)
				}
			}
			wg.Wait()
			if firstFail.Load() == 0 {
				t.Fatal("no call earned a 429 in 30 s")
			}
			first := time.Unix(0, firstFail.Load())
			inFlight := calls.Load() - int64(len(after))
			if inFlight > gates*workers {
				t.Fatalf("%d calls before the upstream was first written, want at most the %d in flight", inFlight, gates*workers)
			}
			// One probe per window: calls after the first failure are at
			// least a window apart (minus scheduling slack).
			mu.Lock()
			defer mu.Unlock()
			for i := 1; i < len(after); i++ {
				if gap := after[i].Sub(after[i-1]); gap < hint-50*time.Millisecond {
					t.Fatalf("upstream calls %d and %d only %v apart, want one per %v window", i-1, i, gap, hint)
				}
			}
			maxCalls := int(time.Since(first)/hint) + 1
			if len(after) > maxCalls {
				t.Fatalf("%d upstream calls in %v after the first 429, want at most %d (one per window)", len(after), time.Since(first).Round(time.Millisecond), maxCalls)
			}
			if len(after) < 2 {
				t.Fatalf("%d probes in %d windows: the upstream never recovered", len(after), windows)
			}
			t.Logf("%s: %d calls in flight at the first 429, then %d probes in %v", tg.Name, inFlight, len(after), time.Since(first).Round(time.Millisecond))
		})
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[n:])
		}
	}
}

// A probe that fails again without a hint escalates the upstream's cooldown
// by BackoffFactor; a probe that gets through makes the upstream ready for all.
func TestUpstreamProbeEscalatesThenOpens(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			prefix := redistest.UniqueKey(t)
			const base = 200 * time.Millisecond
			g := upstreamGate(t, tg, prefix, gate.Options{
				UpstreamPolicy: gate.UpstreamPolicy{Cooldown: base},
				Backoff:        gate.Backoff{Factor: 2, Jitter: -1}})
			other := upstreamGate(t, tg, prefix, gate.Options{})
			_ = failWith(t, g, "a", errOverloaded)
			for i, want := range []time.Duration{base, 2 * base, 4 * base} {
				up, err := upstreamStatus(ctx, g)
				if err != nil {
					t.Fatal(err)
				}
				if up.State != gate.CoolingDown || up.RetryAfter > want || up.RetryAfter < want-100*time.Millisecond {
					t.Fatalf("window %d: %+v, want cooling for %v", i+1, up, want)
				}
				// Wait for the window to end, then probe (and fail again).
				probe := awaitProbe(t, tg, g, "job-"+itoa(i), up.RetryAfter, func(context.Context, *gate.Lease) error { return errOverloaded })
				if !probe {
					t.Fatalf("window %d: no probe ran", i+1)
				}
			}
			// The next probe succeeds: every job of the upstream runs again.
			up, _ := upstreamStatus(ctx, g)
			if !awaitProbe(t, tg, g, "ok", up.RetryAfter, okFn) {
				t.Fatal("no probe ran")
			}
			if err := other.Do(ctx, "other", okFn); err != nil {
				t.Fatalf("after a successful probe: %v", err)
			}
		})
	}
}

// awaitProbe lets wait pass and retries job until a call runs (the probe),
// failing t after a deadline.
func awaitProbe(t *testing.T, tg redistest.Target, g *gate.Gate, job string, wait time.Duration, fn func(context.Context, *gate.Lease) error) bool {
	t.Helper()
	pass(tg, wait)
	deadline := time.Now().Add(wait + 3*time.Second)
	for time.Now().Before(deadline) {
		ran := false
		err := g.Do(context.Background(), job, func(ctx context.Context, l *gate.Lease) error {
			ran = true
			return fn(ctx, l)
		})
		if ran {
			return true
		}
		if !errors.Is(err, gate.ErrUpstreamCooling) {
			t.Fatalf("waiting for the probe: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// While one call probes, every other call of the upstream, from any gate, is
// refused as upstream cooling, and a refused job does not keep the probe.
// "miniredis, cluster form" runs the cluster's code path (the upstream read
// and claimed on its own, in parallel with the acquire) on one node,
// through a client that exposes only the scripting commands.
func TestUpstreamOneProbeAtATime(t *testing.T) {
	targets := redistest.Targets(t)
	if t0 := targets[0]; t0.Name == "miniredis" {
		t0.Name, t0.Client = "miniredis, cluster form", nil
		targets = append(targets, t0)
	}
	for _, tg := range targets {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			prefix := redistest.UniqueKey(t)
			o := gate.Options{Prefix: prefix, Upstream: "openai:prod-key", Classify: upstreamClassifier(300 * time.Millisecond), Cooldown: time.Minute}
			var rdb gate.Client = tg.Client
			if rdb == nil {
				rdb = &gatetest.Flaky{Client: targets[0].Client}
			}
			o.UpstreamPolicy.Cooldown = 100 * time.Millisecond
			g := newGate(t, rdb, o)
			o.UpstreamPolicy = gate.UpstreamPolicy{}
			other := newGate(t, rdb, o)
			// A job cooling on its own must not take the probe and sit on it.
			_ = failWith(t, g, "cooling", classify.Transient(errBoom, time.Hour))
			_ = failWith(t, g, "a", errOverloaded)
			pass(tg, 100*time.Millisecond)
			deadline := time.Now().Add(3 * time.Second)
			for {
				err := other.Do(ctx, "cooling", okFn)
				if errors.Is(err, gate.ErrCoolingDown) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("job cooling on its own: %v", err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			release, done := holdProbe(t, g, "probe")
			for _, gg := range []*gate.Gate{g, other} {
				var b *gate.BlockedError
				if err := gg.Do(ctx, "another", okFn); !errors.As(err, &b) || !errors.Is(err, gate.ErrUpstreamCooling) {
					t.Fatalf("during the probe: %v, want ErrUpstreamCooling", err)
				}
				if st, _ := upstreamStatus(ctx, gg); !st.Probing {
					t.Fatalf("upstream status during the probe: %+v", st)
				}
			}
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if err := other.Do(ctx, "another", okFn); err != nil {
				t.Fatalf("after the probe: %v", err)
			}
		})
	}
}

// Every cooldown the gate writes is bounded by MaxCooldown, the upstream's
// included: Azure OpenAI's "Retry-After: 86400" must not stop every job
// of the key for a day.
func TestUpstreamCooldownBoundedByMaxCooldown(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := upstreamGate(t, tg, redistest.UniqueKey(t), gate.Options{
				Classify: upstreamClassifier(24 * time.Hour),
				Backoff:  gate.Backoff{Max: time.Hour}})
			var ce *gate.CallError
			if err := failWith(t, g, "a", errRateLimited); !errors.As(err, &ce) || ce.RetryAfter != time.Hour {
				t.Fatalf("job: %v, want a cooldown of MaxCooldown", err)
			}
			up, err := upstreamStatus(context.Background(), g)
			if err != nil || up.RetryAfter > time.Hour || up.RetryAfter < time.Hour-time.Minute {
				t.Fatalf("upstream: %+v %v, want about MaxCooldown", up, err)
			}
		})
	}
}

// A provider-wide failure with a hint: the user waits the provider's hint,
// not the job's backoff, and no attempt counts against the job, so
// MaxAttempts never fails a job because the provider was busy.
func TestProviderHintIsTheWait(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{MaxAttempts: 2, Jitter: -1},
		Classify:       upstreamClassifier(3 * time.Second),
		UpstreamPolicy: gate.UpstreamPolicy{Off: true}}) // each job calls: no upstream cools them all
	for i := 0; i < 3; i++ {
		var ce *gate.CallError
		if err := failWith(t, g, "job-"+itoa(i), errRateLimited); !errors.As(err, &ce) ||
			ce.State != gate.CoolingDown || ce.RetryAfter != 3*time.Second || ce.Attempts != 0 {
			t.Fatalf("429 with a 3 s hint: %+v, want cooling for 3s with no attempt counted", ce)
		}
	}
	// The same job, rate-limited again and again, never ends Failed.
	m, rdb2 := redistest.Miniredis(t)
	g2 := newGate(t, rdb2, gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{MaxAttempts: 2}, Classify: upstreamClassifier(3 * time.Second), UpstreamPolicy: gate.UpstreamPolicy{Off: true}})
	for i := 0; i < 4; i++ {
		_ = failWith(t, g2, "job", errRateLimited)
		redistest.Advance(m, 4*time.Second)
	}
	if st := mustStatus(t, g2, "job"); st.State != gate.Ready || st.Attempts != 0 {
		t.Fatalf("after 4 rate limits: %+v, want ready with no attempts", st)
	}
}

// An acquire undone because no replica acknowledged it (WaitReplicas)
// gives back the upstream probe it had claimed: the next call probes at once
// instead of the upstream staying "probing" for a lease.
func TestUndoneAcquireGivesBackTheProbe(t *testing.T) {
	srv := redistest.Server(t) // no replica: WAIT never reaches 1
	ctx := context.Background()
	prefix := redistest.UniqueKey(t)
	o := gate.Options{Prefix: prefix, Upstream: "s", Classify: upstreamClassifier(50 * time.Millisecond)}
	plain := newGate(t, srv.Client(t), o)
	o.Redis.WaitReplicas, o.Redis.WaitTimeout = 1, 20*time.Millisecond
	rec := newRecorder()
	o.Observer = rec
	waiting := newGate(t, srv.Client(t), o)
	_ = failWith(t, plain, "a", errRateLimited)
	// Once the upstream's 50 ms are over, the waiting gate claims the probe
	// and fails for want of a replica.
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := waiting.Do(ctx, "b", okFn)
		if errors.Is(err, gate.ErrUnavailable) {
			break
		}
		if !errors.Is(err, gate.ErrUpstreamCooling) || time.Now().After(deadline) {
			t.Fatalf("WaitReplicas without a replica: %v, want ErrUnavailable once the upstream's wait is over", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := plain.Do(ctx, "c", okFn); err != nil {
		t.Fatalf("after the undone probe: %v, want the next call to probe", err)
	}
	// Giving the probe back succeeded: no Redis error is reported for it.
	for _, e := range rec.drain() {
		if e.Kind == gate.EventRedisError && e.Op != "acquire" {
			t.Errorf("giving back the acquire: %s error event %v", e.Op, e.Err)
		}
	}
}

// While a probe runs, a call its upstream refuses waits for the probe's
// outcome: the running estimate of a call less the probe's time so far,
// not the probe's lease (a minute) nor nothing.
func TestProbeRefusalWaitsTheRunningEstimate(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	ctx := context.Background()
	o := gate.Options{Prefix: redistest.UniqueKey(t), Upstream: "openai:prod-key", Lease: time.Minute,
		Classify: upstreamClassifier(300 * time.Millisecond), Cooldown: time.Minute}
	o.UpstreamPolicy.Cooldown = 100 * time.Millisecond
	g := newGate(t, rdb, o)
	gate.SeedCallTimes(g, 8*time.Second, 8)
	_ = failWith(t, g, "a", errOverloaded)
	redistest.Advance(m, 100*time.Millisecond+time.Millisecond) // the upstream's cooldown ends: a probe may go
	release, done := holdProbe(t, g, "probe")
	err := g.Do(ctx, "another", okFn)
	close(release)
	if d, ok := gate.RetryAfter(err); !errors.Is(err, gate.ErrUpstreamCooling) || !ok || d < 5*time.Second || d > 8*time.Second {
		t.Fatalf("during the probe: %v (retry in %v), want ErrUpstreamCooling in about the 8 s a call runs", err, d)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// holdProbe runs job on g in the background, the probe of its upstream,
// and returns once its fn runs; fn returns nil once release is closed,
// and Do's error arrives on done.
func holdProbe(t *testing.T, g *gate.Gate, job string) (release chan struct{}, done chan error) {
	t.Helper()
	probing := make(chan struct{})
	release, done = make(chan struct{}), make(chan error, 1)
	go func() {
		done <- g.Do(context.Background(), job, func(context.Context, *gate.Lease) error {
			close(probing)
			<-release
			return nil
		})
	}()
	select {
	case <-probing:
	case err := <-done:
		t.Fatalf("the probe did not run: %v", err)
	case <-time.After(3 * time.Second):
		t.Fatal("the probe did not run")
	}
	return release, done
}
