package gate_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// With upstreams off there is no upstream to read: an acquire is the
// job's commands alone.
func TestAcquireWithoutUpstreamReadsNone(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	names := &redistest.Commands{}
	rdb.AddHook(names)
	g := newGate(t, &flaky{Client: rdb}, gate.Options{UpstreamPolicy: gate.UpstreamPolicy{Off: true}})
	if err := g.Do(context.Background(), "warm-up", okFn); err != nil { // loads the scripts
		t.Fatal(err)
	}
	names.Take()
	l, err := g.Acquire(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	if got := names.Take(); !slices.Equal(got, []string{"[pttl set time evalsha]"}) {
		t.Fatalf("acquire sent %v, want the job's PTTL, SET NX GET, TIME and the fence script in one pipeline", got)
	}
}

// A process that saw its upstream refuse only reads it (one script, no
// write) until that refusal ends by its clock; what it reads decides. An
// operator who reset the upstream elsewhere is seen at the next call: the
// read finds it ready, and the call takes the job's own path again (on
// one node, one script judges the upstream and takes the job), here
// refused by the job's own cooldown.
func TestKnownUpstreamRefusalOnlyReads(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	names := &redistest.Commands{}
	rdb.AddHook(names)
	// The 429 states its wait (an hour): one stating none, of a provider
	// known to send no budget, cools the upstream for a call's length.
	opts := gate.Options{Prefix: redistest.UniqueKey(t),
		Upstream: "openai:prod-key", Cooldown: time.Minute,
		UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Hour}, Classify: func(err error) classify.Verdict {
			v := providerBusyClassifier(err)
			if v.ProviderWide {
				v.RetryAfter = time.Hour
			}
			return v
		},
		Backoff: gate.Backoff{Jitter: -1}}
	g := newGate(t, rdb, opts)
	operator := newGate(t, rdb, opts)
	ctx := context.Background()
	_ = failWith(t, g, "job", errTransient)
	_ = failWith(t, g, "other", errProviderBusy)
	_ = blocked(t, g, "warm-up") // loads the read script
	names.Take()
	for i := 0; i < 3; i++ {
		if b := blocked(t, g, "another"); !errors.Is(b, gate.ErrUpstreamCooling) {
			t.Fatalf("with the upstream cooling: %+v, want ErrUpstreamCooling", b)
		}
		if got := names.Take(); !slices.Equal(got, []string{"evalsha"}) {
			t.Fatalf("refusal by an upstream known to refuse sent %v, want its read alone", got)
		}
	}
	if err := operator.ResetUpstreams(ctx); err != nil {
		t.Fatal(err)
	}
	names.Take()
	if b := blocked(t, g, "job"); !errors.Is(b, gate.ErrCoolingDown) {
		t.Fatalf("after the upstream was reset elsewhere: %+v, want the job's own cooldown", b)
	}
	if got := names.Take(); !slices.Equal(got, []string{"evalsha", "evalsha"}) {
		t.Fatalf("first call after the reset sent %v, want the read that finds it ready, then the acquire", got)
	}
	_ = blocked(t, g, "job")
	if got := names.Take(); !slices.Equal(got, []string{"evalsha"}) {
		t.Fatalf("next call sent %v, want the acquire alone", got)
	}
}

