package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client is the part of a go-redis client the store uses. Every command
// goes through Process. The commands of one round trip go through a
// Pipeline.
type Client interface {
	Process(ctx context.Context, cmd redis.Cmder) error
	Pipeline() redis.Pipeliner
}

var (
	_ Client = (*redis.Client)(nil)
	_ Client = (*redis.ClusterClient)(nil)
	_ Client = (*redis.Ring)(nil)
	_ Client = redis.UniversalClient(nil)
)

// Config is what the store needs from the gate's options.
type Config struct {
	// Lease is a running lease's TTL, and how long a probe holds its
	// upstream.
	Lease time.Duration
	// WaitReplicas, when above 0, makes every acquire wait for this many
	// replicas. It waits on the connection that wrote the lock
	// (Store.Replicate).
	WaitReplicas int
	// WaitTimeout bounds that wait, and the wait for a cluster client's
	// slot map to follow a moved slot.
	WaitTimeout time.Duration
	// Timeout bounds the store's own background commands (unsubscribes).
	Timeout time.Duration
}

// Store is the gate's Redis client with what New learnt of its topology.
type Store struct {
	rdb  Client
	send *pooled // rdb, its pipelines reused: every trip goes through it
	cfg  Config
	// lease is Config.Lease in ms, boxed once. Otherwise an int64 above
	// 255 put in an interface allocates on every call.
	lease any
	// unscripted: the one-node acquire script was refused a command's
	// permission, by an ACL without the budget's commands. Acquires then
	// send the job's commands beside the upstreams', as on a cluster.
	unscripted atomic.Bool
	// loaded: the scripts the servers are known to have loaded, sent
	// as EVALSHA; any other is sent as EVAL (Trip.sendVia says why).
	loaded knownScripts
	// sourceRefused: the server refused EVAL (an ACL with +evalsha
	// only, whose scripts an admin loads). Scripts then go as EVALSHA
	// alone, as before the store knew what a server has loaded, and a
	// trip that meets a lost script runs it after the rest.
	sourceRefused atomic.Bool
	routing
}

// New returns the store over rdb. It learns once, from the methods rdb
// has, how to send commands. So a wrapper that embeds a client behaves as
// the client.
func New(rdb Client, c Config) *Store {
	return &Store{rdb: rdb, send: &pooled{Client: rdb}, cfg: c, lease: ms(c.Lease), routing: routingOf(rdb)}
}

// CanPin reports whether the client can pin a connection to a key's
// master. WaitReplicas needs it.
func (s *Store) CanPin() bool { return s.pin != nil }

// Deadlines reports whether the client applies context deadlines to its
// sockets. Only then is a deadline on a background command worth its
// allocation.
func (s *Store) Deadlines() bool { return s.ctxDeadlines }

// Subscriptions is how the client subscribes to channels, for the gate's
// pub/sub hub. Open is nil when it cannot.
type Subscriptions struct {
	// Open opens an empty PubSub. Node names the server that serves a
	// channel ("" on one node).
	Open func(ctx context.Context) *redis.PubSub
	Node func(ctx context.Context, channel string) (string, error)
	// Sharded: SSUBSCRIBE (a cluster), else SUBSCRIBE.
	Sharded bool
	// Reload refreshes a cluster client's slot map. nil on one node.
	Reload func(ctx context.Context)
}

// Subscriptions returns how the client subscribes.
func (s *Store) Subscriptions() Subscriptions {
	return Subscriptions{Open: s.pubsub, Node: s.node, Sharded: s.sharded, Reload: s.reload}
}

// pooled is a client with its pipelines reused. go-redis makes a Pipeline
// in four allocations. Its Exec leaves it empty and ready. So a trip gives
// back the ones it used. Only go-redis's own *redis.Pipeline is kept.
// Another Pipeliner (a wrapper's) may hold state past Exec. It is made
// anew for every trip.
type pooled struct {
	Client
	pipes sync.Pool
}

// Pipeline returns a pipeline of the client, a reused one when it can.
func (p *pooled) Pipeline() redis.Pipeliner {
	if pipe, ok := p.pipes.Get().(redis.Pipeliner); ok {
		return pipe
	}
	return p.Client.Pipeline()
}

// reuse keeps pipe for the next trip. It was executed, and so is empty.
func (p *pooled) reuse(pipe redis.Pipeliner) {
	if _, ok := pipe.(*redis.Pipeline); ok {
		p.pipes.Put(pipe)
	}
}

