package gate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/redisop"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
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
	g := newGate(t, f, gate.Options{Cooldown: cooldown, Observer: rec, Backoff: gate.Backoff{Jitter: -1}})
	err := g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error {
		f.Down.Store(true) // Redis goes away before the settle
		return errTransient
	})
	var ce *gate.CallError
	if !errors.As(err, &ce) || !errors.Is(ce.SettleErr, gate.ErrUnavailable) {
		t.Fatalf("Do: %v, want a CallError whose settle could not reach Redis", err)
	}
	refusedAsCooling(t, g, rec, cooldown) // Redis still down: refused in-process
}

// A failure that cools the upstream writes the job and the upstream in one
// round trip: a failed Do is two round trips, as a successful one.
func TestUpstreamFailureIsOneSettle(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	names := &redistest.Commands{}
	rdb.AddHook(names)
	// A wait stated: the upstream cools for it (a 429 stating none, of a
	// call a learned rate admitted, cools for one call's length).
	g := newGate(t, rdb, gate.Options{Upstream: "openai:prod-key", Cooldown: time.Minute, Classify: func(err error) classify.Verdict {
		v := providerBusyClassifier(err)
		v.RetryAfter = time.Minute
		return v
	}})
	ctx := context.Background()
	_ = failWith(t, g, "warm-up", errProviderBusy) // loads the scripts
	if err := g.ResetUpstreams(ctx); err != nil {
		t.Fatal(err)
	}
	names.Take()
	l, err := g.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Fail(ctx, errProviderBusy); err != nil {
		t.Fatal(err)
	}
	if got := names.Take(); !slices.Equal(got, []string{"evalsha", "[evalsha evalsha evalsha evalsha]"}) {
		t.Fatalf("acquire and provider-wide failure sent %v, want two round trips: the acquire's script (the upstream and its budget judged, the job taken), then the job's settle with the upstream's stop, what the 429 teaches the rate learned (the reset forgot it: nothing was reserved) and the call durations", got)
	}
	if up := firstUpstream(t, g); up.State != gate.CoolingDown {
		t.Fatalf("upstream after the failure: %+v, want cooling", up)
	}
}

// An observer hears of the upstream only when it cools: a 5xx the upstream
// tolerates (below AllowedFails) is counted without an upstream event; a rate
// limit cools it with one.
func TestUpstreamEventOnlyWhenItCools(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	rec := newRecorder()
	err5xx := errors.New("500 internal server error")
	g := newGate(t, rdb, gate.Options{Upstream: "openai:prod-key", Cooldown: time.Minute, Observer: rec,
		Classify: func(err error) classify.Verdict {
			if errors.Is(err, err5xx) {
				return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonUpstream5xx}
			}
			// A wait stated: the upstream cools for it (one stating none,
			// of a provider known to send no budget, for a call's length).
			v := providerBusyClassifier(err)
			v.RetryAfter = time.Minute
			return v
		}})
	_ = failWith(t, g, "a", err5xx)
	evs := rec.drain()
	if n := countKind(evs, gate.EventUpstreamCooling) + countKind(evs, gate.EventUpstreamPaused); n != 0 {
		t.Fatalf("one tolerated 5xx: events %+v, want no upstream event", evs)
	}
	_ = failWith(t, g, "b", errProviderBusy)
	evs = rec.drain()
	if n := countKind(evs, gate.EventUpstreamCooling); n != 1 {
		t.Fatalf("rate limit: events %+v, want one upstream_cooling", evs)
	}
}

