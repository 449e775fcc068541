package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/retrygate/retrygate/gate/internal/hub"
	"github.com/retrygate/retrygate/gate/internal/line"
	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/redisop"
)

// refused sends a call's refusal event: one per call, however many steps
// its wait took.
func (g *Gate) refused(ctx context.Context, err error) {
	if g.obs == nil {
		return
	}
	var b *BlockedError
	if !errors.As(err, &b) {
		return
	}
	c := callerOf(ctx)
	e := Event{Kind: EventRefused, Job: b.Job, State: b.State, Reason: b.Reason, Attempt: b.Attempts, Cooldown: b.RetryAfter, Local: b.local,
		Priority: Priority(c.Class), Tenant: c.Tenant, Waited: b.waited}
	if b.State == UpstreamCooling {
		u := nextUpstream(b.Upstreams)
		e.Upstream, e.Budget = u.Upstream, u.Budget
	}
	g.emit(ctx, e)
}

// redisDown reports an acquire that could not reach Redis: an
// ErrUnavailable, or Redis.FailOpen's ungated lease.
func redisDown(l *Lease, err error) bool {
	return errors.Is(err, ErrUnavailable) || (l != nil && !l.Gated())
}

// waiting is what a waiter's acquire reads beside the job (wait.go): the
// token of the run it waits for, and the job's done key, where that run's
// success leaves its token.
type waiting struct {
	token, done string
}

// acquireOnce is one attempt to take job, merged with the other calls of
// the job in this process (flight.go). w is set for a waiter. It sends no
// refusal event: the caller sends one per call (refused).
//
// Its cost in Redis round trips:
//   - One, usually: the job's commands on its node (PTTL, SET NX GET, TIME,
//     then job_fence.lua, which records the fence of a job taken on a free
//     key beside its token, so Status tells it; a GET of the done key with a Retention.Done of 10 s or more, so a success
//     Redis did not record yet is refused as done), with each upstream's
//     state and budget admission in the same trip. On one node with
//     budgets that trip is one script, which judges the upstreams before
//     it takes the job, so their refusal writes nothing.
//   - On a cluster with budgets: one when the job's value refuses the call
//     (a duplicate of a running job; nothing is reserved), two when it
//     runs: the job is taken first and its upstreams asked once it is the
//     call's (Store.Acquire), so of concurrent duplicates exactly one
//     asks and the others are told ErrInFlight. One more for each of the
//     cases below, and three when every upstream refuses and this process
//     did not know it (take, ask, give back).
//   - Two, when the key holds a finished state with history (a script
//     takes it over), when an upstream's wait has just ended (this call
//     claims its probe), on a cluster when another upstream than the one
//     asked must reserve the call, or when every upstream refuses and
//     this process did not know it (the job is given back).
//   - While this process knows every upstream refuses: one read, nothing
//     written.
//   - When Redis refuses the write (OOM, READONLY): a second trip reads
//     the job with commands that write nothing, so a known job keeps its
//     refusal and only a free one fails closed (ErrRedisRefused).
//
// Concurrent calls of one job in one process share one round trip. key
// is the job's key (jobKey).
func (g *Gate) acquireOnce(ctx context.Context, job, key string, w *waiting) (l *Lease, err error) {
	if b, left := g.unwritten.refusal(job); b != nil {
		b.RetryAfter = g.retryIn(refuser{state: b.State, left: left})
		return nil, b
	}
	p, err := g.flight.lead(ctx, job, w != nil, g.retryIn)
	if p == nil {
		return nil, err
	}
	// Resolved on every way out, a panic too (an Observer's): the calls
	// merged behind p are answered, and the job's next call leads.
	defer func() { g.flight.resolve(job, p, l, err) }()
	return g.acquire(ctx, job, key, w)
}

// runningRefusal returns the refusal of a job that is running, nil otherwise.
func runningRefusal(err error) *BlockedError {
	b, ok := err.(*BlockedError) // acquireOnce returns refusals unwrapped
	if ok && b.State == Running {
		return b
	}
	return nil
}

// wait is AcquireWait's one door, for a call refused (l, err: its first
// attempt's answer) whose caller can wait until deadline: a job running
// elsewhere is waited for (waitRunning); a call its upstream's budget
// refuses waits in that upstream's line for its turn (waitInLine), also
// when the run waited for left the budget short.
//
// The caller is answered by its deadline whatever Redis takes: the wait's
// steps end there, but a round trip sent just before it (a turn's
// acquire, a join) ends when Redis answers, and go-redis bounds it only
// by its read timeout. So the steps run on their own and the caller is
// told the latest refusal at the deadline (or when ctx ends); a lease
// the steps take after that is released.
func (g *Gate) wait(ctx context.Context, job, key string, l *Lease, err error, deadline time.Time) (*Lease, error) {
	last := &latest{}
	last.set(err)
	ch := make(chan acquiredOr, 1)
	go func() {
		l, err := g.waitSteps(ctx, job, key, l, err, deadline, last)
		ch <- acquiredOr{l, err}
	}()
	t := time.NewTimer(time.Until(deadline) + answerSlack)
	defer t.Stop()
	var out error
	select {
	case a := <-ch:
		return a.l, a.err
	case <-t.C:
		out = err // (a step that refused nothing yet: the first answer)
		if d := last.unreachable(); d != nil {
			out = d
		} else if b := last.refusal(time.Now()); b != nil {
			out = b
		}
	case <-ctx.Done():
		out = ctxError(ctx, "acquire")
	}
	go func() {
		if a := <-ch; a.l != nil {
			rctx, cancel := g.opCtx(ctx)
			defer cancel()
			_ = a.l.Release(rctx)
		}
	}()
	return nil, out
}

