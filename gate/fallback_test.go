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
	"github.com/retrygate/retrygate/internal/testkit/proof"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// fallbackGate is a gate over tg with upstreams "primary" then "backup".
func fallbackGate(t *testing.T, tg redistest.Target, prefix string, o gate.Options) *gate.Gate {
	t.Helper()
	o.Prefix, o.Upstream, o.UpstreamPolicy.Fallbacks = prefix, "primary", []string{"backup"}
	if o.Classify == nil {
		o.Classify = upstreamClassifier(time.Hour)
	}
	if o.Cooldown == 0 {
		o.Cooldown = time.Minute
	}
	return newGate(t, tg.Client, o)
}

// A gate with upstreams in order runs each job on the first ready one and
// says which (Lease.Upstream); a provider-wide failure cools the upstream it
// came from, not the others, and lets the job's next call run at once on
// the next; a job refused by every upstream learns each one's state and
// the soonest recovery; Status names every upstream.
func TestFallbackRunsOnTheNextUpstream(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			prefix := redistest.UniqueKey(t)
			g := fallbackGate(t, tg, prefix, gate.Options{})
			used := func(job string, fail error) (string, error) {
				var upstream string
				err := g.Do(ctx, job, func(_ context.Context, l *gate.Lease) error {
					upstream = l.Upstream()
					return fail
				})
				return upstream, err
			}
			if s, err := used("a", nil); err != nil || s != "primary" {
				t.Fatalf("both ready: ran on %q (%v), want primary", s, err)
			}
			// "x" fails on the primary; its next attempt, on the backup,
			// counts on from it.
			quick := fallbackGate(t, tg, prefix, gate.Options{Cooldown: 50 * time.Millisecond, Backoff: gate.Backoff{Jitter: -1}})
			if err := failWith(t, quick, "x", classify.Transient(errBoom, 0)); !errors.Is(err, gate.ErrCoolingDown) {
				t.Fatalf("x on the primary: %v", err)
			}
			// The primary rate-limits "b": it cools for an hour, "b" does not.
			s, err := used("b", errRateLimited)
			var ce *gate.CallError
			if !errors.As(err, &ce) || s != "primary" || ce.State != gate.Ready || ce.Attempts != 0 {
				t.Fatalf("rate limit on the primary: ran on %q, %v (%+v), want the job Ready, no attempt", s, err, ce)
			}
			if s, err := used("b", nil); err != nil || s != "backup" {
				t.Fatalf("the retry: ran on %q (%v), want backup at once", s, err)
			}
			st := mustStatus(t, g, "c")
			if len(st.Upstreams) != 2 || st.Upstreams[0].State != gate.CoolingDown || st.Upstreams[1].State != gate.Ready ||
				st.Upstream.Upstream != "backup" {
				t.Fatalf("status: %+v, want primary cooling, backup ready and next", st)
			}
			pass(tg, 50*time.Millisecond)
			waitState(t, tg, quick, "x", gate.Ready, time.Second)
			var upstream string
			err = quick.Do(ctx, "x", func(_ context.Context, l *gate.Lease) error {
				upstream = l.Upstream()
				return classify.Transient(errBoom, 0)
			})
			if !errors.As(err, &ce) || upstream != "backup" || ce.Attempts != 2 {
				t.Fatalf("x on the backup: %q %v, want its attempt 2", upstream, err)
			}
			// A permanent verdict fails the job whatever upstream ran it.
			if s, err := used("f", classify.Permanent(errBoom)); s != "backup" || !errors.Is(err, gate.ErrFailed) {
				t.Fatalf("permanent on backup: %q %v, want Failed", s, err)
			}
			// The backup rate-limits too: every upstream refuses, each named.
			if _, err := used("d", errRateLimited); err == nil {
				t.Fatal("d: want the backup's rate limit")
			}
			b := blocked(t, g, "e")
			if !errors.Is(b, gate.ErrUpstreamCooling) || len(b.Upstreams) != 2 ||
				b.Upstreams[0].Upstream != "primary" || b.Upstreams[1].Upstream != "backup" ||
				b.RetryAfter <= 0 || b.RetryAfter > time.Hour {
				t.Fatalf("both cooling: %+v, want ErrUpstreamCooling naming both", b)
			}
			if d, ok := gate.RetryAfter(b); !ok || d != b.RetryAfter {
				t.Fatalf("RetryAfter: %v %v", d, ok)
			}
		})
	}
}