// routing is what New learns about the client, once. It learns from the
// methods the client has, never from its concrete type. A wrapper
// (tracing, fault injection) that embeds a *redis.Client or
// *redis.ClusterClient keeps their methods. So it gets exactly the
// client's behaviour. routing decides how commands are sent: which
// publish command, which connection for WAIT, how to subscribe. It never
// decides which logic runs.
type routing struct {
	// ctxDeadlines: the client applies context deadlines to its sockets.
	// It is set with ContextTimeoutEnabled, and for a client whose
	// options are unknown.
	ctxDeadlines bool
	// pin returns a connection to the master of key, for WAIT after an
	// acquire. It is nil when the client cannot pin one.
	pin func(ctx context.Context, key string) (*redis.Conn, error)
	// master returns the client of the master that serves key, on a
	// cluster. So the acquire's TIME, a command without a key, runs on
	// the job's own node. A fence from another node's clock could go
	// back. nil (one node): everything goes through the client.
	master func(ctx context.Context, key string) (Client, error)
	// addr names the master that serves key, on a cluster: each has
	// its own scripts. nil (one node, or a client that hides its
	// topology): the store knows one server's scripts.
	addr func(ctx context.Context, key string) (string, bool)
	// cluster is the client as a cluster client, to follow a moved slot.
	cluster clusterClient
	// oneNode: every key lives on one server, so one script may read a
	// job's key and its upstreams'. That is a *redis.Client, or a wrapper
	// that embeds one.
	oneNode bool
	// scripts are the state-changing scripts. They publish with PUBLISH
	// on one node and SPUBLISH otherwise.
	scripts *writeScripts
	pubsub  func(ctx context.Context) *redis.PubSub
	node    func(ctx context.Context, channel string) (string, error)
	sharded bool
	reload  func(ctx context.Context)
}

type (
	nodeClient interface {
		Options() *redis.Options
		Conn() *redis.Conn
	}
	clusterClient interface {
		Options() *redis.ClusterOptions
		MasterForKey(ctx context.Context, key string) (*redis.Client, error)
		ReloadState(ctx context.Context)
	}
	subscriber interface {
		Subscribe(ctx context.Context, channels ...string) *redis.PubSub
	}
	shardSubscriber interface {
		SSubscribe(ctx context.Context, channels ...string) *redis.PubSub
	}
)

func routingOf(rdb Client) routing {
	t := routing{ctxDeadlines: true, scripts: clusterScripts}
	switch c := rdb.(type) {
	case nodeClient:
		t.scripts, t.oneNode = nodeScripts, true
		t.ctxDeadlines = c.Options().ContextTimeoutEnabled
		t.pin = func(context.Context, string) (*redis.Conn, error) { return c.Conn(), nil }
		if s, ok := rdb.(subscriber); ok {
			t.pubsub = func(ctx context.Context) *redis.PubSub { return s.Subscribe(ctx) }
			t.node = func(context.Context, string) (string, error) { return "", nil }
		}
	case clusterClient:
		t.cluster = c
		t.ctxDeadlines = c.Options().ContextTimeoutEnabled
		t.pin = func(ctx context.Context, key string) (*redis.Conn, error) {
			m, err := c.MasterForKey(ctx, key)
			if err != nil {
				return nil, err
			}
			return m.Conn(), nil
		}
		t.master = func(ctx context.Context, key string) (Client, error) { return c.MasterForKey(ctx, key) }
		t.addr = func(ctx context.Context, key string) (string, bool) {
			m, err := c.MasterForKey(ctx, key)
			if err != nil {
				return "", false
			}
			return m.Options().Addr, true
		}
		// go-redis routes a PubSub's connection by its first channel's
		// slot. It sends every SSUBSCRIBE on that one connection. So the
		// hub keeps one PubSub per master.
		t.reload = c.ReloadState
		if s, ok := rdb.(shardSubscriber); ok {
			t.sharded = true
			t.pubsub = func(ctx context.Context) *redis.PubSub { return s.SSubscribe(ctx) }
			t.node = func(ctx context.Context, channel string) (string, error) {
				m, err := c.MasterForKey(ctx, channel)
				if err != nil {
					return "", err
				}
				return m.Options().Addr, nil
			}
		}
	}
	return t
}

// repin asks a cluster client to reload its slot map after a MOVED. It
// returns a connection to addr once the map names it master of key's
// slot. go-redis reloads in the background, within milliseconds on a
// healthy cluster. WaitTimeout bounds the wait.
func (s *Store) repin(ctx context.Context, key, addr string) (*redis.Conn, error) {
	c := s.cluster
	if c == nil {
		return nil, fmt.Errorf("slot of %q moved to %s", key, addr)
	}
	c.ReloadState(ctx)
	deadline := time.Now().Add(s.cfg.WaitTimeout)
	for {
		m, err := c.MasterForKey(ctx, key)
		if err == nil && m.Options().Addr == addr {
			return m.Conn(), nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("slot of %q moved to %s, and the client's slot map did not follow within %v", key, addr, s.cfg.WaitTimeout)
		}
		time.Sleep(time.Millisecond) // the reload runs in go-redis's own goroutine
	}
}

// Client returns the client the store was made with.
func (s *Store) Client() Client { return s.rdb }
