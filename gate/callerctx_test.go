package gate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// entryPoints are every Gate call that takes the caller's context, each
// run once on a job of its own.
func entryPoints() []struct {
	name string
	call func(ctx context.Context, g *gate.Gate, job string) error
} {
	fn := func(context.Context, *gate.Lease) error { return nil }
	return []struct {
		name string
		call func(ctx context.Context, g *gate.Gate, job string) error
	}{
		{"Acquire", func(ctx context.Context, g *gate.Gate, job string) error {
			l, err := g.Acquire(ctx, job)
			if l != nil {
				_ = l.Release(context.Background())
			}
			return err
		}},
		{"AcquireWait", func(ctx context.Context, g *gate.Gate, job string) error {
			l, err := g.AcquireWait(ctx, job, time.Minute)
			if l != nil {
				_ = l.Release(context.Background())
			}
			return err
		}},
		{"Do", func(ctx context.Context, g *gate.Gate, job string) error { return g.Do(ctx, job, fn) }},
		{"Call", func(ctx context.Context, g *gate.Gate, job string) error {
			_, err := gate.Call(ctx, g, job, func(context.Context, *gate.Lease) (int, error) { return 1, nil })
			return err
		}},
		{"Status", func(ctx context.Context, g *gate.Gate, job string) error { _, err := g.Status(ctx, job); return err }},
		{"Reset", func(ctx context.Context, g *gate.Gate, job string) error { return g.Reset(ctx, job) }},
		{"Watch", func(ctx context.Context, g *gate.Gate, job string) error { _, err := g.Watch(ctx, job); return err }},
		{"Upstreams", func(ctx context.Context, g *gate.Gate, _ string) error { _, err := g.Upstreams(ctx); return err }},
		{"ResetUpstreams", func(ctx context.Context, g *gate.Gate, _ string) error { return g.ResetUpstreams(ctx) }},
		{"PauseUpstream", func(ctx context.Context, g *gate.Gate, _ string) error {
			return g.PauseUpstream(ctx, "llm", time.Minute, "test")
		}},
		{"ResumeUpstream", func(ctx context.Context, g *gate.Gate, _ string) error {
			return g.ResumeUpstream(ctx, "llm")
		}},
		{"Check", func(ctx context.Context, g *gate.Gate, _ string) error { _, err := g.Check(ctx); return err }},
	}
}

// A caller that goes away (a browser closing its stream, a request
// timing out) is not a Redis outage: every entry point given a cancelled
// or expired context returns an error matching the context's, never
// ErrUnavailable (which the Quickstart logs for operators), and sends no
// EventRedisError.
func TestCallerContextIsNotAnOutage(t *testing.T) {
	errGone := errors.New("client went away")
	ended := []struct {
		name  string
		ctx   func() context.Context
		want  error
		cause error // matched too, when the caller gave one
	}{
		{"cancelled", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, context.Canceled, nil},
		{"cancelled with a cause", func() context.Context {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(errGone)
			return ctx
		}, context.Canceled, errGone},
		{"expired", func() context.Context {
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			t.Cleanup(cancel)
			return ctx
		}, context.DeadlineExceeded, nil},
	}
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			rec := newRecorder()
			g := newGate(t, tg.Client, gate.Options{Prefix: redistest.UniqueKey(t), Upstream: "llm", Observer: rec})
			for _, c := range ended {
				for _, ep := range entryPoints() {
					t.Run(c.name+"/"+ep.name, func(t *testing.T) {
						err := ep.call(c.ctx(), g, redistest.UniqueKey(t))
						if !errors.Is(err, c.want) || errors.Is(err, gate.ErrUnavailable) || errors.Is(err, gate.ErrRedisRefused) {
							t.Fatalf("%s: %v, want %v and not ErrUnavailable", ep.name, err, c.want)
						}
						if c.cause != nil && !errors.Is(err, c.cause) {
							t.Fatalf("%s: %v, want it to match the caller's cause %v", ep.name, err, c.cause)
						}
						if n := strings.Count(err.Error(), c.want.Error()); n != 1 {
							t.Fatalf("%s: %q says %q %d times, want once", ep.name, err, c.want, n)
						}
					})
				}
			}
			if n := countKind(rec.drain(), gate.EventRedisError); n != 0 {
				t.Errorf("%d EventRedisError for callers that went away", n)
			}
		})
	}
}

// The same while Redis hangs: the caller's deadline passes mid-command.
func TestCallerDeadlineWhileRedisHangs(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	f := &flaky{Client: rdb}
	f.Hang.Store(true)
	rec := newRecorder()
	g := newGate(t, f, gate.Options{Upstream: "llm", Observer: rec, Redis: gate.RedisPolicy{FailOpen: true, Timeout: 50 * time.Millisecond}})
	for _, ep := range entryPoints() {
		if ep.name == "Check" {
			continue // it cannot inspect a wrapped client: no command to hang
		}
		t.Run(ep.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			if err := ep.call(ctx, g, "job"); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, gate.ErrUnavailable) {
				t.Fatalf("%s: %v, want DeadlineExceeded and not ErrUnavailable", ep.name, err)
			}
		})
	}
	if n := countKind(rec.drain(), gate.EventRedisError); n != 0 {
		t.Errorf("%d EventRedisError for callers whose deadline passed", n)
	}
}

// A settle is written detached from the caller, so a request that went
// away still records its outcome: Succeed with a cancelled context writes.
func TestSettleOutlivesTheCaller(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Retention: gate.Retention{Done: time.Minute}})
	l, err := g.Acquire(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Succeed(ctx); err != nil {
		t.Fatalf("Succeed with a cancelled ctx: %v", err)
	}
	if st := mustStatus(t, g, "job"); st.State != gate.Done {
		t.Fatalf("after Succeed: %v, want done", st.State)
	}
}
