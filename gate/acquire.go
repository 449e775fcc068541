package gate

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/retrygate/retrygate/internal/redisop"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"
)

// Acquire is the two-step form of Do, for middleware: it takes the job's
// lease, and the caller reports the outcome with Succeed, Fail or Release.
// Until then the lease is renewed every Lease/3. A refusal is a
// *BlockedError; an unreachable Redis is ErrUnavailable, or with FailOpen an
// ungated lease (Gated reports false).
//
// If the caller's context ends first, the error is the context's; a
// deadline that passes while Redis does not answer also matches
// ErrUnavailable (too late to fail open).
//
// Acquire is one Redis round trip (two sent in parallel on a cluster with a
// Scope). Concurrent Acquires of one job in one process make one round
// trip: the others wait for its reply and get the same refusal, or
// ErrInFlight once it holds the lease. A retry of a job this Gate was
// refused by (cooling down or failed) is confirmed with a plain GET of the
// lock instead of the acquire script; its RetryAfter then comes from the
// local clock.
//
// With Options.Wait set, a job running elsewhere is waited for: see
// AcquireWait.
func (g *Gate) Acquire(ctx context.Context, job string) (*Lease, error) {
	return g.AcquireWait(ctx, job, g.opts.Wait)
}

// acquireNow is Acquire without a wait.
func (g *Gate) acquireNow(ctx context.Context, job string) (*Lease, error) {
	if err := checkJob(job); err != nil {
		return nil, err
	}
	for {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("gate: acquire: %w", context.Cause(ctx))
		}
		g.mu.Lock()
		cur, busy := g.inflight[job]
		if !busy {
			l := &Lease{g: g, job: job, parent: ctx}
			l.hint, l.hinted = g.hints[job]
			g.inflight[job] = l
			g.mu.Unlock()
			lease, err := g.acquire(ctx, l)
			g.resolve(l, err)
			return lease, err
		}
		var wait chan struct{}
		if !cur.resolved {
			if cur.waiters == nil {
				cur.waiters = make(chan struct{})
			}
			wait = cur.waiters
		}
		g.mu.Unlock()
		if err, retry := g.refuseLocal(ctx, cur, wait); !retry {
			return nil, err
		}
	}
}

// resolve publishes the outcome of l's acquire to the callers coalesced
// behind it, and ends coalescing on l if it was refused.
func (g *Gate) resolve(l *Lease, err error) {
	g.mu.Lock()
	l.resolved, l.refusal = true, err
	if l.waiters != nil {
		close(l.waiters)
	}
	if err != nil && g.inflight[l.job] == l {
		delete(g.inflight, l.job)
	}
	g.mu.Unlock()
}

// refuseLocal answers a call coalesced behind cur, another call of the same
// job in this process, without a round trip of its own: it waits for cur's
// acquire if that is still in flight and gives the same refusal, or
// ErrInFlight when cur holds the lease. retry is set when cur's acquire
// failed for its own reasons (its caller gave up, Redis errored): the call
// then tries by itself.
func (g *Gate) refuseLocal(ctx context.Context, cur *Lease, wait chan struct{}) (err error, retry bool) {
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("gate: acquire: %w", context.Cause(ctx)), false
		}
	}
	g.mu.Lock()
	refusal := cur.refusal
	g.mu.Unlock()
	var b *BlockedError
	switch {
	case errors.As(refusal, &b):
		cp := *b
		b = &cp
	case refusal != nil:
		return nil, true
	default:
		b = &BlockedError{Job: cur.job, State: Running, RetryAfter: cur.remaining()}
	}
	g.emit(ctx, Event{Kind: EventRefused, Job: b.Job, State: b.State, Reason: b.Reason, Attempt: b.Attempts, Cooldown: b.RetryAfter, Local: true})
	return b, false
}

