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
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// Names reach HTTP bodies, logs and metric labels; a value this version
// does not know (from a newer peer, a zero Event) prints, never panics.
func TestNamesOfStatesAndEvents(t *testing.T) {
	for s, want := range map[gate.State]string{
		gate.Unknown: "unknown", gate.Ready: "ready", gate.Running: "running", gate.CoolingDown: "cooling_down",
		gate.Failed: "failed", gate.Done: "done", gate.UpstreamCooling: "upstream_cooling", gate.Paused: "paused",
		gate.Paused + 1: "state(8)", 255: "state(255)",
	} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", uint8(s), got, want)
		}
	}
	for k, want := range map[gate.EventKind]string{
		0: "unknown", gate.EventAcquired: "acquired", gate.EventRefused: "refused",
		gate.EventSettled: "settled", gate.EventRenewed: "renewed", gate.EventLeaseLost: "lease_lost",
		gate.EventRedisError: "redis_error", gate.EventFailOpen: "fail_open",
		gate.EventUpstreamCooling: "upstream_cooling", gate.EventUpstreamPaused: "upstream_paused",
		gate.EventWarning: "warning", gate.EventWarning + 1: "unknown", 255: "unknown",
	} {
		if got := k.String(); got != want {
			t.Errorf("EventKind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

// The state machine's tests run on every target: miniredis, a real
// redis-server and a real 3-master cluster.

func TestSuccessReleases(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{Lease: time.Second})
			job := "doc-1"
			calls := 0
			for i := 0; i < 3; i++ {
				err := g.Do(context.Background(), job, func(ctx context.Context, l *gate.Lease) error {
					calls++
					if got := mustStatus(t, g, job).State; got != gate.Running {
						t.Errorf("state while running = %v, want running", got)
					}
					return nil
				})
				if err != nil {
					t.Fatalf("Do #%d: %v", i, err)
				}
			}
			if exp, got := 3, calls; exp != got {
				t.Fatalf("calls: exp %d, got %d", exp, got)
			}
			if exp, got := gate.Ready, mustStatus(t, g, job).State; exp != got {
				t.Fatalf("state: exp %v, got %v", exp, got)
			}
		})
	}
}

func TestRunningRefusesOthers(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			g1 := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: time.Second})
			g2 := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: time.Second})
			l, err := g1.Acquire(context.Background(), "job")
			if err != nil {
				t.Fatal(err)
			}
			_, err = g2.Acquire(context.Background(), "job")
			var b *gate.BlockedError
			if !errors.As(err, &b) || !errors.Is(err, gate.ErrInFlight) {
				t.Fatalf("second acquire: %v, want ErrInFlight", err)
			}
			if b.RetryAfter <= 0 || b.RetryAfter > time.Second {
				t.Fatalf("RetryAfter %v, want the lease's time left", b.RetryAfter)
			}
			if err := l.Succeed(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := l.Succeed(context.Background()); !errors.Is(err, gate.ErrAlreadySettled) {
				t.Fatalf("second settle: %v, want ErrAlreadySettled", err)
			}
			l2, err := g2.Acquire(context.Background(), "job")
			if err != nil {
				t.Fatalf("acquire after release: %v", err)
			}
			if l2.Fence() <= l.Fence() {
				t.Fatalf("fence %d not above %d", l2.Fence(), l.Fence())
			}
			_ = l2.Succeed(context.Background())
		})
	}
}

