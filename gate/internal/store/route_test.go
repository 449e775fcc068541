package store

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/faultproxy"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// twoMasters is a cluster of two servers as the store sees one: the keys
// of hash tag up live on the second, every other key on the first. Its
// commands are routed by key (a redis.Ring), and MasterForKey names each
// key's server, as a cluster client's slot map does; master, when set,
// answers MasterForKey instead (a slot map that names a master that
// died).
type twoMasters struct {
	*redis.Ring
	job, up *redis.Client
	tag     string
	master  func(key string) *redis.Client
}

type tagHash string

func (h tagHash) Get(tag string) string {
	if tag == string(h) {
		return "up"
	}
	return "job"
}

func newTwoMasters(t *testing.T, tag string) *twoMasters {
	t.Helper()
	a, job := redistest.Miniredis(t)
	b, up := redistest.Miniredis(t)
	ring := redis.NewRing(&redis.RingOptions{
		Addrs:             map[string]string{"job": a.Addr(), "up": b.Addr()},
		NewConsistentHash: func([]string) redis.ConsistentHash { return tagHash(tag) },
	})
	t.Cleanup(func() { _ = ring.Close() })
	return &twoMasters{Ring: ring, job: job, up: up, tag: tag}
}

func (c *twoMasters) Options() *redis.ClusterOptions { return &redis.ClusterOptions{} }
func (c *twoMasters) ReloadState(context.Context)    {}
func (c *twoMasters) MasterForKey(_ context.Context, key string) (*redis.Client, error) {
	if c.master != nil {
		return c.master(key), nil
	}
	if strings.Contains(key, "{"+c.tag+"}") {
		return c.up, nil
	}
	return c.job, nil
}

