package gate

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate/internal/hub"
	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/gate/internal/upstream"
	"github.com/retrygate/retrygate/internal/keyspace"
)

// Gate is a leaky lock over Redis for one kind of job and its upstreams.
// It is safe for concurrent use. Create one per kind of job and share it.
type Gate struct {
	store *store.Store // every Redis command, script and value
	opts  Options
	obs   Observer

	// ups are the upstreams' breakers, Options.Upstream then Fallbacks.
	// With UpstreamPolicy.Off it holds one that always permits.
	ups *upstream.Set
	// lines are the lines of the upstreams with a budget (inline.go).
	lines []*inLine

	flight    flight         // in-process merging (flight.go)
	unwritten unwritten      // outcomes Redis did not take (flight.go, unwritten.go)
	calls     callTimes      // recent call durations (estimate.go)
	hub       *hub.Hub       // subscriptions of waits and watches
	rewriting sync.WaitGroup // successes being written again (unwritten.go), for Close

	test testHooks // nil outside tests (export_test.go)
}

// testHooks are a gate's test signals. AcquireWait calls refused after
// the first refusal, before subscribing. It calls subscribed after the
// subscription is confirmed, before each read.
type testHooks struct {
	refused, subscribed func(job string)
	giveCheck           time.Duration // the giver's look when the budget cannot say (0: giveCheck)
}

// New returns a gate over rdb. It does not connect: the caller owns the
// client, its pool and its timeouts. rdb may be a *redis.Client (single
// node, Sentinel failover), a *redis.ClusterClient, a *redis.Ring or any
// Client. Invalid options give an error matching ErrInvalidOptions. Its
// text names every invalid field.
//
// New learns once, from the methods rdb has, how to send commands. So a
// wrapper that embeds a client behaves as the client. What New learns:
//   - With Options() *redis.Options (a *redis.Client), changes are
//     published with PUBLISH. Otherwise they are published with SPUBLISH
//     in the key's slot.
//   - Redis.WaitReplicas needs Conn (one node) or MasterForKey (cluster).
//   - Waits subscribe with Subscribe or SSubscribe.
//
// Which logic runs never depends on it.
func New(rdb Client, opts Options) (*Gate, error) {
	if rdb == nil {
		return nil, &optionsError{problems: []string{"rdb: nil Redis client"}}
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.Shadow {
		o.Prefix = keyspace.Shadow(o.Prefix)
	}
	g := &Gate{opts: o, obs: o.Observer}
	g.store = store.New(rdb, store.Config{Lease: o.Lease, WaitReplicas: o.Redis.WaitReplicas, WaitTimeout: o.Redis.WaitTimeout, Timeout: o.Redis.Timeout})
	hc := hub.Config{Subscriptions: g.store.Subscriptions(), Timeout: o.Redis.Timeout}
	if g.obs != nil {
		hc.Warn = func(ctx context.Context, err error) {
			g.emit(ctx, Event{Kind: EventWarning, Reason: WarnWaitPolling, Err: err})
		}
	}
	g.hub = hub.New(hc)
	if o.Redis.WaitReplicas > 0 && !g.store.CanPin() {
		return nil, &optionsError{problems: []string{fmt.Sprintf(
			"Redis.WaitReplicas: needs a client that can pin a connection (a *redis.Client, a *redis.ClusterClient or a wrapper embedding one: WAIT must run on the connection that wrote the lock), got %T", rdb)}}
	}
	var names []string
	if o.Upstream != "" {
		names = append([]string{o.Upstream}, o.UpstreamPolicy.Fallbacks...)
	}
	p := o.UpstreamPolicy
	g.ups = upstream.NewSet(o.Prefix, names, upstream.Policy{AllowedFails: p.AllowedFails, FailWindow: p.FailWindow, PermanentWave: p.PermanentWave,
		UnreachableJobs: p.UnreachableJobs, Budget: budgetPolicy(o)})
	g.lines = g.newLines()
	return g, nil
}

// opCtx bounds a Redis operation the gate runs detached from its caller.
func (g *Gate) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(context.WithoutCancel(ctx), g.opts.Redis.Timeout, errRedisTimeout)
}

// Client is the part of a go-redis client a Gate uses. Every command goes
// through Process. The commands of one round trip go through a Pipeline:
// an upstream's state read with a job's acquire, a settle with its
// upstream's update. These satisfy it: *redis.Client (Sentinel's failover
// client included), *redis.ClusterClient, *redis.Ring, every
// redis.UniversalClient and a wrapper that embeds one.
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

// leaseStart is when a run started, from its fence. The fence is Redis's
// TIME in µs at its acquire. When the clock went back, it is one more than
// the last fence.
func leaseStart(fence int64) time.Time { return time.UnixMicro(fence) }

// emit sends e to the observer, if any. It is small enough to be inlined.
// So without an observer the Event is never built.
func (g *Gate) emit(ctx context.Context, e Event) {
	if g.obs != nil {
		if e.Upstream == "" {
			e.Upstream = g.opts.Upstream
		}
		e.Shadow = g.opts.Shadow
		g.obs.Observe(ctx, e)
	}
}