// answerSlack is how long after the deadline a wait's own steps may
// answer before wait answers for them: they end at the deadline, and
// answer then unless a round trip holds them.
const answerSlack = 10 * time.Millisecond

// acquiredOr is a wait's answer.
type acquiredOr struct {
	l   *Lease
	err error
}

// latest is the latest refusal a wait's steps read, with when, for wait
// to answer with at the deadline, and whether a read since found Redis
// unreachable (then that is the answer, not the refusal read before).
type latest struct {
	mu    sync.Mutex
	b     BlockedError
	at    time.Time
	begun time.Time
	down  error
}

// set keeps err when it is a refusal or says Redis is unreachable.
func (r *latest) set(err error) {
	b, ok := err.(*BlockedError) // the steps' refusals come unwrapped
	if !ok {
		if errors.Is(err, ErrUnavailable) {
			r.mu.Lock()
			r.down = err
			r.mu.Unlock()
		}
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = nil
	if r.begun.IsZero() {
		r.begun = time.Now()
	}
	r.b, r.at = *b, time.Now()
}

// unreachable is the error of the latest read when it found Redis
// unreachable, nil when a refusal was read since or none was.
func (r *latest) unreachable() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.down
}

// refusal is the latest refusal as it stands at now, nil for none: its
// wait as read (a running job's floors at a young call's, which a read
// now would tell again), one refill for a caller whose turn did not come
// (as waitInLine tells it).
func (r *latest) refusal(now time.Time) *BlockedError {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at.IsZero() {
		return nil
	}
	b := r.b
	if b.line != nil {
		b.waitInLine(max(b.line.gap, time.Millisecond))
		b.waited = now.Sub(r.begun)
	}
	return &b
}

// waitSteps waits as wait says, keeping its latest refusal in last.
func (g *Gate) waitSteps(ctx context.Context, job, key string, l *Lease, err error, deadline time.Time, last *latest) (*Lease, error) {
	if b := runningRefusal(err); b != nil {
		l, err = g.waitRunning(ctx, job, key, b.token, deadline, last)
		last.set(err)
	}
	if b, q := g.budgetRefusal(err); b != nil && time.Now().Before(deadline) {
		l, err = g.waitInLine(ctx, job, key, b, q, deadline, last)
	}
	return l, err
}

// waitRunning waits for job, refused as running the run holding token,
// until deadline. Each read also reads the job's done key, so the success
// of that run refuses it (ErrDone) even when Retention.Done is 0.
func (g *Gate) waitRunning(ctx context.Context, job, key, token string, deadline time.Time, last *latest) (*Lease, error) {
	if g.test.refused != nil {
		g.test.refused(job)
	}
	w := &waiting{token: token, done: keyspace.Done(key)}
	ln := g.hub.Listen(key)
	defer ln.Close()
	poll := hub.PollMin
	push := true
	var t *time.Timer
	for {
		left := time.Until(deadline)
		// A subscription that was not confirmed last time is waited for
		// no longer than a poll step: its owner is polling meanwhile.
		within := min(left, g.opts.Redis.Timeout)
		if !push {
			within = min(within, poll)
		}
		push = ln.Ready(ctx, max(within, time.Millisecond))
		if g.test.subscribed != nil {
			g.test.subscribed(job)
		}
		// A waiter never follows an acquire of the job already in flight
		// in this process (its refusal may predate the wake): acquireOnce
		// reads again itself.
		l, err := g.acquireOnce(ctx, job, key, w)
		left = time.Until(deadline)
		down := redisDown(l, err) && ctx.Err() == nil
		if down && l != nil {
			// Redis.FailOpen's ungated lease: the job was running elsewhere a
			// moment ago, so do not run it blind; keep waiting.
			_ = l.Release(ctx)
			l, err = nil, fmt.Errorf("%w: acquire: Redis unreachable while waiting for a running job", ErrUnavailable)
		}
		b := runningRefusal(err)
		if (b == nil && !down) || left <= 0 {
			return l, err
		}
		last.set(err)
		if b != nil && b.token != "" {
			w.token = b.token // the run waited for was lost and another took over
		}
		// A lease that expires publishes nothing: read again when it ends
		// (not at the estimate of its call, which the settle's message
		// beats). Redis out of reach (a failover): poll until the budget
		// ends.
		step := left
		if b != nil {
			step = min(left, b.lease+time.Millisecond)
		}
		if down {
			push = false
		}
		if push {
			poll = hub.PollMin
		} else {
			step = min(step, poll)
			poll = min(2*poll, hub.PollMax)
		}
		// go 1.23 timers: Reset drops a stale tick, no drain needed.
		if t == nil {
			t = time.NewTimer(step)
			defer t.Stop()
		} else {
			t.Reset(step)
		}
		select {
		case <-ln.Wake():
		case <-t.C:
			if step == left && b != nil {
				// The deadline, before the lease ends: only a settle could
				// tell more, and its message would have woken the wait.
				// Answered now, not after one more round trip.
				return nil, last.refusal(time.Now())
			}
		case <-ctx.Done():
			return nil, ctxError(ctx, "acquire")
		}
	}
}