// The cluster-safe form (a client that only scripts, here over one
// miniredis) reads the upstream beside the acquire: an upstream another process
// cooled refuses the job and leaves it no key; once seen, the upstream is read
// first; a ready upstream leaves the job locked; after the cooldown one call
// probes while the others stay refused, and its success makes the upstream ready.
func TestClusterFormUpstream(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	names := &redistest.Commands{}
	rdb.AddHook(names)
	// The 429 states its wait: the upstream cools for it (one stating none
	// cools it for a call's length once its rate is learned, budget.go).
	opts := gate.Options{Prefix: redistest.UniqueKey(t), Upstream: "openai:prod-key", Cooldown: time.Minute,
		UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Minute}, Classify: func(err error) classify.Verdict {
			v := providerBusyClassifier(err)
			v.RetryAfter = time.Minute
			return v
		}}
	a := newGate(t, &flaky{Client: rdb}, opts)
	rec := newRecorder()
	bOpts := opts
	bOpts.Observer = rec
	b := newGate(t, &flaky{Client: rdb}, bOpts)
	recC := newRecorder()
	cOpts := opts
	cOpts.Observer = recC
	c := newGate(t, &flaky{Client: rdb}, cOpts)
	ctx := context.Background()

	// b holds a lease: the lock is in Redis, and a refuses it.
	l, err := b.Acquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx, "held"); !errors.Is(err, gate.ErrInFlight) {
		t.Fatalf("a job b holds, acquired by a: %v, want ErrInFlight", err)
	}
	if err := l.Succeed(ctx); err != nil {
		t.Fatal(err)
	}

	// a's provider-wide failure cools the upstream, written on its own slot.
	lx, err := a.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := lx.Fail(ctx, errProviderBusy); err != nil {
		t.Fatal(err)
	}
	if up := firstUpstream(t, a); up.State != gate.CoolingDown || up.Upstream != opts.Upstream || up.RetryAfter <= 0 {
		t.Fatalf("provider-wide failure: upstream %+v, want the upstream cooling", up)
	}
	// b never saw the upstream cooling: its acquire runs beside the upstream read.
	if bl := blocked(t, b, "job"); !errors.Is(bl, gate.ErrUpstreamCooling) {
		t.Fatalf("b, upstream cooled by a: %+v, want ErrUpstreamCooling", bl)
	}
	st, err := b.Status(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != gate.Ready || st.Fence != 0 || st.Attempts != 0 {
		t.Fatalf("refused job: %+v, want Ready with no key left", st)
	}
	if evs := rec.drain(); countKind(evs, gate.EventRedisError) != 0 {
		t.Fatalf("b's events %+v: a Redis error, though the undo of its acquire succeeded", evs)
	}
	if st.Upstream.State != gate.CoolingDown || st.Upstream.Upstream != opts.Upstream || st.Upstream.RetryAfter <= 0 {
		t.Fatalf("Status upstream: %+v, want the upstream cooling", st.Upstream)
	}
	// b has seen it now: the upstream is read first, alone.
	names.Take()
	if bl := blocked(t, b, "job"); !errors.Is(bl, gate.ErrUpstreamCooling) {
		t.Fatalf("b, upstream seen cooling: %+v, want ErrUpstreamCooling", bl)
	}
	if got := names.Take(); len(got) != 1 {
		t.Fatalf("refusal by an upstream seen cooling sent %v, want one script", got)
	}

	// The cooldown ends: c (parallel read) probes, a and b stay refused.
	redistest.Advance(m, time.Minute+time.Second)
	probe, err := c.Acquire(ctx, "p1")
	if err != nil {
		t.Fatalf("probe after the cooldown: %v", err)
	}
	for _, g := range []*gate.Gate{a, b} {
		if bl := blocked(t, g, "p2"); !errors.Is(bl, gate.ErrUpstreamCooling) {
			t.Fatalf("while one call probes: %+v, want ErrUpstreamCooling", bl)
		}
	}
	if err := probe.Succeed(ctx); err != nil {
		t.Fatal(err)
	}
	if up := firstUpstream(t, c); up.State != gate.Ready {
		t.Fatalf("probe's success: upstream %+v, want ready", up)
	}
	if evs := recC.drain(); countKind(evs, gate.EventRedisError) != 0 {
		t.Fatalf("probe's events %+v: a Redis error, though every write succeeded", evs)
	}
	if err := a.Do(ctx, "p2", okFn); err != nil {
		t.Fatalf("after the probe succeeded: %v", err)
	}
}

// keyDown is a hook that fails, while Down is set, every command on key,
// as a cluster node that cannot be reached fails the commands of its
// slots; the others go through.
type keyDown struct {
	key  string
	Down atomic.Bool
}

func (k *keyDown) hits(cmd redis.Cmder) bool {
	if !k.Down.Load() {
		return false
	}
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && s == k.key {
			return true
		}
	}
	return false
}

func (k *keyDown) DialHook(next redis.DialHook) redis.DialHook { return next }
func (k *keyDown) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if k.hits(cmd) {
			cmd.SetErr(gatetest.ErrDown)
			return gatetest.ErrDown
		}
		return next(ctx, cmd)
	}
}
func (k *keyDown) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var keep []redis.Cmder
		for _, c := range cmds {
			if k.hits(c) {
				c.SetErr(gatetest.ErrDown)
			} else {
				keep = append(keep, c)
			}
		}
		if len(keep) == 0 {
			return gatetest.ErrDown
		}
		return next(ctx, keep)
	}
}