func TestTransientCoolsDownAndEscalates(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const cd = 200 * time.Millisecond
			g := newGate(t, tg.Client, gate.Options{Lease: time.Second, Cooldown: cd, Backoff: gate.Backoff{Max: 10 * time.Second, Jitter: -1}})
			job := "doc"

			err := failWith(t, g, job, classify.Transient(errBoom, 0))
			var ce *gate.CallError
			if !errors.As(err, &ce) || !errors.Is(err, errBoom) {
				t.Fatalf("Do: %v, want a *CallError wrapping errBoom", err)
			}
			if ce.State != gate.CoolingDown || ce.RetryAfter != cd || ce.Attempts != 1 {
				t.Fatalf("outcome %v %v attempts %d, want cooling_down %v attempts 1", ce.State, ce.RetryAfter, ce.Attempts, cd)
			}
			if d, ok := gate.RetryAfter(err); !ok || d != cd {
				t.Fatalf("RetryAfter(err) = %v %v", d, ok)
			}

			// A retry during the cooldown is refused without calling fn.
			err = g.Do(context.Background(), job, func(context.Context, *gate.Lease) error {
				t.Fatal("fn called during cooldown")
				return nil
			})
			var b *gate.BlockedError
			if !errors.As(err, &b) || !errors.Is(err, gate.ErrCoolingDown) {
				t.Fatalf("retry: %v, want ErrCoolingDown", err)
			}
			if b.RetryAfter <= 0 || b.RetryAfter > cd || b.Attempts != 1 || b.Reason != classify.ReasonMarkedTransient {
				t.Fatalf("blocked %+v", b)
			}
			if d, ok := gate.RetryAfter(err); !ok || d != b.RetryAfter {
				t.Fatalf("RetryAfter(blocked) = %v %v", d, ok)
			}

			// The attempt count survives the cooldown's expiry: the next
			// failure waits twice as long.
			waitState(t, tg, g, job, gate.Ready, cd)
			if exp, got := 1, mustStatus(t, g, job).Attempts; exp != got {
				t.Fatalf("attempts after cooldown: exp %d, got %d", exp, got)
			}
			err = failWith(t, g, job, classify.Transient(errBoom, 0))
			if !errors.As(err, &ce) || ce.RetryAfter != 2*cd || ce.Attempts != 2 {
				t.Fatalf("second failure: %v (%+v), want 2×cooldown", err, ce)
			}

			// Success resets the count.
			waitState(t, tg, g, job, gate.Ready, 2*cd)
			if err := g.Do(context.Background(), job, func(context.Context, *gate.Lease) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if exp, got := 0, mustStatus(t, g, job).Attempts; exp != got {
				t.Fatalf("attempts after success: exp %d, got %d", exp, got)
			}
			err = failWith(t, g, job, classify.Transient(errBoom, 0))
			if !errors.As(err, &ce) || ce.RetryAfter != cd {
				t.Fatalf("failure after success: %+v, want the base cooldown", ce)
			}
		})
	}
}

func TestJitterSpreadsCooldowns(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Cooldown: time.Second, Backoff: gate.Backoff{Jitter: 0.2}})
	seen := map[time.Duration]bool{}
	for i := 0; i < 20; i++ {
		var ce *gate.CallError
		if err := failWith(t, g, "j"+strings.Repeat("x", i), errBoom); !errors.As(err, &ce) {
			t.Fatal(err)
		}
		if ce.RetryAfter < 800*time.Millisecond || ce.RetryAfter > 1200*time.Millisecond {
			t.Fatalf("cooldown %v outside 1s ± 20%%", ce.RetryAfter)
		}
		seen[ce.RetryAfter] = true
	}
	if len(seen) < 5 {
		t.Fatalf("only %d distinct cooldowns in 20: jitter not applied", len(seen))
	}
}

func TestBackoffCappedAtMaxCooldown(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Cooldown: time.Second, Backoff: gate.Backoff{Max: 3 * time.Second, Factor: 10, Jitter: -1}})
	want := []time.Duration{time.Second, 3 * time.Second, 3 * time.Second}
	for i, w := range want {
		var ce *gate.CallError
		if err := failWith(t, g, "job", errBoom); !errors.As(err, &ce) || ce.RetryAfter != w {
			t.Fatalf("failure %d: cooldown %v, want %v", i+1, ce.RetryAfter, w)
		}
		redistest.Advance(m, w)
	}
}

func TestServerHintWins(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{Cooldown: 10 * time.Millisecond, Backoff: gate.Backoff{Max: 5 * time.Second, Jitter: -1}})
			var ce *gate.CallError
			if err := failWith(t, g, "hinted", classify.Transient(errBoom, 2500*time.Millisecond)); !errors.As(err, &ce) {
				t.Fatal(err)
			}
			if exp, got := 2500*time.Millisecond, ce.RetryAfter; exp != got {
				t.Fatalf("cooldown: exp %v, got %v", exp, got)
			}
			st := mustStatus(t, g, "hinted")
			if st.State != gate.CoolingDown || st.RetryAfter < 2*time.Second || st.RetryAfter > 2500*time.Millisecond {
				t.Fatalf("status %+v, want cooling ≈2.5s", st)
			}
			// A hint above MaxCooldown is capped.
			if err := failWith(t, g, "capped", classify.Transient(errBoom, time.Hour)); !errors.As(err, &ce) || ce.RetryAfter != 5*time.Second {
				t.Fatalf("capped hint: %v", ce.RetryAfter)
			}
		})
	}
}