// acquire takes the job's lock in Redis for l, registered in g.inflight.
func (g *Gate) acquire(ctx context.Context, l *Lease) (*Lease, error) {
	job := l.job
	l.keys = g.jobKeys(job)
	sent := time.Now()
	reply, scope, err := g.acquireRedis(ctx, l)
	if err != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			// Redis did not answer within the caller's deadline: that is
			// unavailability too, but too late to fail open.
			werr := fmt.Errorf("%w: acquire: %w", ErrUnavailable, context.Cause(ctx))
			g.emit(ctx, Event{Kind: EventRedisError, Job: job, Op: redisop.Acquire, Err: werr})
			return nil, werr
		case ctx.Err() != nil:
			return nil, fmt.Errorf("gate: acquire: %w", context.Cause(ctx))
		}
		werr := redisError("acquire", err)
		g.emit(ctx, Event{Kind: EventRedisError, Job: job, Op: redisop.Acquire, Err: werr})
		if g.opts.FailOpen && !reached(err) {
			// Still coalesced in-process: Redis being down must not turn
			// every local duplicate into a model call.
			l.ungated = true
			l.ctx, l.cancel = context.WithCancelCause(ctx)
			g.emit(ctx, Event{Kind: EventFailOpen, Job: job, Err: werr})
			return l, nil
		}
		return nil, werr
	}

	if scope != nil {
		if reply.kind == "ok" {
			// Cluster: the scope read ran beside the acquire. Undo it so the
			// refused job keeps no key and no attempt.
			g.undoAcquire(ctx, l, reply.fresh)
		}
		return nil, g.refuseScope(ctx, job, scope)
	}

	switch reply.kind {
	case "ok":
		l.fence = reply.fence
		l.attempt = reply.attempts + 1
		l.probe = reply.probe
		l.start = sent
		l.ctx, l.cancel = context.WithCancelCause(ctx)
		// expires is read by coalesced callers (remaining) under l.mu.
		l.mu.Lock()
		l.expires = sent.Add(g.opts.Lease)
		l.timer = time.AfterFunc(g.renewEvery, l.renew)
		l.mu.Unlock()
		g.emit(ctx, Event{Kind: EventAcquired, Job: job, State: Running, Fence: l.fence, Attempt: l.attempt})
		return l, nil
	case "scope":
		return nil, g.refuseScope(ctx, job, &scopeReply{value: reply.value, pttl: reply.pttl})
	default:
		st, attempts, reason := stateOf(reply.value)
		b := &BlockedError{Job: job, State: st, Attempts: max(attempts, 0), Reason: reason}
		if st == Running || st == CoolingDown {
			b.RetryAfter = pttl(reply.pttl)
		}
		if !reply.hinted && (st == CoolingDown || st == Failed) && reply.pttl > 0 {
			g.noteCooling(job, coolingHint{value: reply.value, until: sent.Add(pttl(reply.pttl))})
		}
		g.emit(ctx, Event{Kind: EventRefused, Job: job, State: st, Reason: reason, Attempt: b.Attempts, Cooldown: b.RetryAfter})
		return nil, b
	}
}

// acquireRedis runs the acquire script and, on a multi-node client with a
// scope, the scope check in parallel. scope is non-nil when the scope is
// cooling (cluster form only; the single-node script reports it in reply).
func (g *Gate) acquireRedis(ctx context.Context, l *Lease) (acquireReply, *scopeReply, error) {
	if r, ok, err := g.refuseKnown(ctx, l); ok || err != nil {
		return r, nil, err
	}
	l.token = newToken()
	keys := l.keys.both[:]
	args := []any{l.token, g.argLease, g.argMetaTTL, g.argMetaSlack}
	if g.scopeKey == "" || g.oneNode {
		if g.scopeKey != "" {
			keys = append(keys, g.scopeKey)
		}
		r, err := g.runAcquire(ctx, l, keys, args)
		if err == nil && r.kind == "ok" && g.scopeKey != "" && g.scopeHint.Load() != 0 {
			g.scopeHint.Store(0) // the script found the scope open
		}
		return r, nil, err
	}
	if g.scopeMayCool() {
		// This process saw the scope cooling: read it first, so a refusal
		// is one round trip and writes no job key (no acquire to undo).
		// Redis is still asked, so an operator's ResetScope is seen at once.
		s, claimed, err := g.readScope(ctx, l.token)
		if err != nil {
			return acquireReply{}, nil, err
		}
		if s != nil {
			return acquireReply{}, s, nil
		}
		g.scopeHint.Store(0)
		r, err := g.runAcquire(ctx, l, keys, args)
		return g.settleClaim(ctx, l, r, err, claimed), nil, err
	}
	type scopeResult struct {
		s       *scopeReply
		claimed bool
		err     error
	}
	ch := make(chan scopeResult, 1)
	go func() {
		s, claimed, err := g.readScope(ctx, l.token)
		ch <- scopeResult{s, claimed, err}
	}()
	r, err := g.runAcquire(ctx, l, keys, args)
	sr := <-ch
	r = g.settleClaim(ctx, l, r, err, sr.claimed)
	if err != nil {
		return r, nil, err
	}
	if sr.err != nil {
		if r.kind == "ok" {
			// Fail closed on the scope too, but do not leave the job locked.
			g.undoAcquire(ctx, l, r.fresh)
		}
		return r, nil, sr.err
	}
	if sr.s != nil && sr.s.value != "" {
		return r, sr.s, nil
	}
	return r, nil, nil
}

