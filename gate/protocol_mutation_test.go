package gate_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/gatetest"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/redistest"
)

// On a multi-node client the scope is read beside the acquire; when it
// refuses, the acquire is undone and the job is left exactly as it was: a
// job never seen keeps no key, a job with attempts keeps its count.
// (gatetest.Flaky exposes only the scripting commands, so the gate takes
// the cluster form on one miniredis.)
func TestClusterFormScopeRefusalUndoesTheAcquire(t *testing.T) {
	ctx := context.Background()
	m, rdb := redistest.Miniredis(t)
	cluster := &gatetest.Flaky{Scripter: rdb}
	prefix := redistest.UniqueKey(t)
	o := gate.Options{Prefix: prefix, Scope: "openai:prod-key", Cooldown: time.Minute, Jitter: -1,
		Classify: upstreamClassifier(time.Hour)}
	g := newGate(t, cluster, o)

	// "old" failed once; its cooldown is over, its attempt is remembered.
	_ = failWith(t, g, "old", classify.Transient(errBoom, 0))
	redistest.Advance(m, 2*time.Minute)
	if st := mustStatus(t, g, "old"); st.State != gate.Ready || st.Attempts != 1 {
		t.Fatalf("old before the scope cools: %+v, want Ready with 1 attempt", st)
	}
	// The upstream rate-limits: the scope cools for an hour.
	_ = failWith(t, g, "a", errRateLimited)

	// Gates that have not seen the scope cool acquire and read it at once.
	for _, job := range []string{"old", "new"} {
		other := newGate(t, cluster, o)
		if err := other.Do(ctx, job, okFn); !errors.Is(err, gate.ErrUpstreamCooling) {
			t.Fatalf("%s: exp ErrUpstreamCooling, got %v", job, err)
		}
	}
	if st := mustStatus(t, g, "old"); st.State != gate.Ready || st.Attempts != 1 {
		t.Errorf("old after the refusal: %+v, want Ready with its 1 attempt kept", st)
	}
	lock, meta := keyspace.Job(prefix, "new")
	for _, k := range []string{lock, meta} {
		if m.Exists(k) {
			t.Errorf("new after the refusal: key %s left behind", k)
		}
	}
}

// garbled answers every script with reply while it is set, as a broken
// proxy or an incompatible server might.
type garbled struct {
	*redis.Client
	reply atomic.Pointer[[]any]
}

func (c *garbled) fake(ctx context.Context) (*redis.Cmd, bool) {
	r := c.reply.Load()
	if r == nil {
		return nil, false
	}
	return redis.NewCmdResult(*r, nil), true
}

func (c *garbled) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if cmd, ok := c.fake(ctx); ok {
		return cmd
	}
	return c.Client.EvalSha(ctx, sha, keys, args...)
}

func (c *garbled) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	if cmd, ok := c.fake(ctx); ok {
		return cmd
	}
	return c.Client.Eval(ctx, script, keys, args...)
}