// The upstream recovering soonest decides the wait of a refusal by all.
func TestFallbackRefusalWaitsForTheSoonest(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			long := fallbackGate(t, tg, prefix, gate.Options{Classify: upstreamClassifier(time.Hour)})
			short := fallbackGate(t, tg, prefix, gate.Options{Classify: upstreamClassifier(2 * time.Minute)})
			_ = failWith(t, long, "a", errRateLimited)  // primary: an hour
			_ = failWith(t, short, "b", errRateLimited) // backup: two minutes
			b := blocked(t, long, "c")
			if b.RetryAfter > 2*time.Minute || b.RetryAfter < time.Minute || b.Reason != classify.ReasonRateLimited {
				t.Fatalf("refusal by both: retry in %v (%s), want the backup's 2 minutes", b.RetryAfter, b.Reason)
			}
			if b.Upstreams[0].RetryAfter < 59*time.Minute {
				t.Fatalf("primary: %+v, want its hour", b.Upstreams[0])
			}
		})
	}
}

// Upstreams that recover at the same moment: the refusal names the first
// in order (Upstream before Fallbacks), with its reason.
func TestFallbackRefusalTieGoesToTheFirst(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0) // both cooldowns start at the same Redis time
	tg := redistest.Target{Name: "miniredis", Client: rdb}
	g := fallbackGate(t, tg, redistest.UniqueKey(t), gate.Options{
		Classify:       upstreamClassifier(time.Minute),
		UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Minute},
	})
	_ = failWith(t, g, "a", errRateLimited) // primary: the hint's minute
	_ = failWith(t, g, "b", errOverloaded)  // backup: no hint, UpstreamPolicy's minute
	b := blocked(t, g, "c")
	if b.Upstreams[0].RetryAfter != b.Upstreams[1].RetryAfter {
		t.Fatalf("upstreams %+v: want the same wait", b.Upstreams)
	}
	if b.Reason != classify.ReasonRateLimited || b.RetryAfter != b.Upstreams[0].RetryAfter {
		t.Fatalf("refusal by both: %s in %v, want the primary's rate limit", b.Reason, b.RetryAfter)
	}
}

