package gate

import (
	"context"
	"fmt"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/gate/internal/upstream"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/limits"
	"github.com/retrygate/retrygate/internal/redisop"
)

// Do runs fn under the job's lock and records its outcome. Most callers
// should use Do, or Call when fn returns a value; Acquire is for code
// that settles later (middleware, queue adapters).
//
// A job that is cooling down, failed, done or running elsewhere, or whose
// upstreams refuse, gets a *BlockedError at once and fn does not run.
// Otherwise fn's outcome is settled: nil releases the job (or keeps it
// Done for Retention.Done); an error is classified and returned as a *CallError
// (the package doc's state diagram says what each verdict does); a panic
// is settled as transient and re-panicked; the caller's ctx cancelled
// releases the job with no cooldown. fn's context is cancelled (cause
// ErrLeaseLost) if the lease is lost; a success after that returns
// ErrLeaseLost or ErrNotOwned.
func (g *Gate) Do(ctx context.Context, job string, fn func(ctx context.Context, l *Lease) error) error {
	l, err := g.Acquire(ctx, job)
	if err != nil {
		return err
	}
	return l.run(ctx, fn)
}

// Call is Do for a function that returns a value: the value fn returned
// on success, the zero value with Do's error otherwise.
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

// Acquire is the two-step form of Do, for code that settles later: it
// takes the job's lease, renews it every Lease/3, and the caller ends it
// with Lease.Settle (or Succeed, Fail, Release). A refusal is a
// *BlockedError whose RetryAfter says when to come back; a running job's
// refusal matches ErrInFlight. An unreachable Redis is ErrUnavailable, or
// with Redis.FailOpen an ungated lease (Gated reports false). A context
// that ends first returns the context's error, never ErrUnavailable. With
// Options.Wait set, a job running elsewhere is waited for (AcquireWait).
func (g *Gate) Acquire(ctx context.Context, job string) (*Lease, error) {
	return g.AcquireWait(ctx, job, g.opts.Wait)
}

// AcquireWait is Acquire with a wait budget for this call, overriding
// Options.Wait: if the job is running elsewhere it waits, at most wait,
// for that lease to settle, and then acquires the job if it is free or
// returns the refusal the settle left (ErrDone, ErrCoolingDown with the
// cooldown's true time left, ErrFailed, ErrUpstreamCooling). A call its
// upstream's budget refuses, or whose upstream's probe is running, waits
// in that upstream's line for its turn. When wait
// ends first the refusal is ErrInFlight with the lease's time left; when
// ctx ends first the error is the context's. wait ≤ 0 does not wait.
// Once waiting, a Redis out of reach (a failover) does not end the wait:
// the waiter polls until its budget ends, and then returns ErrUnavailable
// (with Redis.FailOpen too: the job was running a moment ago).
//
// The wait is woken by Redis pub/sub: every settle, release, reset and
// undo publishes on the job's channel (its lock key's name; SPUBLISH on a
// cluster, so the channel lives in the job's slot). The waiter subscribes
// before it reads the state again, so a settle in between is never
// missed. A lease that expires without a settle publishes nothing: each
// step of the wait is bounded by the lease's time left, and the waiter
// reads again then. Waiters of one job in one Gate share one subscription,
// and a Gate keeps one connection per Redis server for all of them, open
// while it has waiters and briefly after. Where the client cannot
// subscribe or Redis refuses it (an ACL without channel permission), the
// waiter polls with backoff (10 ms doubling to 1 s) and the gate sends an
// EventWarning with Reason WarnWaitPolling (at most once a minute).
//
// Nothing is subscribed unless the first attempt finds the job running: a
// call that runs or is refused for another reason costs what Acquire does.
func (g *Gate) AcquireWait(ctx context.Context, job string, wait time.Duration) (*Lease, error) {
	if err := checkTenant(ctx); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	key, err := g.jobKey(job)
	if err != nil {
		return nil, err
	}
	if wait > 0 && !g.opts.Shadow {
		ctx = context.WithValue(ctx, waitsKey{}, true)
	}
	l, err := g.acquireOnce(ctx, job, key, nil)
	if err != nil && wait > 0 && !g.opts.Shadow {
		l, err = g.wait(ctx, job, key, l, err, deadline)
	}
	if b, ok := err.(*BlockedError); ok {
		// Answered once the job its acquire took is given back (one that
		// waits sent that beside its join; a duplicate in this process
		// shares its refusal): a caller that asks again finds it free.
		b.line.given(ctx)
	}
	g.refused(ctx, err)
	if g.opts.Shadow && err != nil {
		return g.shadowed(ctx, job, key, err)
	}
	return l, err
}

// jobKey returns job's lock key, or ErrInvalidJob. Every call that names
// a job (Acquire, Status, Reset, Watch) checks it here, where a job enters.
func (g *Gate) jobKey(job string) (string, error) {
	switch {
	case job == "":
		return "", fmt.Errorf("%w: empty", ErrInvalidJob)
	case len(job) > limits.MaxJobLen:
		return "", fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrInvalidJob, len(job), limits.MaxJobLen)
	}
	return keyspace.Job(g.opts.Prefix, job), nil
}