func TestMaxAttemptsMarksFailed(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const cd = 50 * time.Millisecond
			g := newGate(t, tg.Client, gate.Options{Cooldown: cd, Backoff: gate.Backoff{MaxAttempts: 3, Jitter: -1}})
			bad := classify.WithReason(errBoom, classify.ClassTransient, classify.ReasonBadOutput, 0)
			for i := 1; i <= 3; i++ {
				var ce *gate.CallError
				if err := failWith(t, g, "job", bad); !errors.As(err, &ce) {
					t.Fatal(err)
				}
				want := gate.CoolingDown
				if i == 3 {
					want = gate.Failed
				}
				if ce.State != want || ce.Attempts != i {
					t.Fatalf("attempt %d: state %v attempts %d, want %v", i, ce.State, ce.Attempts, want)
				}
				if i < 3 {
					waitState(t, tg, g, "job", gate.Ready, cd<<(i-1))
				}
			}
			err := g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error { return nil })
			var b *gate.BlockedError
			if !errors.As(err, &b) || !errors.Is(err, gate.ErrFailed) || b.Reason != classify.ReasonBadOutput {
				t.Fatalf("after MaxAttempts: %v, want ErrFailed bad_output", err)
			}
			if _, ok := gate.RetryAfter(err); ok {
				t.Fatal("RetryAfter reports a wait for a failed job")
			}
		})
	}
}

func TestPermanentMarksFailedAndResetClears(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{Retention: gate.Retention{Failed: time.Hour}})
			err := failWith(t, g, "job", classify.WithReason(errors.New("prompt is 200k tokens: secret text"), classify.ClassPermanent, classify.ReasonContextLength, 0))
			var ce *gate.CallError
			if !errors.As(err, &ce) || ce.State != gate.Failed {
				t.Fatalf("Do: %v", err)
			}
			st := mustStatus(t, g, "job")
			if st.State != gate.Failed || st.Reason != classify.ReasonContextLength || st.Attempts != 1 {
				t.Fatalf("status %+v", st)
			}
			if st.TTL < 59*time.Minute || st.TTL > time.Hour {
				t.Fatalf("failed mark TTL %v, want FailedTTL", st.TTL)
			}
			if st.RetryAfter != 0 {
				t.Fatalf("failed job reports RetryAfter %v", st.RetryAfter)
			}
			if err := g.Reset(context.Background(), "job"); err != nil {
				t.Fatal(err)
			}
			st = mustStatus(t, g, "job")
			if st.State != gate.Ready || st.Attempts != 0 {
				t.Fatalf("after Reset: %+v", st)
			}
			if err := g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error { return nil }); err != nil {
				t.Fatalf("Do after Reset: %v", err)
			}
		})
	}
}

func TestResetLeavesRunningJobAlone(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{})
	l, err := g.Acquire(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Succeed(context.Background())
	if err := g.Reset(context.Background(), "job"); !errors.Is(err, gate.ErrInFlight) {
		t.Fatalf("Reset of a running job: %v, want ErrInFlight", err)
	}
	if exp, got := gate.Running, mustStatus(t, g, "job").State; exp != got {
		t.Fatalf("exp %v, got %v", exp, got)
	}
}

func TestSystemicNeverFailsTheJob(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const cd = 60 * time.Millisecond
			g := newGate(t, tg.Client, gate.Options{Cooldown: cd, Backoff: gate.Backoff{MaxAttempts: 1, Jitter: -1}})
			for i := 0; i < 2; i++ {
				var ce *gate.CallError
				if err := failWith(t, g, "job", classify.Systemic(errBoom)); !errors.As(err, &ce) {
					t.Fatal(err)
				}
				if ce.State != gate.CoolingDown || ce.RetryAfter != cd || ce.Attempts != 0 {
					t.Fatalf("systemic #%d: %v %v attempts %d, want cooling, no attempt counted", i, ce.State, ce.RetryAfter, ce.Attempts)
				}
				waitState(t, tg, g, "job", gate.Ready, cd)
			}
		})
	}
}

func TestCallerCancellationReleases(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{Cooldown: time.Hour})
			ctx, cancel := context.WithCancel(context.Background())
			err := g.Do(ctx, "job", func(ctx context.Context, l *gate.Lease) error {
				cancel()
				<-ctx.Done()
				return ctx.Err()
			})
			var ce *gate.CallError
			if !errors.As(err, &ce) || ce.State != gate.Ready || !errors.Is(err, context.Canceled) {
				t.Fatalf("Do: %v, want released", err)
			}
			st := mustStatus(t, g, "job")
			if st.State != gate.Ready || st.Attempts != 0 {
				t.Fatalf("after cancel: %+v, want ready with no attempt", st)
			}
		})
	}
}

func TestCanceledCooldown(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{Cooldown: time.Hour, Backoff: gate.Backoff{Canceled: 3 * time.Second}})
			ctx, cancel := context.WithCancel(context.Background())
			err := g.Do(ctx, "job", func(ctx context.Context, l *gate.Lease) error {
				cancel()
				return ctx.Err()
			})
			var ce *gate.CallError
			if !errors.As(err, &ce) || ce.State != gate.CoolingDown || ce.RetryAfter != 3*time.Second || ce.Attempts != 0 {
				t.Fatalf("Do: %v (%+v), want a 3 s cooldown with no attempt counted", err, ce)
			}
			st := mustStatus(t, g, "job")
			if st.State != gate.CoolingDown || st.Reason != classify.ReasonCanceled || st.Attempts != 0 {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

func TestOwnDeadlineIsTransient(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{Jitter: -1}})
	err := g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
		ctx, cancel := context.WithTimeout(ctx, time.Millisecond)
		defer cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	var ce *gate.CallError
	if !errors.As(err, &ce) || ce.State != gate.CoolingDown || ce.Verdict.Class != classify.ClassTransient {
		t.Fatalf("fn's own deadline: %v, want a transient cooldown", err)
	}
}

