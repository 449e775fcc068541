package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/internal/keyspace"
)

// Gate is a leaky lock over Redis for one kind of job and one upstream.
// It is safe for concurrent use; create one per upstream and share it.
type Gate struct {
	rdb  redis.Scripter
	opts Options
	obs  Observer

	renewEvery time.Duration
	topology
	// scopeKey and scopeFails are empty without Options.Scope.
	scopeKey, scopeFails string

	// Script arguments that never change, boxed once: an int64 above 255
	// put in an interface allocates on every call otherwise.
	argLease, argMetaTTL, argMetaSlack, argDoneTTL any

	// scopeHint is when (unix ns) the scope's last cooldown or pause seen by
	// this process ends; until then acquires read the scope first.
	scopeHint atomic.Int64

	// hub holds the subscriptions of waits and watches (notify.go).
	hub hub

	mu       sync.Mutex
	inflight map[string]*Lease      // in-process coalescing, by job
	hints    map[string]coolingHint // cooldowns seen, by job (hint.go)
}

// New returns a gate over rdb. It does not connect: the caller owns the
// client, its pool and its timeouts. rdb may be a *redis.Client (single
// node, Sentinel failover), a *redis.ClusterClient, a *redis.Ring or any
// redis.Scripter. Invalid options give an error matching ErrInvalidOptions that
// names every invalid field.
//
// New decides once how to use rdb, from the methods it has (so a wrapper
// that embeds a client behaves as the client): with
// Options() *redis.Options (a *redis.Client) every key is taken to live on
// one server, and one script reads a job's and its scope's keys together;
// any other client gets the cluster-safe form, where the scope is read on
// its own slot, in parallel. A Get method enables the refusal fast path;
// WaitReplicas needs Conn (one node) or MasterForKey (cluster).
func New(rdb redis.Scripter, opts Options) (*Gate, error) {
	if rdb == nil {
		return nil, &optionsError{problems: []string{"rdb: nil Redis client"}}
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Gate{
		rdb:        rdb,
		opts:       o,
		obs:        o.Observer,
		renewEvery: o.Lease / 3,
		inflight:   make(map[string]*Lease),
		hints:      make(map[string]coolingHint),
	}
	g.hub.g = g
	g.argLease, g.argMetaTTL, g.argDoneTTL = ms(o.Lease), ms(o.Lease+o.AttemptsTTL), ms(o.DoneTTL)
	g.argMetaSlack = ms(o.AttemptsTTL / 2)
	g.topology = topologyOf(rdb)
	if o.WaitReplicas > 0 && g.pin == nil {
		return nil, &optionsError{problems: []string{fmt.Sprintf(
			"WaitReplicas: needs a client that can pin a connection (a *redis.Client, a *redis.ClusterClient or a wrapper embedding one: WAIT must run on the connection that wrote the lock), got %T", rdb)}}
	}
	if o.Scope != "" {
		g.scopeKey, g.scopeFails = keyspace.Scope(o.Prefix, o.Scope)
	}
	return g, nil
}

// Options returns the gate's options with every default filled in.
func (g *Gate) Options() Options { return g.opts }

// Do runs fn under the job's lock. If the job is cooling down, failed, done,
// running elsewhere or its upstream is cooling, Do returns a *BlockedError
// at once and fn is not called. Otherwise fn runs with a context that is
// cancelled (cause ErrLeaseLost) if the lease is lost, and the outcome is
// settled in Redis:
//
//   - nil: the lock is released (or held as Done for DoneTTL).
//   - an error: it is classified; a transient failure leaves the job cooling
//     down, a permanent one marks it Failed, a systemic one cools it without
//     counting an attempt; the returned *CallError wraps fn's error.
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
			l.settle(ctx, opTransient, panicVerdict)
		}
	}()
	ferr := fn(l.Context(), l)
	panicked = false
	if ferr == nil {
		err := l.Succeed(ctx)
		if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotOwned) {
			return err
		}
		// A success whose release could not reach Redis stays a success:
		// the lock expires with the lease and the observer saw the error.
		return nil
	}
	return l.failError(ctx, ferr)
}

// forget ends in-process coalescing for l.
func (g *Gate) forget(l *Lease) {
	g.mu.Lock()
	if g.inflight[l.job] == l {
		delete(g.inflight, l.job)
	}
	g.mu.Unlock()
	g.hub.local(l.keys.lock)
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// opCtx bounds a Redis operation the gate runs detached from its caller.
func (g *Gate) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, g.opts.Timeout)
}