// A reply of the wrong shape is an error matching one of the gate's
// sentinels, never a panic, never a job run on a guess.
func TestGarbledRepliesAreErrors(t *testing.T) {
	ctx := context.Background()
	_, rdb := redistest.Miniredis(t)
	c := &garbled{Client: rdb}
	g := newGate(t, c, gate.Options{Cooldown: time.Minute})
	sentinel := func(err error) bool {
		return errors.Is(err, gate.ErrUnavailable) || errors.Is(err, gate.ErrRedisRefused)
	}
	for _, tc := range []struct {
		name  string
		reply []any
	}{
		{"empty", []any{}},
		{"ok alone", []any{"ok"}},
		{"ok, one short", []any{"ok", int64(1), int64(0), int64(1)}},
		{"job alone", []any{"job"}},
		{"job, no ttl", []any{"job", "c:1:rate_limited:5"}},
		{"scope alone", []any{"scope"}},
		{"unknown kind", []any{"maybe", "x", int64(5)}},
	} {
		t.Run("acquire "+tc.name, func(t *testing.T) {
			c.reply.Store(&tc.reply)
			defer c.reply.Store(nil)
			ran := false
			err := g.Do(ctx, "job-"+tc.name, func(context.Context, *gate.Lease) error { ran = true; return nil })
			if ran || !sentinel(err) {
				t.Fatalf("Do: ran %v, err %v; want an ErrUnavailable or ErrRedisRefused and no run", ran, err)
			}
			var b *gate.BlockedError
			if errors.As(err, &b) {
				t.Fatalf("Do: a garbled reply taken for a refusal: %v", err)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		reply []any
	}{
		{"empty", []any{}},
		{"one short", []any{"c:1:rate_limited:5", int64(1000), int64(1), "5", nil}},
	} {
		t.Run("status "+tc.name, func(t *testing.T) {
			c.reply.Store(&tc.reply)
			defer c.reply.Store(nil)
			if _, err := g.Status(ctx, "job"); !sentinel(err) {
				t.Fatalf("Status: exp an ErrUnavailable or ErrRedisRefused, got %v", err)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		reply []any
	}{
		{"empty", []any{}},
		{"one short", []any{int64(1), "", nil}},
	} {
		t.Run("settle "+tc.name, func(t *testing.T) {
			l, err := g.Acquire(ctx, "settle-"+tc.name)
			if err != nil {
				t.Fatal(err)
			}
			c.reply.Store(&tc.reply)
			defer c.reply.Store(nil)
			if err := l.Succeed(ctx); err == nil {
				t.Fatal("Succeed: a garbled reply taken for a release")
			}
		})
	}
}

// A lock value the gate did not write (another tool, a future version) is
// taken for a running job: refused, never overwritten, never read as a
// cooldown.
func TestForeignLockValueIsHeld(t *testing.T) {
	ctx := context.Background()
	m, rdb := redistest.Miniredis(t)
	prefix := redistest.UniqueKey(t)
	g := newGate(t, rdb, gate.Options{Prefix: prefix})
	for _, v := range []string{"x", "xx", "x:1:r:5", "c", "z:"} {
		t.Run(v, func(t *testing.T) {
			job := "job-" + v
			lock, _ := keyspace.Job(prefix, job)
			if err := m.Set(lock, v); err != nil {
				t.Fatal(err)
			}
			m.SetTTL(lock, time.Minute)
			if st := mustStatus(t, g, job); st.State != gate.Running || st.RetryAfter != time.Minute {
				t.Errorf("Status: %+v, want Running for 1m", st)
			}
			if err := g.Do(ctx, job, okFn); !errors.Is(err, gate.ErrInFlight) {
				t.Errorf("Do: exp ErrInFlight, got %v", err)
			}
			if got, _ := m.Get(lock); got != v {
				t.Errorf("lock: exp %q kept, got %q", v, got)
			}
		})
	}
}

// The cooldown and failed marks decode to their state, attempts and
// reason, for Status and for the refusal, even a mark whose attempt count
// is not a number (read as unknown).
func TestLockValuesDecode(t *testing.T) {
	ctx := context.Background()
	m, rdb := redistest.Miniredis(t)
	prefix := redistest.UniqueKey(t)
	g := newGate(t, rdb, gate.Options{Prefix: prefix})
	for _, tc := range []struct {
		value    string
		state    gate.State
		attempts int
		reason   string
		wait     bool
	}{
		{"c:3:rate_limited:1700000000000000", gate.CoolingDown, 3, "rate_limited", true},
		{"f:2:bad_request:1700000000000001", gate.Failed, 2, "bad_request", false},
		{"c:x:overloaded", gate.CoolingDown, 0, "x:overloaded", true},
		{"d:", gate.Done, 0, "", false},
	} {
		t.Run(tc.value, func(t *testing.T) {
			job := "job-" + tc.value
			lock, _ := keyspace.Job(prefix, job)
			if err := m.Set(lock, tc.value); err != nil {
				t.Fatal(err)
			}
			m.SetTTL(lock, time.Minute)
			st := mustStatus(t, g, job)
			if st.State != tc.state || st.Reason != tc.reason {
				t.Errorf("Status: %+v, want %v (%s)", st, tc.state, tc.reason)
			}
			if exp := time.Duration(0); tc.wait {
				if exp = time.Minute; st.RetryAfter != exp {
					t.Errorf("Status.RetryAfter: exp %v, got %v", exp, st.RetryAfter)
				}
			} else if st.RetryAfter != exp {
				t.Errorf("Status.RetryAfter: exp %v, got %v", exp, st.RetryAfter)
			}
			err := g.Do(ctx, job, okFn)
			var b *gate.BlockedError
			if !errors.As(err, &b) || b.State != tc.state || b.Attempts != tc.attempts || b.Reason != tc.reason {
				t.Fatalf("Do: %v (%+v), want refused as %v with %d attempts (%s)", err, b, tc.state, tc.attempts, tc.reason)
			}
		})
	}
}
