package gate_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// An upstream is read beside the acquire, in its round trip; when it
// refuses, the acquire is undone and the job is left exactly as it was: a
// job never seen keeps no key, a job with attempts keeps its count.
func TestUpstreamRefusalUndoesTheAcquire(t *testing.T) {
	ctx := context.Background()
	m, rdb := redistest.Miniredis(t)
	cluster := &gatetest.Flaky{Client: rdb}
	prefix := redistest.UniqueKey(t)
	o := gate.Options{Prefix: prefix, Upstream: "openai:prod-key", Cooldown: time.Minute,
		Classify: upstreamClassifier(time.Hour),
		Backoff:  gate.Backoff{Jitter: -1}}
	g := newGate(t, cluster, o)

	// "old" failed once; its cooldown is over, its attempt is remembered.
	_ = failWith(t, g, "old", classify.Transient(errBoom, 0))
	redistest.Advance(m, 2*time.Minute)
	if st := mustStatus(t, g, "old"); st.State != gate.Ready || st.Attempts != 1 {
		t.Fatalf("old before the upstream cools: %+v, want Ready with 1 attempt", st)
	}
	// The upstream rate-limits: the upstream cools for an hour.
	_ = failWith(t, g, "a", errRateLimited)

	// Gates that have not seen the upstream cool acquire and read it at once.
	for _, job := range []string{"old", "new"} {
		other := newGate(t, cluster, o)
		if err := other.Do(ctx, job, okFn); !errors.Is(err, gate.ErrUpstreamCooling) {
			t.Fatalf("%s: exp ErrUpstreamCooling, got %v", job, err)
		}
	}
	if st := mustStatus(t, g, "old"); st.State != gate.Ready || st.Attempts != 1 {
		t.Errorf("old after the refusal: %+v, want Ready with its 1 attempt kept", st)
	}
	if k := keyspace.Job(prefix, "new"); m.Exists(k) {
		t.Errorf("new after the refusal: key %s left behind", k)
	}
}

// garbled is a hook that answers every script with reply while it is set,
// as a broken proxy or an incompatible server might.
type garbled struct {
	reply atomic.Pointer[[]any]
}

func (c *garbled) fake(cmd redis.Cmder) bool {
	r := c.reply.Load()
	sc, ok := cmd.(*redis.Cmd)
	if r == nil || !ok || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
		return false
	}
	sc.SetVal(*r)
	return true
}

func (c *garbled) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *garbled) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if c.fake(cmd) {
			return nil
		}
		return next(ctx, cmd)
	}
}
func (c *garbled) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var rest []redis.Cmder
		for _, cmd := range cmds {
			if !c.fake(cmd) {
				rest = append(rest, cmd)
			}
		}
		if len(rest) == 0 {
			return nil
		}
		return next(ctx, rest)
	}
}

// A reply of the wrong shape is an error matching one of the gate's
// sentinels, never a panic, never a job run on a guess. (An acquire's own
// first commands are native, with replies go-redis types; a job whose key
// holds a finished state is taken over by a script, garbled here.)
func TestGarbledRepliesAreErrors(t *testing.T) {
	ctx := context.Background()
	m, rdb := redistest.Miniredis(t)
	c := &garbled{}
	rdb.AddHook(c)
	prefix := redistest.UniqueKey(t)
	g := newGate(t, rdb, gate.Options{Prefix: prefix, Cooldown: time.Minute})
	knownUpstream(t, g) // a settle garbled keeps its call reserved: not one at a time
	sentinel := func(err error) bool {
		return errors.Is(err, gate.ErrUnavailable) || errors.Is(err, gate.ErrRedisRefused)
	}
	for _, tc := range []struct {
		name  string
		reply []any
	}{
		{"empty", []any{}},
		{"taken alone", []any{int64(1)}},
		{"taken, one short", []any{int64(1), int64(1000), "1700000000000000", nil}},
		{"taken, fence not a number", []any{int64(1), int64(1000), "soon", nil, int64(-2)}},
		{"refused alone", []any{int64(0)}},
		{"refused, no ttl", []any{int64(0), int64(1000), "c:5000:1:1::rate_limited:"}},
		{"unknown kind", []any{int64(7), int64(1000), "x", int64(5)}},
		{"kind not a number", []any{"ok", int64(1000), "x", int64(5)}},
	} {
		t.Run("acquire "+tc.name, func(t *testing.T) {
			job := "job-" + tc.name
			key := keyspace.Job(prefix, job)
			if err := m.Set(key, "c:1:1:1::timeout:"); err != nil { // a cooldown long over
				t.Fatal(err)
			}
			m.SetTTL(key, time.Minute)
			c.reply.Store(&tc.reply)
			defer c.reply.Store(nil)
			ran := false
			err := g.Do(ctx, job, func(context.Context, *gate.Lease) error { ran = true; return nil })
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
		{"one short", []any{"c:5000:1:1::rate_limited:", int64(1000)}},
		{"now not a number", []any{"c:5000:1:1::rate_limited:", int64(1000), "soon"}},
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
		{"not owned, one short", []any{int64(0)}},
		{"written, one long", []any{int64(1), "x"}},
		{"kind not a number", []any{"yes"}},
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
			lock := keyspace.Job(prefix, job)
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

// The cooldown, failed and done marks decode to their state, attempts,
// reason and evidence, for Status and for the refusal; a value of the
// previous layout, which never holds a <until>, reads as running until
// its TTL ends.
func TestJobValuesDecode(t *testing.T) {
	ctx := context.Background()
	m, rdb := redistest.Miniredis(t)
	prefix := redistest.UniqueKey(t)
	g := newGate(t, rdb, gate.Options{Prefix: prefix})
	until := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
	for _, tc := range []struct {
		name, value string
		state       gate.State
		attempts    int
		reason      string
		evidence    string
		wait        bool
	}{
		{"cooling", "c:" + until + ":1700000000000000:3::rate_limited:status:429", gate.CoolingDown, 3, "rate_limited", "status:429", true},
		{"suspect", "c:" + until + ":1700000000000000:1:s:invalid_request:status:400", gate.CoolingDown, 1, "invalid_request", "status:400", true},
		{"failed", "f:" + until + ":1700000000000001:2::bad_request:", gate.Failed, 2, "bad_request", "", false},
		{"done", "d:" + until + ":1700000000000001:0", gate.Done, 0, "", "", false},
		{"previous layout", "c:3:rate_limited:1700000000000000", gate.Running, 0, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := "job-" + tc.name
			lock := keyspace.Job(prefix, job)
			if err := m.Set(lock, tc.value); err != nil {
				t.Fatal(err)
			}
			m.SetTTL(lock, 2*time.Minute)
			st := mustStatus(t, g, job)
			if st.State != tc.state || st.Reason != tc.reason || st.Evidence != tc.evidence || st.Attempts != tc.attempts {
				t.Errorf("Status: %+v, want %v (%s, %s) with %d attempts", st, tc.state, tc.reason, tc.evidence, tc.attempts)
			}
			if tc.wait != (st.RetryAfter > 0) || st.RetryAfter > 2*time.Minute {
				t.Errorf("Status.RetryAfter: %v, want a wait: %v", st.RetryAfter, tc.wait)
			}
			err := g.Do(ctx, job, okFn)
			var b *gate.BlockedError
			if !errors.As(err, &b) || b.State != tc.state || b.Attempts != tc.attempts || b.Reason != tc.reason || b.Evidence != tc.evidence {
				t.Fatalf("Do: %v (%+v), want refused as %v with %d attempts (%s)", err, b, tc.state, tc.attempts, tc.reason)
			}
		})
	}
}