// settleClaim keeps a probe claimed by the cluster form's scope check when
// the job's acquire succeeded (r.probe), and gives it back otherwise.
func (g *Gate) settleClaim(ctx context.Context, l *Lease, r acquireReply, err error, claimed bool) acquireReply {
	if !claimed {
		return r
	}
	if err == nil && r.kind == "ok" {
		r.probe = true
		return r
	}
	g.unclaimScope(ctx, l.token)
	return r
}

// runAcquire runs the acquire script and, with WaitReplicas, waits for the
// replicas on the same connection.
func (g *Gate) runAcquire(ctx context.Context, l *Lease, keys []string, args []any) (acquireReply, error) {
	if g.opts.WaitReplicas == 0 {
		return decodeAcquire(acquireScriptFor(keys).Run(ctx, g.rdb, keys, args...))
	}
	r, conn, err := g.acquirePinned(ctx, keys, args)
	if conn != nil {
		defer conn.Close()
	}
	if err != nil || r.kind != "ok" {
		return r, err
	}
	n, err := conn.Wait(ctx, g.opts.WaitReplicas, g.opts.WaitTimeout).Result()
	if err == nil && n < int64(g.opts.WaitReplicas) {
		err = &notReplicatedError{acked: n, want: g.opts.WaitReplicas, within: g.opts.WaitTimeout}
	}
	if err != nil {
		g.undoAcquire(ctx, l, r.fresh)
		if r.probe { // one node: the script claimed the scope's probe too
			g.unclaimScope(ctx, l.token)
		}
		return acquireReply{}, err
	}
	return r, nil
}

// acquireScriptFor picks the acquire script for keys: with the scope
// library when the scope key is among them (scripts.go).
func acquireScriptFor(keys []string) *redis.Script {
	if len(keys) > 2 {
		return acquireScopeScript
	}
	return acquireScript
}

// acquirePinned runs the acquire script on a connection pinned to the
// master of the job's slot, so WAIT can follow on the same connection. A
// pinned connection does not follow a resharded slot: on MOVED the
// client's slot map is reloaded and the script runs once more on the
// slot's new master.
func (g *Gate) acquirePinned(ctx context.Context, keys []string, args []any) (acquireReply, *redis.Conn, error) {
	conn, err := g.pin(ctx, keys[0])
	if err != nil {
		return acquireReply{}, nil, err
	}
	r, err := decodeAcquire(acquireScriptFor(keys).Run(ctx, conn, keys, args...))
	to := movedTo(err)
	if to == "" {
		return r, conn, err
	}
	conn.Close()
	if conn, err = g.repin(ctx, keys[0], to); err != nil {
		return acquireReply{}, nil, err
	}
	r, err = decodeAcquire(acquireScriptFor(keys).Run(ctx, conn, keys, args...))
	return r, conn, err
}

// undoAcquire releases a lock the scope check refused after the fact.
func (g *Gate) undoAcquire(ctx context.Context, l *Lease, fresh bool) {
	f := "0"
	if fresh {
		f = "1"
	}
	rctx, cancel := g.opCtx(context.WithoutCancel(ctx))
	defer cancel()
	if err := g.scripts.undo.Run(rctx, g.rdb, l.keys.both[:], l.token, f).Err(); err != nil {
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Op: redisop.Undo, Err: redisError("undo", err)})
	}
}

// newToken returns a 128-bit random lock token in hex. math/rand/v2's
// generator is seeded from the OS and cheap; the token only has to be
// unique, since whoever can write to Redis can overwrite the lock anyway.
func newToken() string {
	var raw [16]byte
	binary.LittleEndian.PutUint64(raw[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(raw[8:], rand.Uint64())
	var b [32]byte
	hex.Encode(b[:], raw[:])
	return string(b[:])
}
