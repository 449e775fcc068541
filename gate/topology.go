package gate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client is the part of a go-redis client a Gate uses: every command goes
// through Process, and the commands of one round trip (an upstream's state
// read with a job's acquire, a settle with its upstream's update) through a
// Pipeline. *redis.Client (Sentinel's failover client included),
// *redis.ClusterClient, *redis.Ring, every redis.UniversalClient and a
// wrapper that embeds one satisfy it.
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

// topology is what New learns about the client, once, from the methods it
// has, never from its concrete type: a wrapper (tracing, fault injection)
// that embeds a *redis.Client or *redis.ClusterClient keeps their methods
// and so gets exactly the client's behaviour. It decides how commands are
// sent (which publish command, which connection for WAIT, how to
// subscribe), never which logic runs.
type topology struct {
	// ctxDeadlines: the client applies context deadlines to its sockets
	// (ContextTimeoutEnabled, or a client whose options are unknown), so a
	// per-settle timeout is worth its allocation.
	ctxDeadlines bool
	// pin returns a connection to the master of key, for WAIT after an
	// acquire (WaitReplicas); nil when the client cannot pin one.
	pin func(ctx context.Context, key string) (*redis.Conn, error)
	// master returns the client of the master that serves key (a cluster),
	// so that the acquire's TIME, a command without a key, runs on the
	// job's own node: a fence from another node's clock could go back. nil
	// (one node): everything goes through the client.
	master func(ctx context.Context, key string) (Client, error)
	// scripts are the state-changing scripts, publishing with PUBLISH on
	// one node and SPUBLISH otherwise (notify.go).
	scripts *writeScripts
	// pubsub opens an empty PubSub for the node that serves channel, and
	// node names that node ("" on one node); nil when the client cannot
	// subscribe: waits then poll (notify.go).
	pubsub func(ctx context.Context) *redis.PubSub
	node   func(ctx context.Context, channel string) (string, error)
	// sharded: subscribe with SSUBSCRIBE (cluster), else SUBSCRIBE.
	sharded bool
	// reload refreshes a cluster client's slot map (after a MOVED reply to
	// a subscription); nil on one node.
	reload func(ctx context.Context)
}

// pooled is the Gate's client with its pipelines reused: go-redis makes a
// Pipeline in four allocations and its Exec leaves it empty and ready, so
// trip.exec gives back the ones it used. Only go-redis's own
// *redis.Pipeline is kept: another Pipeliner (a wrapper's) may hold state
// past Exec, and is made anew for every trip.
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