// A provider-wide failure cools its job for the provider's hint (at least
// a second), else for the upstream's cooldown with an Upstream, else Cooldown; it
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
	noUpstream := newGate(t, rdb, gate.Options{Cooldown: time.Minute, Classify: classifier, Backoff: gate.Backoff{Jitter: -1}, UpstreamPolicy: gate.UpstreamPolicy{Off: true}})
	upstreamd := newGate(t, rdb, gate.Options{Cooldown: time.Minute, Classify: classifier,
		Upstream: "openai:prod-key", UpstreamPolicy: gate.UpstreamPolicy{Cooldown: 20 * time.Second},
		Backoff: gate.Backoff{Jitter: -1}})
	for i, tc := range []struct {
		g    *gate.Gate
		hint time.Duration
		want time.Duration
	}{
		{noUpstream, 0, time.Minute},
		{upstreamd, 0, 20 * time.Second},
		{noUpstream, 7 * time.Second, 7 * time.Second},
		{noUpstream, 200 * time.Millisecond, time.Second},
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

func TestRenewalKeepsLongCallsLocked(t *testing.T) {
	for _, tg := range redistest.RealTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			// The lock stays held only while a renewal (every Lease/3, each
			// given Lease/3 to answer) reaches Redis before the lock expires,
			// so the lease must outlast a loaded scheduler's pause (hundreds
			// of ms on a busy two-core machine under -race): with a 150 ms
			// lease a 100 ms pause lost the lock with no fault in the gate.
			// The test counts renewals rather than wall time, so its length
			// follows the lease and the machine.
			const lease = time.Second
			const renewals = 4 // four renewals, Lease/3 apart, span more than a lease
			rec := newRecorder()
			prefix := redistest.UniqueKey(t)
			g := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: lease, Observer: rec})
			other := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: lease})
			renewed := 0
			err := g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
				// Outlive the lease; another process must still be refused
				// at every point. The deadline only stops a gate that never
				// renews from hanging the test.
				deadline := time.Now().Add(time.Minute)
				for renewed < renewals {
					if _, err := other.Acquire(context.Background(), "job"); !errors.Is(err, gate.ErrInFlight) {
						t.Errorf("other process after %d renewals: %v, want ErrInFlight", renewed, err)
						return nil
					}
					if ctx.Err() != nil {
						t.Errorf("fn's context cancelled: %v", context.Cause(ctx))
						return nil
					}
					if time.Now().After(deadline) {
						t.Errorf("%d renewals in a minute, want %d", renewed, renewals)
						return nil
					}
					time.Sleep(lease / 5)
					for _, e := range rec.drain() {
						if e.Kind == gate.EventRenewed && e.Err == nil {
							renewed++
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
		})
	}
}

func TestLeaseLostWhenTakenOver(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const lease = 90 * time.Millisecond
			rec := newRecorder()
			g := newGate(t, tg.Client, gate.Options{Lease: lease, Observer: rec})
			lock := keyspace.Job(gatetest.Prefix(g), "job")
			var _ error
			const intruder = "r:someone-else"
			err := g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
				// Another owner took the job (our lease expired under a pause).
				if err := tg.Client.Set(context.Background(), lock, intruder, time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
					t.Fatal("fn's context not cancelled after losing the lease")
				}
				if !errors.Is(context.Cause(ctx), gate.ErrLeaseLost) {
					t.Fatalf("cause %v, want ErrLeaseLost", context.Cause(ctx))
				}
				if !l.Lost() {
					t.Fatal("Lost() = false")
				}
				return classify.Transient(ctx.Err(), 0)
			})
			if !errors.Is(err, gate.ErrLeaseLost) {
				t.Fatalf("Do: %v, want ErrLeaseLost", err)
			}
			// The settle was skipped: the new owner's lock is untouched.
			if v, _ := tg.Client.Get(context.Background(), lock).Result(); v != intruder {
				t.Fatalf("new owner's lock is %q, want untouched", v)
			}
			if n := countKind(rec.drain(), gate.EventLeaseLost); n != 1 {
				t.Fatalf("lease_lost events: %d, want 1", n)
			}
		})
	}
}

func TestLeaseLostAfterRenewFailures(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	f := &flaky{Client: rdb}
	const lease = 90 * time.Millisecond
	rec := newRecorder()
	g := newGate(t, f, gate.Options{Lease: lease, Observer: rec})
	start := time.Now()
	err := g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
		f.Down.Store(true) // Redis goes away while fn runs
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute): // a gate that never gives up would hang the test
			return errors.New("lease not lost in a minute of failed renewals")
		}
	})
	f.Down.Store(false)
	if !errors.Is(err, gate.ErrLeaseLost) {
		t.Fatalf("Do: %v, want ErrLeaseLost", err)
	}
	// Not lost before the lock must have expired by the local clock. Load
	// only delays the renewals, so this bound holds on any machine; how
	// long after Lease the loss comes depends on the scheduler, so it is
	// checked by counting renewals below, not by the clock.
	if took := time.Since(start); took < lease {
		t.Fatalf("lease lost after %v, before its %v were up", took, lease)
	}
	// Lost at the first failed renewal after the lock must have expired:
	// with renewals every Lease/3 that is the third at the latest (a
	// delayed timer only makes it sooner), and the loss follows the last.
	evs := rec.drain()
	failed, last := 0, -1
	for i, e := range evs {
		if e.Kind == gate.EventRenewed && e.Err != nil {
			failed, last = failed+1, i
		}
	}
	// Each failed renewal is also a Redis error an operator counts, with
	// the cause a metric labels it by.
	renewErrs := 0
	for _, e := range evs {
		if e.Kind == gate.EventRedisError && e.Op == redisop.Renew {
			renewErrs++
			if !errors.Is(e.Err, gate.ErrUnavailable) {
				t.Fatalf("a failed renewal's redis_error: %v, want ErrUnavailable", e.Err)
			}
		}
	}
	if renewErrs != failed {
		t.Fatalf("%d renewal redis_error events for %d failed renewals", renewErrs, failed)
	}
	lost := slices.IndexFunc(evs, func(e gate.Event) bool { return e.Kind == gate.EventLeaseLost })
	if failed < 1 || failed > 3 || countKind(evs, gate.EventLeaseLost) != 1 || lost < last {
		t.Fatalf("events %v: %d failed renewals, %d lease_lost (at %d, last failure at %d); want 1 to 3, then one lease_lost",
			kinds(evs), failed, countKind(evs, gate.EventLeaseLost), lost, last)
	}
}