// acquire takes job in Redis.
func (g *Gate) acquire(ctx context.Context, job, key string, w *waiting) (*Lease, error) {
	gr := grant{job: job, key: key, token: store.NewToken(), tokens: tokensOf(ctx)}
	return g.acquireAs(ctx, gr, w, nil, time.Now())
}

// acquireAs is acquire for the grant gr; sent, when set, is its acquire
// sent already at sent (in a join to a line: inline.go).
func (g *Gate) acquireAs(ctx context.Context, gr grant, w *waiting, early *store.Acquire, sent time.Time) (*Lease, error) {
	job := gr.job
	switch b, err := g.take(ctx, &gr, w, early); {
	case b != nil:
		return nil, b
	case err != nil:
		return g.unreached(ctx, &gr, err)
	}
	l := &Lease{grant: gr, g: g, parent: ctx, start: sent, acquired: time.Now()}
	l.ctx, l.cancel = context.WithCancelCause(g.budgetContext(context.WithValue(ctx, leaseKey{}, l), l))
	// expires is read by merged callers (remaining) under l.mu.
	l.mu.Lock()
	l.expires = sent.Add(g.opts.Lease)
	l.timer = time.AfterFunc(min(g.renewEvery(), firstRenewal), l.renew)
	l.mu.Unlock()
	if g.obs != nil {
		// An Observer that panics here unwinds past the only holder of l:
		// the job is given back and its renewals stop, not left running
		// with nobody to run its call.
		told := false
		defer func() {
			if !told {
				rctx, cancel := g.opCtx(ctx)
				defer cancel()
				_ = l.Release(rctx)
			}
		}()
		c := callerOf(ctx)
		_, _, waited := turnOf(ctx)
		g.emit(ctx, Event{Kind: EventAcquired, Job: job, Upstream: l.Upstream(), State: Running, Fence: l.fence, Attempt: l.attempt,
			Budget: budgetOf(l.up.Left(), false), Priority: Priority(c.Class), Tenant: c.Tenant, Waited: waited})
		told = true
	}
	return l, nil
}

// take is the one acquire path. One round trip (Store.Acquire): the job's
// SET NX GET, its PTTL and Redis's TIME, with each upstream's GET and its
// budget's admission (on one node with budgets, one script judges them
// before it takes the job; on a cluster with budgets they are asked in a
// second trip, Store.Ask, once the job is taken, and not at all when its
// value refuses the call). Then, only where needed: the job's takeover
// script when its key holds a finished state (its history: the attempt
// count, the last failure), the probe's claim when an upstream's wait
// just ended, the call's reservation in the upstream that takes it when
// a cluster's acquire asked another. Whatever take returns
// other than nil, it leaves Redis as it found it (giveBack, one round
// trip): a job taken by a call every upstream refuses, or by a waiter
// whose run succeeded meanwhile, or whose replicas did not acknowledge it.
// A refusal is b, a failure err.
//
// early is the acquire sent already, in the caller's join to its line
// (store.Acquire.InTurn), nil for none: its script judged the upstreams.
func (g *Gate) take(ctx context.Context, l *grant, w *waiting, early *store.Acquire) (b *BlockedError, err error) {
	var a store.Acquire
	if early != nil {
		a = *early
	} else {
		switch ss, err := g.ups.PeekKnown(ctx, g.store); {
		case err != nil:
			return nil, err
		case ss != nil:
			return g.upstreamRefusal(l.job, ss), nil
		}
		a = g.acquireOf(ctx, l, w)
	}
	var (
		r      store.Acquired
		judged upstream.Judgement
	)
	err = g.store.Acquire(ctx, &a, &r)
	defer r.Close()
	defer func() {
		switch {
		case b == nil && err == nil:
		case r.Taken && b != nil && b.line != nil && waits(ctx):
			// The caller joins its upstream's line next: the give-back's
			// round trip runs beside the join's, which waits for it
			// (lineRefusal.given) before its turn takes the job again.
			lr := b.line
			lr.undone = make(chan struct{})
			go func() {
				defer close(lr.undone)
				g.giveBack(ctx, l, &r, judged)
			}()
		case r.Taken:
			g.giveBack(ctx, l, &r, judged)
		default:
			g.release(ctx, l, judged)
		}
	}()
	switch {
	case err != nil:
		return nil, err
	case w != nil && r.DoneToken == w.token:
		// The run this waiter waited for succeeded and freed the job.
		return &BlockedError{Job: l.job, State: Done}, nil
	}
	if !r.Unasked {
		if b = g.judge(ctx, l.job, &a, &r, &judged); b != nil {
			return b, nil
		}
	}
	if !r.Taken {
		if !r.Job.Over(r.Now) {
			return g.jobRefusal(l.job, &r), nil
		}
		// A finished state with its history: taken over by a script.
		if err = g.store.Takeover(ctx, &a, &r); err != nil {
			return nil, err
		}
		if !r.Taken {
			return g.jobRefusal(l.job, &r), nil
		}
	}
	if r.DoneToken != "" && g.opts.Retention.Done >= store.SuccessMemory {
		// A success left its token (Trip.MarkDone, sent before its
		// settle) within SuccessMemory, yet the job was free: its Done
		// mark did not reach Redis, the lease having ended first (a
		// Redis paused past it), and the run that succeeded writes it
		// again (unwritten.go). Not run twice meanwhile.
		return &BlockedError{Job: l.job, State: Done}, nil
	}
	if r.Unasked {
		// Where no one script reads the job and its upstreams (a
		// cluster with admissions, or a one-node script Redis refused):
		// the job is this call's, and only now are its upstreams asked
		// (Store.Acquire says why), so of its concurrent duplicates the
		// one that took it asks, and the others were refused by the job
		// without reserving anything.
		if err = g.store.Ask(ctx, &a, &r); err != nil {
			return nil, err
		}
		if b = g.judge(ctx, l.job, &a, &r, &judged); b != nil {
			return b, nil
		}
	}
	var refusal []upstream.Status
	if l.up, refusal, err = g.ups.Choose(ctx, g.store, l.token, judged); err != nil || refusal != nil {
		if refusal != nil {
			return g.upstreamRefusal(l.job, refusal), nil
		}
		return nil, err
	}
	l.fence = r.Fence
	l.hist = r.Job
	l.attempt = l.hist.Attempts + 1
	return nil, g.store.Replicate(ctx, &r)
}