// reuse keeps pipe, executed and so empty, for the next trip.
func (p *pooled) reuse(pipe redis.Pipeliner) {
	if _, ok := pipe.(*redis.Pipeline); ok {
		p.pipes.Put(pipe)
	}
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

func topologyOf(rdb Client) topology {
	t := topology{ctxDeadlines: true, scripts: clusterScripts}
	switch c := rdb.(type) {
	case nodeClient:
		t.scripts = nodeScripts
		t.ctxDeadlines = c.Options().ContextTimeoutEnabled
		t.pin = func(context.Context, string) (*redis.Conn, error) { return c.Conn(), nil }
		if s, ok := rdb.(subscriber); ok {
			t.pubsub = func(ctx context.Context) *redis.PubSub { return s.Subscribe(ctx) }
			t.node = func(context.Context, string) (string, error) { return "", nil }
		}
	case clusterClient:
		t.ctxDeadlines = c.Options().ContextTimeoutEnabled
		t.pin = func(ctx context.Context, key string) (*redis.Conn, error) {
			m, err := c.MasterForKey(ctx, key)
			if err != nil {
				return nil, err
			}
			return m.Conn(), nil
		}
		t.master = func(ctx context.Context, key string) (Client, error) { return c.MasterForKey(ctx, key) }
		// go-redis routes a PubSub's connection by its first channel's slot
		// and sends every SSUBSCRIBE on that one connection, so the gate
		// keeps one PubSub per master (notify.go).
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

// repin asks a cluster client to reload its slot map after a MOVED and
// returns a connection to addr once the map names it master of key's slot.
// go-redis reloads in the background, within milliseconds on a healthy
// cluster; the wait is bounded by WaitTimeout.
func (g *Gate) repin(ctx context.Context, key, addr string) (*redis.Conn, error) {
	c, ok := g.rdb.(clusterClient)
	if !ok {
		return nil, fmt.Errorf("slot of %q moved to %s", key, addr)
	}
	c.ReloadState(ctx)
	deadline := time.Now().Add(g.opts.WaitTimeout)
	for {
		m, err := c.MasterForKey(ctx, key)
		if err == nil && m.Options().Addr == addr {
			return m.Conn(), nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("slot of %q moved to %s, and the client's slot map did not follow within %v", key, addr, g.opts.WaitTimeout)
		}
		time.Sleep(time.Millisecond) // the reload runs in go-redis's own goroutine
	}
}

// sendAcquire sends the acquire's round trip: the job's PTTL, SET NX GET
// and TIME (trip.jobTake), a waiter's read of the done key, and each
// upstream's GET. It returns the job's reply, each upstream's value ("" for
// none) and the done key's. The job's commands go to the job's own node:
// on one node with the upstreams' GETs in one pipeline; on a cluster
// through that master's client (TIME has no key to route it by), beside a
// pipeline of the GETs through the cluster client; with WaitReplicas on a
// connection pinned to it, returned for WAIT (on a cluster, the GETs are
// then sent after the job's commands: go-redis's pinned Conn shares its
// client's Options without its lock, and two connections opened at once,
// one each way, race on them). When the master's client
// fails (a slot that moved: MOVED, ASK; a node failing over) the job's
// commands are sent once more: on a connection pinned to the slot's new
// master, or through the cluster client, which follows redirects; the job
// is then taken by the takeover script, whose TIME runs where the key is.
// Hooks added with ClusterClient.AddHook do not see the commands sent
// through a master's client; OnNewNode hooks do.
//
// On an error the reply is still returned: the job may have been taken
// (r.taken), and the caller gives it back.
func (g *Gate) sendAcquire(ctx context.Context, l *grant, w *waiting) (r acquireReply, values []string, done string, conn *redis.Conn, err error) {
	via, apart := Client(g.send), false // apart: the upstreams' GETs go through rdb beside it
	switch {
	case g.opts.WaitReplicas > 0:
		if conn, err = g.pin(ctx, l.key); err != nil {
			return r, nil, "", nil, err
		}
		via, apart = conn, g.master != nil
	case g.master != nil:
		if via, err = g.master(ctx, l.key); err != nil {
			return r, nil, "", nil, err
		}
		apart = true
	}
	var ut *trip // the upstreams' GETs when apart
	if apart && len(g.breakers) > 0 {
		ut = new(trip)
	}
	peeks := make([]*redis.StringCmd, len(g.breakers))
	for scripted := false; ; scripted = true {
		if scripted {
			// The first send met a moved slot or a failing node.
			if conn != nil {
				// A pinned connection does not follow a resharded slot.
				conn.Close()
				if conn, err = g.repin(ctx, l.key, movedTo(err)); err != nil {
					return r, nil, "", nil, err
				}
				via = conn
			} else {
				// The cluster client follows redirects, reloads its slot
				// map and retries.
				via = g.send
			}
		}
		var jt trip // the job's node (and the upstreams', on one node)
		var (
			set    *redis.StringCmd
			pt     *redis.IntCmd
			now    *redis.TimeCmd
			script *redis.Cmd
			dc     *redis.StringCmd
		)
		if scripted {
			script = jt.jobAcquire(ctx, l.key, l.token, g.argLease)
		} else {
			set, pt, now = jt.jobTake(ctx, l.key, l.running, g.argLease)
		}
		if w != nil {
			dc = jt.get(ctx, w.done)
		}
		if !scripted {
			ups := &jt
			if ut != nil {
				ups = ut
			}
			for i, b := range g.breakers {
				peeks[i] = ups.get(ctx, b.key)
			}
		}
		if !scripted && ut != nil && conn != nil {
			jt.exec(ctx, via)
			ut.exec(ctx, g.send)
		} else if !scripted && ut != nil {
			sent := make(chan struct{})
			go func(ut *trip) {
				defer close(sent)
				ut.exec(ctx, g.send)
			}(ut)
			jt.exec(ctx, via)
			<-sent
		} else {
			jt.exec(ctx, via)
		}
		if scripted {
			r, err = decodeAcquire(script)
		} else {
			r, err = decodeTake(set, pt, now)
		}
		if err == nil && dc != nil {
			if done, err = dc.Result(); isNil(err) {
				err = nil
			}
		}
		to := movedTo(err)
		if err == nil || scripted || ctx.Err() != nil || (to == "" && (g.master == nil || conn != nil)) {
			break
		}
	}
	if err != nil {
		return r, nil, "", conn, err
	}
	values = make([]string, len(g.breakers))
	for i, p := range peeks {
		v, perr := p.Result()
		if perr != nil && !isNil(perr) {
			return r, nil, "", conn, perr // fail closed on the upstream too; the job is given back
		}
		values[i] = v
	}
	return r, values, done, conn, nil
}
