package gate

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate/internal/hub"
	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/gate/internal/upstream"
)

// Gate is a leaky lock over Redis for one kind of job and its upstreams.
// It is safe for concurrent use; create one per kind of job and share it.
type Gate struct {
	store *store.Store // every Redis command, script and value
	opts  Options
	obs   Observer

	// ups are the upstreams' breakers, Options.Upstream then Fallbacks;
	// one that always permits without an Upstream.
	ups *upstream.Set

	flight    flight    // in-process merging (flight.go)
	unwritten unwritten // failures Redis did not take (unwritten.go)
	calls     callTimes // recent call durations (estimate.go)
	hub       *hub.Hub  // subscriptions of waits and watches

	// Test hooks, nil outside tests (export_test.go): AcquireWait calls
	// testRefused after the first refusal (before subscribing) and
	// testSubscribed after the subscription is confirmed (before each
	// read).
	testRefused, testSubscribed func(job string)
}

// New returns a gate over rdb. It does not connect: the caller owns the
// client, its pool and its timeouts. rdb may be a *redis.Client (single
// node, Sentinel failover), a *redis.ClusterClient, a *redis.Ring or any
// Client. Invalid options give an error matching ErrInvalidOptions that
// names every invalid field.
//
// New learns once, from the methods rdb has, how to send commands (so a
// wrapper that embeds a client behaves as the client): with
// Options() *redis.Options (a *redis.Client) changes are published with
// PUBLISH, otherwise with SPUBLISH in the key's slot; WaitReplicas needs
// Conn (one node) or MasterForKey (cluster); waits subscribe with
// Subscribe or SSubscribe. Which logic runs never depends on it.
func New(rdb Client, opts Options) (*Gate, error) {
	if rdb == nil {
		return nil, &optionsError{problems: []string{"rdb: nil Redis client"}}
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Gate{opts: o, obs: o.Observer}
	g.store = store.New(rdb, store.Config{Lease: o.Lease, WaitReplicas: o.WaitReplicas, WaitTimeout: o.WaitTimeout, Timeout: o.Timeout})
	hc := hub.Config{Subscriptions: g.store.Subscriptions(), Timeout: o.Timeout}
	if g.obs != nil {
		hc.Warn = func(ctx context.Context, err error) {
			g.emit(ctx, Event{Kind: EventWarning, Reason: WarnWaitPolling, Err: err})
		}
	}
	g.hub = hub.New(hc)
	if o.WaitReplicas > 0 && !g.store.CanPin() {
		return nil, &optionsError{problems: []string{fmt.Sprintf(
			"WaitReplicas: needs a client that can pin a connection (a *redis.Client, a *redis.ClusterClient or a wrapper embedding one: WAIT must run on the connection that wrote the lock), got %T", rdb)}}
	}
	var names []string
	if o.Upstream != "" {
		names = append([]string{o.Upstream}, o.Fallbacks...)
	}
	p := o.UpstreamPolicy
	g.ups = upstream.NewSet(o.Prefix, names, upstream.Policy{AllowedFails: p.AllowedFails, FailWindow: p.FailWindow, PermanentWave: p.PermanentWave,
		Budget: budgetPolicy(o)})
	return g, nil
}

// Options returns the gate's options with every default filled in.
func (g *Gate) Options() Options {
	o := g.opts
	o.Fallbacks = append([]string(nil), o.Fallbacks...)
	return o
}

// Do runs fn under the job's lock. If the job is cooling down, failed, done,
// running elsewhere or every upstream of the gate is cooling, Do returns a
// *BlockedError at once and fn is not called. Otherwise fn runs with a
// context that is cancelled (cause ErrLeaseLost) if the lease is lost, and
// the outcome is settled in Redis:
//
//   - nil: the lock is released (or held as Done for DoneTTL).
//   - an error: it is classified; see the package doc's state diagram.
//     The returned *CallError wraps fn's error.
//   - a panic: settled as transient, then re-panicked.
//   - the caller's ctx cancelled: the lock is released with no cooldown.
//
// If fn succeeded but its lease had been lost, Do returns an error matching
// ErrLeaseLost or ErrNotOwned: fn's writes may overlap a newer owner's, which
// a store that checks Lease.Fence rejects.
func (g *Gate) Do(ctx context.Context, job string, fn func(ctx context.Context, l *Lease) error) error {
	l, err := g.Acquire(ctx, job)
	if err != nil {
		return err
	}
	return l.run(ctx, fn)
}

// Call is Do for a function that returns a value.
func Call[T any](ctx context.Context, g *Gate, job string, fn func(ctx context.Context, l *Lease) (T, error)) (T, error) {
	var out T
	err := g.Do(ctx, job, func(ctx context.Context, l *Lease) error {
		v, err := fn(ctx, l)
		if err == nil {
			out = v
		}
		return err
	})
	return out, err
}

// run calls fn and settles the lease with its outcome.
func (l *Lease) run(ctx context.Context, fn func(ctx context.Context, l *Lease) error) error {
	panicked := true
	defer func() {
		if panicked {
			_, _ = l.settle(ctx, outFailure, panicVerdict)
		}
	}()
	ferr := fn(l.Context(), l)
	panicked = false
	return l.Settle(ctx, ferr)
}

// opCtx bounds a Redis operation the gate runs detached from its caller.
func (g *Gate) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), g.opts.Timeout)
}

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

// leaseStart is when a run started, from its fence: Redis's TIME in µs at
// its acquire (or one more than the last fence, when the clock went back).
func leaseStart(fence int64) time.Time { return time.UnixMicro(fence) }