// On a cluster an upstream lives on its own node. When that node cannot
// be reached, an acquire fails closed (ErrUnavailable) and does not leave
// the job locked, and Status says it cannot tell rather than "ready".
func TestUpstreamUnreachable(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	prefix := redistest.UniqueKey(t)
	upstreamKey, _ := keyspace.Upstream(prefix, "openai:prod-key")
	sd := &keyDown{key: upstreamKey}
	rdb.AddHook(sd)
	g := newGate(t, rdb, gate.Options{Prefix: prefix, Upstream: "openai:prod-key"})
	ctx := context.Background()
	if err := g.Do(ctx, "warm-up", okFn); err != nil {
		t.Fatal(err)
	}
	sd.Down.Store(true)
	if l, err := g.Acquire(ctx, "job"); !errors.Is(err, gate.ErrUnavailable) {
		t.Fatalf("Acquire with the upstream unreachable: lease %v, err %v; want ErrUnavailable", l, err)
	}
	if _, err := g.Status(ctx, "job"); !errors.Is(err, gate.ErrUnavailable) {
		t.Fatalf("Status with the upstream unreachable: %v, want ErrUnavailable", err)
	}
	sd.Down.Store(false)
	if st := mustStatus(t, g, "job"); st.State != gate.Ready || st.Fence != 0 {
		t.Fatalf("job after the failed acquire: %+v, want Ready with no key left", st)
	}
}

// WaitReplicas pins a connection for the acquire and its WAIT; a refused
// or unreplicated acquire gives it back, so the client's pool is not
// drained by failures. (miniredis has no replicas: WAIT answers 0.)
func TestWaitReplicasReturnsItsConnection(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), PoolSize: 2, PoolTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	// Upstreams off: the pinned acquire is the job's pipeline.
	g := newGate(t, rdb, gate.Options{Redis: gate.RedisPolicy{WaitReplicas: 1, WaitTimeout: 10 * time.Millisecond},
		UpstreamPolicy: gate.UpstreamPolicy{Off: true}})
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		if _, err := g.Acquire(ctx, "job"); !errors.Is(err, gate.ErrUnavailable) {
			t.Fatalf("acquire %d with no replica: %v, want ErrUnavailable", i, err)
		}
	}
	if st := mustStatus(t, g, "job"); st.State != gate.Ready {
		t.Fatalf("after the unreplicated acquires: %+v, want Ready", st)
	}
}

// movedError is the reply a cluster node gives for a key it does not serve.
type movedError string

func (e movedError) Error() string { return string(e) }
func (movedError) RedisError()     {}

// movedOnce answers the next acquire (its script, or the pipeline that
// starts with its PTTL) with MOVED, as a node would whose slot just moved;
// every other command goes through.
type movedOnce struct{ armed atomic.Bool }

func (m *movedOnce) DialHook(next redis.DialHook) redis.DialHook { return next }
func (m *movedOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" && m.armed.CompareAndSwap(true, false) {
			err := movedError("MOVED 3999 127.0.0.1:7001")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (m *movedOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "pttl" && m.armed.CompareAndSwap(true, false) {
			err := movedError("MOVED 3999 127.0.0.1:7001")
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// A MOVED reply to the pinned acquire of WaitReplicas on a client that
// cannot follow it (one node, e.g. behind a proxy) fails closed with an
// error naming the move, never a panic, and leaves the job free.
func TestWaitReplicasMovedOnOneNode(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	moved := &movedOnce{}
	rdb.AddHook(moved)
	// Upstreams off: the pinned acquire is the job's pipeline.
	g := newGate(t, rdb, gate.Options{Redis: gate.RedisPolicy{WaitReplicas: 1, WaitTimeout: 10 * time.Millisecond},
		UpstreamPolicy: gate.UpstreamPolicy{Off: true}})
	ctx := context.Background()
	_, _ = g.Acquire(ctx, "warm-up") // loads the script
	moved.armed.Store(true)
	_, err := g.Acquire(ctx, "job")
	if !errors.Is(err, gate.ErrUnavailable) || !strings.Contains(err.Error(), "moved") {
		t.Fatalf("Acquire after MOVED: %v, want ErrUnavailable naming the move", err)
	}
	if st := mustStatus(t, g, "job"); st.State != gate.Ready {
		t.Fatalf("job after the moved acquire: %+v, want Ready", st)
	}
}