// kinds lists evs' kinds, for a failure's message.
func kinds(evs []gate.Event) []gate.EventKind {
	out := make([]gate.EventKind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

func TestContinueOnLeaseLostLetsFnFinish(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const lease = 90 * time.Millisecond
			rec := newRecorder()
			g := newGate(t, tg.Client, gate.Options{Lease: lease, Observer: rec, Cooldown: time.Minute, Redis: gate.RedisPolicy{ContinueOnLeaseLost: true}})
			lock := keyspace.Job(gatetest.Prefix(g), "job")
			var _ error
			err := g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
				tg.Client.Del(context.Background(), lock) // the lock vanished (eviction, failover)
				deadline := time.Now().Add(5 * time.Second)
				for !l.Lost() && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				if ctx.Err() != nil {
					t.Error("ContinueOnLeaseLost cancelled fn's context")
				}
				return classify.Transient(errBoom, 0)
			})
			var ce *gate.CallError
			if !errors.As(err, &ce) {
				t.Fatalf("Do: %v", err)
			}
			// Nobody acquired the job since, so the failure is still
			// recorded: no free retry.
			if exp, got := gate.CoolingDown, mustStatus(t, g, "job").State; exp != got {
				t.Fatalf("state: exp %v, got %v", exp, got)
			}
			if countKind(rec.drain(), gate.EventLeaseLost) != 1 {
				t.Fatal("loss not reported")
			}
		})
	}
}

func TestStaleOwnerCannotSettle(t *testing.T) {
	for _, tg := range redistest.RealTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const lease = 60 * time.Millisecond
			prefix := redistest.UniqueKey(t)
			// A worker paused past its lease: its renewals cannot reach
			// Redis, and ContinueOnLeaseLost with many allowed failures keeps it going.
			slow := &flaky{Client: tg.Client}
			g1 := newGate(t, slow, gate.Options{Prefix: prefix, Lease: lease, Redis: gate.RedisPolicy{ContinueOnLeaseLost: true}})
			g2 := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: time.Second})
			l1, err := g1.Acquire(context.Background(), "job")
			if err != nil {
				t.Fatal(err)
			}
			slow.Down.Store(true)
			var l2 *gate.Lease
			deadline := time.Now().Add(3 * time.Second)
			for l2 == nil {
				l2, err = g2.Acquire(context.Background(), "job")
				if err != nil && time.Now().After(deadline) {
					t.Fatalf("new owner could not acquire after the lease expired: %v", err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			slow.Down.Store(false)
			if l2.Fence() <= l1.Fence() {
				t.Fatalf("new fence %d not above stale %d", l2.Fence(), l1.Fence())
			}
			// The stale owner wakes up and reports: rejected, nothing written.
			if err := l1.Fail(context.Background(), errBoom); !errors.Is(err, gate.ErrNotOwned) {
				t.Fatalf("stale settle: %v, want ErrNotOwned", err)
			}
			if exp, got := gate.Running, mustStatus(t, g2, "job").State; exp != got {
				t.Fatalf("new owner's state: exp %v, got %v", exp, got)
			}
			if err := l2.Succeed(context.Background()); err != nil {
				t.Fatalf("new owner's release: %v", err)
			}
		})
	}
}