// Done by hand, with one gate per upstream (each with its own keys), a
// job can run on both upstreams at once: the fallback's lock is not the
// primary's. One gate with Fallbacks keeps one lock per job whichever
// upstream it runs on, so the second call is refused (ErrInFlight).
func TestFallbackUnderOneLock(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const window = 150 * time.Millisecond
			ctx := context.Background()
			type call func(ctx context.Context, job string, fn func(context.Context, *gate.Lease) error) error
			// run plays the scenario: a 429 cools the primary; a retry
			// falls back to the backup and runs long; the primary's window
			// ends and another retry of the job comes. It returns the most
			// runs of the job at once.
			run := func(t *testing.T, do call) int64 {
				var now, most atomic.Int64
				slow := make(chan struct{})
				fn := func(fail bool) func(context.Context, *gate.Lease) error {
					return func(context.Context, *gate.Lease) error {
						n := now.Add(1)
						defer now.Add(-1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						if fail {
							return errRateLimited
						}
						<-slow
						return nil
					}
				}
				_ = do(ctx, "job", fn(true)) // the primary rate-limits: it cools for a window
				done := make(chan error, 1)
				go func() { done <- do(ctx, "job", fn(false)) }() // runs on the backup, slowly
				waitUntil(t, 5*time.Second, "the retry runs on the backup", func() bool { return now.Load() == 1 })
				// The primary's window ends, and so does the job's own wait
				// after its 429 (at least a second): a retry comes.
				pass(tg, time.Second+window)
				deadline := time.Now().Add(5 * time.Second)
				for time.Now().Before(deadline) {
					err := do(ctx, "job", fn(true)) // runs on the primary, if anything lets it
					if errors.Is(err, errRateLimited) || errors.Is(err, gate.ErrInFlight) {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				close(slow)
				if err := <-done; err != nil {
					t.Fatalf("the backup's run: %v", err)
				}
				return most.Load()
			}
			t.Run("two gates by hand", func(t *testing.T) {
				o := func(upstream string) gate.Options {
					return gate.Options{Prefix: redistest.UniqueKey(t), Upstream: upstream, Cooldown: time.Minute,
						Classify: upstreamClassifier(window)}
				}
				primary, backup := newGate(t, tg.Client, o("primary")), newGate(t, tg.Client, o("backup"))
				if most := run(t, func(ctx context.Context, job string, fn func(context.Context, *gate.Lease) error) error {
					err := primary.Do(ctx, job, fn)
					var b *gate.BlockedError // refused by the primary, not failed on it
					if errors.As(err, &b) && (b.State == gate.UpstreamCooling || b.State == gate.CoolingDown) {
						return backup.Do(ctx, job, fn)
					}
					return err
				}); most != 2 {
					t.Fatalf("%d runs at once, want the 2 this pattern allows (the reason Fallbacks exists)", most)
				}
			})
			t.Run("one gate with Fallbacks", func(t *testing.T) {
				g := fallbackGate(t, tg, redistest.UniqueKey(t), gate.Options{Classify: upstreamClassifier(window)})
				if most := run(t, g.Do); most != 1 {
					t.Fatalf("%d runs of one job at once, want 1", most)
				}
			})
		})
	}
}