// On a cluster the job's commands go to its master and the upstreams'
// reads to theirs, beside them: an upstream that another master holds is
// read there (through the job's master it would read as ready).
func TestAcquireReadsUpstreamsOnTheirMaster(t *testing.T) {
	c := newTwoMasters(t, "up")
	ctx := context.Background()
	p := redistest.UniqueKey(t)
	up := p + ":{up}"
	if err := c.up.Set(ctx, up, "c:overloaded:1:99999999999999", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s := New(c, Config{Lease: time.Minute, Timeout: time.Second})
	var r Acquired
	if err := s.Acquire(ctx, &Acquire{Key: p + ":{job}", Token: NewToken(), Upstreams: []string{up}}, &r); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if !r.Taken || len(r.Upstreams) != 1 || r.Upstreams[0].Mode != ModeCooling {
		t.Fatalf("taken %v, upstreams %+v; want taken, the upstream cooling", r.Taken, r.Upstreams)
	}
}

// A master that fails (the slot map names one that died) does not fail
// the acquire: it is sent again through the cluster client, which finds
// the key's server, and reads, as the first send would have, whether the
// run a waiter waits for succeeded meanwhile (Done).
func TestAcquireResentPastAFailedMaster(t *testing.T) {
	c := newTwoMasters(t, "up")
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	c.master = func(string) *redis.Client { return dead }
	ctx := context.Background()
	s := New(c, Config{Lease: time.Minute, Timeout: time.Second})
	p := redistest.UniqueKey(t)
	for _, done := range []string{"", keyspace.Done(keyspace.Job(p, "job"))} {
		key := keyspace.Job(p, "job")
		if done != "" {
			if err := c.job.Set(ctx, done, "waited-for", 0).Err(); err != nil {
				t.Fatal(err)
			}
			key = p + ":{job}:again" // a free key: the first is taken
		}
		var r Acquired
		err := s.Acquire(ctx, &Acquire{Key: key, Token: NewToken(), Done: done}, &r)
		r.Close()
		if err != nil || !r.Taken {
			t.Fatalf("Done %q: taken %v, %v; want taken through the cluster client", done, r.Taken, err)
		}
		if want := map[bool]string{false: "", true: "waited-for"}[done != ""]; r.DoneToken != want {
			t.Fatalf("Done %q: DoneToken %q, want %q", done, r.DoneToken, want)
		}
		if n, err := c.job.Exists(ctx, key).Result(); err != nil || n != 1 {
			t.Fatalf("Done %q: the job's key on its server: %d, %v; want written", done, n, err)
		}
	}
}

// pipelines counts the round trips a client sends, a pipeline as one
// (the hooks of a client are those of its pinned connections too), and
// leaves out a new connection's handshake (HELLO, CLIENT SETINFO).
type pipelines struct{ n atomic.Int64 }

func handshake(name string) bool { return name == "hello" || name == "client" }

func (p *pipelines) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd.Name()) {
			p.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && !handshake(cmds[0].Name()) {
			p.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// With WaitReplicas on one node the acquire is one round trip on the
// pinned connection, the upstreams' reads in it; then the WAIT.
func TestWaitReplicasAcquireIsOneRoundTrip(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	trips := new(pipelines)
	rdb.AddHook(trips)
	ctx := context.Background()
	s := New(rdb, Config{Lease: time.Minute, WaitReplicas: 1, WaitTimeout: time.Second, Timeout: time.Second})
	p := redistest.UniqueKey(t)
	var r Acquired
	// The first acquire on a server loads the fence script (NOSCRIPT, then EVAL).
	if err := s.Acquire(ctx, &Acquire{Key: p + ":{warm-up}", Token: NewToken()}, &r); err != nil {
		t.Fatal(err)
	}
	r.Close()
	trips.n.Store(0)
	err := s.Acquire(ctx, &Acquire{Key: p + ":{job}", Token: NewToken(), Upstreams: []string{p + ":{up}", p + ":{other}"}}, &r)
	r.Close()
	if err != nil || !r.Taken || len(r.Upstreams) != 2 {
		t.Fatalf("taken %v, upstreams %+v, %v; want taken, two upstreams read", r.Taken, r.Upstreams, err)
	}
	if n := trips.n.Load(); n != 1 {
		t.Fatalf("%d round trips, want 1", n)
	}
}

// WaitReplicas waits for the replicas on the connection that wrote the
// lock: a replica that has not acknowledged that write (its link silent)
// leaves the acquire not replicated, though it is connected. The pool
// hands out its oldest idle connection (PoolFIFO), so a WAIT sent on any
// other connection than the one that wrote (which has written nothing:
// Redis answers it at once with every connected replica) would pass.
func TestReplicateWaitsForTheLockWrite(t *testing.T) {
	master := redistest.Server(t)
	p := faultproxy.New(t, master.Addr())
	_, port, _ := strings.Cut(p.Addr(), ":")
	replicaOf(t, port)
	ctx := context.Background()
	p.Blackhole(true)
	t.Cleanup(func() { p.Blackhole(false) })
	rdb := redis.NewClient(&redis.Options{Addr: master.Addr(), PoolFIFO: true})
	t.Cleanup(func() { _ = rdb.Close() })
	idle := make([]*redis.Conn, 3)
	for i := range idle {
		idle[i] = rdb.Conn()
		if err := idle[i].Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range idle {
		_ = c.Close() // back to the pool
	}
	s := New(rdb, Config{Lease: time.Minute, WaitReplicas: 1, WaitTimeout: 200 * time.Millisecond, Timeout: time.Second})
	var r Acquired
	if err := s.Acquire(ctx, &Acquire{Key: redistest.UniqueKey(t), Token: NewToken()}, &r); err != nil || !r.Taken {
		t.Fatalf("acquire: taken %v, %v", r.Taken, err)
	}
	defer r.Close()
	if err := s.Replicate(ctx, &r); err == nil || !Reached(err) {
		t.Fatalf("Replicate with the replica's link silent: %v, want not replicated", err)
	}
}