// budgetRefusal returns the refusal of a call an upstream's budget with a
// line refused, nil otherwise.
func (g *Gate) budgetRefusal(err error) (*BlockedError, *inLine) {
	b, ok := err.(*BlockedError)
	if !ok || b.State != UpstreamCooling || b.line == nil {
		return nil, nil
	}
	q := g.lineOf(b.line.of)
	if q == nil {
		return nil, nil
	}
	return b, q
}

// waitInLine waits in the line of the upstream whose budget refused the
// call (b) until deadline, and acquires the job with its turn. A deadline
// the turn cannot meet is refused at once with the expected wait
// (BlockedError.Ahead); a caller is never answered with a lease past its
// deadline.
func (g *Gate) waitInLine(ctx context.Context, job, key string, b *BlockedError, q *inLine, deadline time.Time, last *latest) (*Lease, error) {
	var waited time.Duration // in line, over every place it took
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c := callerOf(ctx)
	mark := q.mark(key)
	alone, done := q.solo(key)
	defer func() { done() }()
	for {
		rate := 0.0
		if b.line.gap > 0 {
			rate = float64(time.Second) / float64(b.line.gap)
		}
		// In line from the join's sending: a turn may come in its round
		// trip, taken there (inTurn) or collected.
		joined := time.Now()
		q.enter(ctx)
		it, then := q.inTurn(ctx, job, key, mark, alone)
		t, err := q.line.JoinMarked(ctx, c, deadline, rate, mark, then)
		b.line.given(ctx) // beside the join: nothing waits for it after
		early, took := it.take(ctx, q, t, err, waited+time.Since(joined))
		if err != nil {
			q.leave()
			var long *line.TooLongError
			switch {
			case errors.As(err, &long):
				// Its turn, at the line's rate (the refusal's own wait counts
				// the turns told to callers that could not wait).
				b.Ahead = long.Ahead
				b.waitInLine(long.Wait)
			case ctx.Err() != nil:
				return nil, ctxError(ctx, "acquire")
			case !errors.Is(err, line.ErrDeadline):
				g.emit(ctx, Event{Kind: EventRedisError, Job: job, Upstream: q.name, Op: redisop.Upstream, Err: redisError(ctx, "line", err)})
			}
			b.waited = waited
			return nil, b
		}
		err = t.Wait(ctx)
		q.leave()
		waited += time.Since(joined)
		if err != nil {
			if early.l != nil {
				go func() {
					rctx, cancel := g.opCtx(ctx)
					defer cancel()
					_ = early.l.Release(rctx)
				}()
			}
			if ctx.Err() != nil {
				return nil, ctxError(ctx, "acquire")
			}
			// Its deadline passed in line (turns went to higher classes and
			// less served tenants): the refusal's wait, from before it
			// joined, is stale; asked again after one refill, it is told
			// the line's wait then, or joins.
			b.waited = waited
			b.waitInLine(max(b.line.gap, time.Millisecond))
			return nil, b
		}
		l, err := early.l, early.err
		if !took {
			tctx := context.WithValue(ctx, turnKey{}, turn{of: q.of, member: store.TurnMember(t.Member()), waited: waited})
			l, err = g.acquireOnce(tctx, job, key, nil)
		}
		if err == nil && !time.Now().Before(deadline) {
			// Acquired as the deadline passed: given back, not answered late
			// (nor after the release's round trip); the call fits now, so it
			// may ask again at once.
			go func() {
				rctx, cancel := g.opCtx(ctx)
				defer cancel()
				_ = l.Release(rctx)
			}()
			b.waited = waited
			b.waitInLine(max(b.line.gap, time.Millisecond))
			return nil, b
		}
		nb, nq := g.budgetRefusal(err)
		if nb == nil || nq == nil || !time.Now().Before(deadline) {
			if nb != nil {
				nb.waited = waited
			}
			return l, err
		}
		if nq != q {
			mark = nq.mark(key)
			done()
			alone, done = nq.solo(key)
		}
		last.set(nb)
		b, q = nb, nq // the turn's call no longer fits: in line again
	}
}