func TestInternalCancelIsNotCallerCancel(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{Jitter: -1}})
	// fn reports context.Canceled though the caller's context is alive:
	// that is not the caller giving up, so the job cools down.
	err := failWith(t, g, "job", context.Canceled)
	var ce *gate.CallError
	if !errors.As(err, &ce) || ce.State != gate.CoolingDown {
		t.Fatalf("got %v, want cooling_down", err)
	}
}

func TestPanicSettlesTransientAndRepanics(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{Jitter: -1}})
			func() {
				defer func() {
					if r := recover(); r != "kaboom" {
						t.Fatalf("recovered %v, want the original panic", r)
					}
				}()
				_ = g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error { panic("kaboom") })
			}()
			st := mustStatus(t, g, "job")
			if st.State != gate.CoolingDown || st.Reason != classify.ReasonPanic || st.Attempts != 1 {
				t.Fatalf("after panic: %+v", st)
			}
		})
	}
}

func TestDoneTTLHoldsSuccess(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const hold = 150 * time.Millisecond
			g := newGate(t, tg.Client, gate.Options{Retention: gate.Retention{Done: hold}})
			if err := g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error { return nil }); err != nil {
				t.Fatal(err)
			}
			err := g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error {
				t.Fatal("fn ran while done")
				return nil
			})
			if !errors.Is(err, gate.ErrDone) {
				t.Fatalf("duplicate: %v, want ErrDone", err)
			}
			waitState(t, tg, g, "job", gate.Ready, hold)
		})
	}
}

func TestSettleOutlivesCaller(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{Cooldown: time.Minute})
			ctx, cancel := context.WithCancel(context.Background())
			l, err := g.Acquire(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			cancel() // the request went away before the failure was reported
			if err := l.Fail(ctx, classify.Transient(errBoom, 0)); err != nil {
				t.Fatalf("Fail on a cancelled context: %v", err)
			}
			if exp, got := gate.CoolingDown, mustStatus(t, g, "job").State; exp != got {
				t.Fatalf("exp %v, got %v", exp, got)
			}
		})
	}
}

func TestFenceStrictlyIncreases(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{})
			var last int64
			acquire := func() int64 {
				t.Helper()
				var f int64
				if err := g.Do(context.Background(), "job", func(_ context.Context, l *gate.Lease) error {
					f = l.Fence()
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if f <= last {
					t.Fatalf("fence %d not above %d", f, last)
				}
				last = f
				return f
			}
			for i := 0; i < 5; i++ {
				acquire()
			}
			key := keyspace.Job(gatetest.Prefix(g), "job")
			// The job's memory expired: the fence still increases (Redis TIME).
			if err := tg.Client.Del(context.Background(), key).Err(); err != nil {
				t.Fatal(err)
			}
			acquire()
			// A fence ahead of the clock (a failover to a server whose clock
			// is behind) is carried forward, not reused: a ready job whose
			// value holds it.
			ahead := last + int64(time.Hour/time.Microsecond)
			if err := tg.Client.Set(context.Background(), key, fmt.Sprintf("c:1:%d:0", ahead), time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			if exp, got := ahead+1, acquire(); exp != got {
				t.Fatalf("fence after a clock step back: exp %d, got %d", exp, got)
			}
		})
	}
}

func TestStatusOfUnknownJobIsReady(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{})
			st := mustStatus(t, g, "never-seen")
			if st.State != gate.Ready || st.RetryAfter != 0 || st.Attempts != 0 || st.Job != "never-seen" {
				t.Fatalf("%+v", st)
			}
		})
	}
}

func TestCall(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{})
	v, err := gate.Call(context.Background(), g, "job", func(ctx context.Context, l *gate.Lease) (string, error) {
		return "summary", nil
	})
	if err != nil || v != "summary" {
		t.Fatalf("Call = %q, %v", v, err)
	}
	v, err = gate.Call(context.Background(), g, "job2", func(ctx context.Context, l *gate.Lease) (string, error) {
		return "partial", errBoom
	})
	if !errors.Is(err, errBoom) || v != "" {
		t.Fatalf("failed Call = %q, %v; want the zero value and errBoom", v, err)
	}
}
