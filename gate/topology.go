package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// topology is what New learns about the client, once, from the methods it
// has, never from its concrete type: a wrapper (tracing, fault injection)
// that embeds a *redis.Client or *redis.ClusterClient keeps their methods
// and so gets exactly the client's behaviour.
type topology struct {
	// oneNode: every key lives on one server (the client has
	// Options() *redis.Options: a *redis.Client, Sentinel's failover client
	// included), so one script may touch a job's and the scope's keys.
	// Otherwise (cluster, ring, unknown) the scope is read and written on
	// its own slot.
	oneNode bool
	// ctxDeadlines: the client applies context deadlines to its sockets
	// (ContextTimeoutEnabled, or a client whose options are unknown), so a
	// per-settle timeout is worth its allocation.
	ctxDeadlines bool
	// get is the client's plain GET, for the refusal fast path (hint.go);
	// nil turns the fast path off.
	get getter
	// pin returns a connection to the master of key, for WAIT after an
	// acquire (WaitReplicas); nil when the client cannot pin one.
	pin func(ctx context.Context, key string) (*redis.Conn, error)
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

func topologyOf(rdb redis.Scripter) topology {
	t := topology{ctxDeadlines: true, scripts: clusterScripts}
	t.get, _ = rdb.(getter)
	switch c := rdb.(type) {
	case nodeClient:
		t.oneNode = true
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

// movedTo returns the address of a MOVED redirection, "" for any other
// error.
func movedTo(err error) string {
	var re redis.Error
	if !errors.As(err, &re) {
		return ""
	}
	f := strings.Fields(re.Error())
	if len(f) != 3 || f[0] != "MOVED" {
		return ""
	}
	return f[2]
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