// The storm through two upstreams (issue 24): 1,000 jobs from 4 gates
// retried every 100 ms; the primary answers 429 for at least 5 of its
// windows and until every job has completed on the backup (which is
// healthy), then it heals. Every job completes, on the backup; after its
// first 429 the primary gets at most one call per window (its probe), not
// counting the calls already in flight then; no job ever runs twice at once
// (a store that checks fences rejects nothing).
func TestFallbackStorm(t *testing.T) {
	const (
		jobs    = 1000
		gates   = 4
		workers = 8 // per gate
		window  = 300 * time.Millisecond
		windows = 5
		// A bound on liveness, not on speed: miniredis's storm, 16 s at
		// load 10, took past 30 s at load 12 (954 of 1000 jobs done at
		// 30 s; a run whose last jobs completed after 30 s passed).
		within = 2 * time.Minute
	)
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			gs := make([]*gate.Gate, gates)
			for i := range gs {
				gs[i] = fallbackGate(t, tg, prefix, gate.Options{Classify: upstreamClassifier(window)})
			}
			type call struct{ began, at time.Time }
			var (
				store        proof.FenceStore
				mu           sync.Mutex
				primaryCalls []call
				onBackup     atomic.Int64
				backupJobs   sync.Map // jobs that succeeded on the backup
				onBackupN    atomic.Int64
				running      sync.Map // job → *atomic.Int32
				overlaps     atomic.Int64
				firstSettled atomic.Int64 // unix ns: the first 429's settle returned
				healed       atomic.Int64 // unix ns: when the primary healed
			)
			start := time.Now()
			fn := func(job string, began time.Time) func(context.Context, *gate.Lease) error {
				return func(_ context.Context, l *gate.Lease) error {
					c, _ := running.LoadOrStore(job, new(atomic.Int32))
					if c.(*atomic.Int32).Add(1) > 1 {
						overlaps.Add(1)
					}
					defer c.(*atomic.Int32).Add(-1)
					if l.Upstream() == "primary" {
						mu.Lock()
						primaryCalls = append(primaryCalls, call{began, time.Now()})
						mu.Unlock()
						if healed.Load() == 0 {
							return errRateLimited
						}
					} else {
						onBackup.Add(1)
						if _, seen := backupJobs.LoadOrStore(job, true); !seen && onBackupN.Add(1) == jobs &&
							time.Since(start) < windows*window {
							// Every job completed on the backup: the primary
							// heals once its windows are over.
							time.AfterFunc(windows*window-time.Since(start), func() { healed.Store(time.Now().UnixNano()) })
						} else if !seen && onBackupN.Load() == jobs {
							healed.CompareAndSwap(0, time.Now().UnixNano())
						}
					}
					time.Sleep(time.Millisecond)
					return store.Write(job, l.Fence(), l.Upstream())
				}
			}
			var wg sync.WaitGroup
			for g := 0; g < gates; g++ {
				for w := 0; w < workers; w++ {
					wg.Add(1)
					go func(g, w int) {
						defer wg.Done()
						ctx := context.Background()
						deadline := start.Add(within)
						// Until the primary has healed and served a window more.
						for {
							if h := healed.Load(); (h != 0 && time.Since(time.Unix(0, h)) > window) || time.Now().After(deadline) {
								return
							}
							begin := time.Now()
							for j := w*gates + g; j < jobs; j += gates * workers {
								began := time.Now()
								err := gs[g].Do(ctx, jobName(j), fn(jobName(j), began))
								var ce *gate.CallError
								if errors.As(err, &ce) && errors.Is(err, errRateLimited) && ce.SettleErr == nil {
									firstSettled.CompareAndSwap(0, time.Now().UnixNano())
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
			if n := onBackupN.Load(); n != jobs {
				t.Fatalf("%d of %d jobs completed on the backup within %v", n, jobs, within)
			}
			if n := overlaps.Load(); n != 0 || store.Rejected() != 0 {
				t.Fatalf("%d runs overlapped another of their job, %d stale writes: want none", n, store.Rejected())
			}
			first, heal := time.Unix(0, firstSettled.Load()), time.Unix(0, healed.Load())
			if heal.Sub(start) < windows*window {
				t.Fatalf("the primary healed after %v, want at least %d windows", heal.Sub(start), windows)
			}
			mu.Lock()
			defer mu.Unlock()
			// Probes: primary calls whose Do began after the first 429 was
			// settled and that ran while it rate-limited.
			var probes []time.Time
			for _, c := range primaryCalls {
				if c.began.After(first) && c.at.Before(heal) {
					probes = append(probes, c.at)
				}
			}
			for i := 1; i < len(probes); i++ {
				if gap := probes[i].Sub(probes[i-1]); gap < window-50*time.Millisecond {
					t.Fatalf("primary calls %d and %d only %v apart, want one probe per %v window", i-1, i, gap, window)
				}
			}
			if maxCalls := int(heal.Sub(first)/window) + 1; len(probes) > maxCalls {
				t.Fatalf("%d calls on the primary in the %v it rate-limited after its first 429, want at most %d (one per window)",
					len(probes), heal.Sub(first).Round(time.Millisecond), maxCalls)
			}
			if len(probes) < 2 {
				t.Fatalf("%d probes of the primary in %v: it was never probed again", len(probes), heal.Sub(first).Round(time.Millisecond))
			}
			t.Logf("%s: %d calls on the primary (%d probes in the %v it rate-limited), %d on the backup",
				tg.Name, len(primaryCalls), len(probes), heal.Sub(first).Round(time.Millisecond), onBackup.Load())
		})
	}
}

// Events name the upstream they concern: a backup's lease, its settle and
// the cooling its failure caused carry the backup's upstream, not the gate's
// primary (metrics per upstream would otherwise charge the primary).
func TestFallbackEventsNameTheirUpstream(t *testing.T) {
	tg := redistest.Targets(t)[0]
	ctx := context.Background()
	rec := newRecorder()
	g := fallbackGate(t, tg, redistest.UniqueKey(t), gate.Options{Observer: rec})
	if err := g.Do(ctx, "a", func(context.Context, *gate.Lease) error { return errRateLimited }); err == nil {
		t.Fatal("a: want the primary's rate limit")
	}
	if err := g.Do(ctx, "a", func(context.Context, *gate.Lease) error { return errRateLimited }); err == nil {
		t.Fatal("a: want the backup's rate limit")
	}
	want := []struct {
		kind     gate.EventKind
		upstream string
	}{
		{gate.EventAcquired, "primary"}, {gate.EventUpstreamCooling, "primary"}, {gate.EventSettled, "primary"},
		{gate.EventAcquired, "backup"}, {gate.EventUpstreamCooling, "backup"}, {gate.EventSettled, "backup"},
	}
	var got []gate.Event
	for _, e := range rec.drain() {
		if e.Kind != gate.EventRenewed {
			got = append(got, e)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("events: %+v, want %d", got, len(want))
	}
	for i, w := range want {
		if got[i].Kind != w.kind || got[i].Upstream != w.upstream {
			t.Errorf("event %d: %v on %q, want %v on %q", i, got[i].Kind, got[i].Upstream, w.kind, w.upstream)
		}
	}
}

// A call every upstream refuses sends one EventRefused that names the
// upstream recovering soonest (its metric's upstream label).
func TestRefusalEventNamesTheSoonestUpstream(t *testing.T) {
	tg := redistest.Targets(t)[0]
	prefix := redistest.UniqueKey(t)
	rec := newRecorder()
	long := fallbackGate(t, tg, prefix, gate.Options{Classify: upstreamClassifier(time.Hour), Observer: rec})
	short := fallbackGate(t, tg, prefix, gate.Options{Classify: upstreamClassifier(2 * time.Minute)})
	_ = failWith(t, long, "a", errRateLimited)  // primary: an hour
	_ = failWith(t, short, "b", errRateLimited) // backup: two minutes
	rec.drain()
	_ = blocked(t, long, "c")
	var refused []gate.Event
	for _, e := range rec.drain() {
		if e.Kind == gate.EventRefused {
			refused = append(refused, e)
		}
	}
	if len(refused) != 1 || refused[0].State != gate.UpstreamCooling || refused[0].Upstream != "backup" {
		t.Fatalf("refusal events: %+v, want one UpstreamCooling refusal naming backup", refused)
	}
}

// Upstreams reads every upstream of the gate, in order, and
// ResetUpstreams recovers every one; a gate without an upstream reads
// none.
func TestUpstreamsReadsAndResetsEveryUpstream(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	ctx := context.Background()
	g := newGate(t, rdb, gate.Options{Upstream: "a", UpstreamPolicy: gate.UpstreamPolicy{Fallbacks: []string{"b"}, Cooldown: time.Minute}, Classify: upstreamClassifier(0)})
	_ = failWith(t, g, "j1", errOverloaded) // runs on a, cools it
	_ = failWith(t, g, "j2", errOverloaded) // runs on b, cools it
	ups, err := g.Upstreams(ctx)
	if err != nil || len(ups) != 2 {
		t.Fatalf("Upstreams: %+v, %v; want two", ups, err)
	}
	for i, name := range []string{"a", "b"} {
		if u := ups[i]; u.Upstream != name || u.State != gate.CoolingDown || u.Reason != classify.ReasonOverloaded {
			t.Errorf("upstream %d: %+v, want %q cooling down (overloaded)", i, u, name)
		}
	}
	if err := g.ResetUpstreams(ctx); err != nil {
		t.Fatal(err)
	}
	if ups, err = g.Upstreams(ctx); err != nil || ups[0].State != gate.Ready || ups[1].State != gate.Ready {
		t.Fatalf("after ResetUpstreams: %+v, %v; want both ready", ups, err)
	}
	if ups, err := newGate(t, rdb, gate.Options{UpstreamPolicy: gate.UpstreamPolicy{Off: true}}).Upstreams(ctx); err != nil || ups != nil {
		t.Fatalf("a gate with upstreams off: %+v, %v; want none", ups, err)
	}
	if ups, err := newGate(t, rdb, gate.Options{}).Upstreams(ctx); err != nil || len(ups) != 1 || ups[0].Upstream != gate.DefaultUpstream {
		t.Fatalf("a gate without Upstream: %+v, %v; want DefaultUpstream", ups, err)
	}
}