// acquireOf is what take asks of Redis for the grant l (w: a waiter's).
func (g *Gate) acquireOf(ctx context.Context, l *grant, w *waiting) store.Acquire {
	turnOf, turn, _ := turnOf(ctx)
	a := store.Acquire{Key: l.key, Token: l.token, Upstreams: g.ups.Keys(), Admissions: g.ups.Admissions(l.token, l.tokens, turnOf, turn)}
	switch {
	case w != nil:
		a.Done = w.done
	case g.opts.Retention.Done >= store.SuccessMemory:
		a.Done = keyspace.Done(l.key)
	}
	return a
}

// judge judges the upstreams' answers to an acquire (r, to a): their
// refusal, or nil when one of them may take the call. judged keeps the
// judgement, whose reservation a refused acquire gives back.
func (g *Gate) judge(ctx context.Context, job string, a *store.Acquire, r *store.Acquired, judged *upstream.Judgement) *BlockedError {
	if r.AdmitErr != nil {
		// The breaker still judges; the budget did not, loudly.
		g.emit(ctx, Event{Kind: EventRedisError, Job: job, Op: redisop.Upstream, Err: redisError(ctx, "budget", r.AdmitErr)})
	}
	*judged = g.ups.Judge(r.Upstreams, a.Admissions, r.Admitted, r.Now)
	switch ss, refusing := judged.Refusal(); {
	case refusing && !r.Taken && !r.Untried && !r.Job.Over(r.Now):
		// A job held (its call running, its cooldown not over) is refused
		// by its own state, whatever its upstreams say: on one node the
		// script read it, elsewhere it was taken first.
		return g.jobRefusal(job, r)
	case refusing:
		// On one node the script refused exactly then (r.Untried): it reads
		// an upstream as this judgement does (upstream_value.lua), which
		// package upstream's TestUpstreamScriptsAgree holds to one table.
		return g.upstreamRefusal(job, ss)
	}
	return nil
}

// giveBack gives the job back as the acquire found it (its value and TTL
// before the SET NX or the takeover), the probe it claimed and the call it
// reserved in its upstream's budget, in one round trip.
func (g *Gate) giveBack(ctx context.Context, l *grant, r *store.Acquired, j upstream.Judgement) {
	rctx, cancel := g.opCtx(ctx)
	defer cancel()
	t := g.store.Trip()
	undo := t.Undo(rctx, l.key, l.token, r)
	unclaim := l.up.Unclaim(rctx, &t, l.token)
	release := j.Release(rctx, &t)
	t.Send(rctx)
	if uerr := release.Err(); uerr != nil {
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Upstream: l.up.Name(), Op: redisop.Upstream, Err: redisError(rctx, "budget", uerr)})
	}
	if uerr := undo.Err(); uerr != nil {
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Op: redisop.Undo, Err: redisError(rctx, "undo", uerr)})
	}
	if uerr := unclaim.Err(); uerr != nil {
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Upstream: l.up.Name(), Op: redisop.Upstream, Err: redisError(rctx, "upstream", uerr)})
	}
}

// jobRefusal refuses a call by the job's value.
func (g *Gate) jobRefusal(job string, r *store.Acquired) *BlockedError {
	v := r.Job
	b := &BlockedError{Job: job, State: stateAt(v, r.Now), Attempts: v.Attempts, Reason: v.Reason, Evidence: v.Evidence}
	if b.State == Ready {
		b.State = Running // the script holds what it cannot read
	}
	switch b.State {
	case Running:
		b.lease, b.RetryAfter = g.runningWait(v, r.Now, r.TTL, r.NoTTL)
		b.token = v.Token
	case CoolingDown:
		b.RetryAfter = g.retryIn(refuser{state: CoolingDown, left: v.Left(r.Now)})
	}
	return b
}