func TestSettleFailureKeepsLeaseAsCooldown(t *testing.T) {
	for _, tg := range redistest.RealTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const lease = 120 * time.Millisecond
			f := &flaky{Client: tg.Client}
			prefix := redistest.UniqueKey(t)
			g := newGate(t, f, gate.Options{Prefix: prefix, Lease: lease, Redis: gate.RedisPolicy{Timeout: 100 * time.Millisecond}})
			watcher := newGate(t, tg.Client, gate.Options{Prefix: prefix})
			err := g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
				f.Down.Store(true) // Redis unreachable when the failure is reported
				return errBoom
			})
			f.Down.Store(false)
			var ce *gate.CallError
			if !errors.As(err, &ce) || !errors.Is(err, gate.ErrUnavailable) || ce.State != gate.Running {
				t.Fatalf("Do: %v, want a CallError with an ErrUnavailable settle", err)
			}
			// It says so, and the wait it leaves: the lock's TTL, a lease.
			if ce.SettleErr == nil || ce.RetryAfter != lease {
				t.Fatalf("CallError: written %v, RetryAfter %v; want unwritten, %v", ce.SettleErr == nil, ce.RetryAfter, lease)
			}
			// No free retry: the job stays held until the lease runs out.
			if _, err := watcher.Acquire(context.Background(), "job"); !errors.Is(err, gate.ErrInFlight) {
				t.Fatalf("retry right after an unrecorded failure: %v, want ErrInFlight", err)
			}
			waitState(t, tg, watcher, "job", gate.Ready, lease)
		})
	}
}

// Settle, the adapters' verb after Acquire, returns what Do returns for
// the same outcome: nil for a success, a written *CallError with the
// cooldown for a failure, and ErrAlreadySettled's CallError when called
// twice.
func TestSettleReturnsWhatDoReturns(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			g := newGate(t, tg.Client, gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{Jitter: -1}})
			l, err := g.Acquire(ctx, "ok")
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Settle(ctx, nil); err != nil {
				t.Fatalf("Settle(nil): %v, want nil", err)
			}
			if l, err = g.Acquire(ctx, "ok"); err != nil {
				t.Fatalf("the job after a success: %v, want it free", err)
			}
			_ = l.Release(ctx)

			l, err = g.Acquire(ctx, "fails")
			if err != nil {
				t.Fatal(err)
			}
			err = l.Settle(ctx, errBoom)
			var ce *gate.CallError
			if !errors.As(err, &ce) || !errors.Is(err, errBoom) || !errors.Is(err, gate.ErrCoolingDown) {
				t.Fatalf("Settle(errBoom): %v, want a CallError cooling down that wraps it", err)
			}
			if ce.SettleErr != nil || ce.State != gate.CoolingDown || ce.RetryAfter != time.Minute || ce.Attempts != 1 {
				t.Fatalf("CallError: %+v, want written, cooling down for a minute, attempt 1", ce)
			}
			if wait, ok := gate.RetryAfter(err); !ok || wait != time.Minute {
				t.Fatalf("RetryAfter: %v %v, want a minute", wait, ok)
			}
			if err := l.Settle(ctx, errBoom); !errors.As(err, &ce) || !errors.Is(ce.SettleErr, gate.ErrAlreadySettled) || ce.SettleErr == nil {
				t.Fatalf("second Settle: %v, want a CallError with ErrAlreadySettled", err)
			}
		})
	}
}

func TestCoalescingInProcess(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			rt := &roundTrips{}
			hook(tg, rt)
			g := newGate(t, tg.Client, gate.Options{Lease: time.Second})
			release := make(chan struct{})
			started := make(chan struct{})
			go func() {
				_ = g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error {
					close(started)
					<-release
					return nil
				})
			}()
			<-started
			before := rt.n.Load()
			var wg sync.WaitGroup
			var mu sync.Mutex
			refused := 0
			for i := 0; i < 50; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error {
						t.Error("duplicate ran")
						return nil
					})
					var b *gate.BlockedError
					if errors.As(err, &b) && errors.Is(err, gate.ErrInFlight) && b.RetryAfter > 0 {
						mu.Lock()
						refused++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if exp, got := int64(0), rt.n.Load()-before; exp != got {
				t.Fatalf("round trips for 50 local duplicates: exp %d, got %d", exp, got)
			}
			if refused != 50 {
				t.Fatalf("refused %d of 50", refused)
			}
			close(release)
		})
	}
}

// With its upstream (the default), a cluster sends the upstream's
// commands to the upstream's node once the job is taken: one more round
// trip for a call that runs, none for a job refused by its value, which
// asks no upstream; the settle one more for the call durations (on the
// upstream's node, or their own without upstreams); none more on one node.
func TestRoundTripsPerPath(t *testing.T) {
	for _, off := range []bool{true, false} {
		for _, tg := range redistest.Targets(t) { // a client per run: hooks stay one
			t.Run(fmt.Sprintf("%s/off=%v", tg.Name, off), func(t *testing.T) {
				roundTripsPerPath(t, tg, off)
			})
		}
	}
}

func roundTripsPerPath(t *testing.T, tg redistest.Target, off bool) {
	rt := &roundTrips{}
	hook(tg, rt)
	g := newGate(t, tg.Client, gate.Options{Cooldown: time.Minute, UpstreamPolicy: gate.UpstreamPolicy{Off: off}})
	// Load the scripts first: EVALSHA's first NOSCRIPT miss is a
	// one-off extra trip per server, not per call.
	_ = g.Do(context.Background(), "warm", func(context.Context, *gate.Lease) error { return errBoom })
	_ = g.Do(context.Background(), "warm2", func(context.Context, *gate.Lease) error { return nil })
	_, _ = g.Status(context.Background(), "warm")

	measure := func(fn func()) int64 {
		before := rt.n.Load()
		fn()
		return rt.n.Load() - before
	}
	// Each path runs once unmeasured on the same key first: on a
	// cluster, scripts are cached per node.
	okFn := func(context.Context, *gate.Lease) error { return nil }
	_ = g.Do(context.Background(), "s", okFn)
	success := measure(func() { _ = g.Do(context.Background(), "s", okFn) })
	_ = g.Do(context.Background(), "b", func(context.Context, *gate.Lease) error { return errBoom })
	_ = g.Do(context.Background(), "b", okFn)
	blocked := measure(func() { _ = g.Do(context.Background(), "b", okFn) })
	_, _ = g.Status(context.Background(), "b")
	status := measure(func() { _, _ = g.Status(context.Background(), "b") })
	exp := [3]int64{2, 1, 1}
	switch {
	case !off && tg.IsCluster:
		exp = [3]int64{4, 1, 2}
	case tg.IsCluster:
		// The settle sends the call durations (keyspace.Calls) to their
		// node beside the job's, in the same send, when the two differ.
		cc := tg.Client.(*redis.ClusterClient)
		if masterAddr(t, cc, keyspace.Calls(gatetest.Prefix(g), "")) != masterAddr(t, cc, keyspace.Job(gatetest.Prefix(g), "s")) {
			exp[0]++
		}
	}
	if got := [3]int64{success, blocked, status}; got != exp {
		t.Fatalf("round trips: success, blocked, status %v, want %v", got, exp)
	}
}

// Calls coalesced behind an acquire that is still in flight get that
// acquire's answer: a cooling job is reported as cooling, with its wait,
// not as running.
func TestCoalescedCallsShareTheRefusal(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{Jitter: -1}})
			_ = failWith(t, g, "job", errBoom)
			var wg sync.WaitGroup
			errs := make(chan error, 50)
			start := make(chan struct{})
			for i := 0; i < 50; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					errs <- g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error {
						t.Error("fn ran during the cooldown")
						return nil
					})
				}()
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				var b *gate.BlockedError
				if !errors.As(err, &b) || !errors.Is(err, gate.ErrCoolingDown) || b.RetryAfter < 50*time.Second || b.Attempts != 1 {
					t.Fatalf("coalesced refusal: %v (%+v), want cooling_down with the cooldown's wait", err, b)
				}
			}
		})
	}
}

// The context fn runs under names its lease, deep in the job's code (the
// upstream to call, the fence to write with); any other context names none.
func TestLeaseFromContext(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Upstream: "primary"})
	ctx := context.Background()
	if l := gate.LeaseFromContext(ctx); l != nil {
		t.Fatalf("a plain context names lease %v", l)
	}
	err := g.Do(ctx, "job", func(ctx context.Context, l *gate.Lease) error {
		derived, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if got := gate.LeaseFromContext(derived); got != l || got.Upstream() != "primary" || got.Fence() == 0 {
			t.Errorf("LeaseFromContext: %v, want fn's lease %v", got, l)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// An ungated lease (FailOpen, Redis down) is named too.
	f := &flaky{Client: rdb}
	f.Down.Store(true)
	down := newGate(t, f, gate.Options{Redis: gate.RedisPolicy{FailOpen: true}})
	err = down.Do(ctx, "job", func(ctx context.Context, l *gate.Lease) error {
		if got := gate.LeaseFromContext(ctx); got != l || got.Gated() {
			t.Errorf("LeaseFromContext of the ungated run: %v, want fn's ungated lease", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
