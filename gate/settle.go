package gate

import (
	"context"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate/internal/upstream"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/redisop"
)

// settle records a run's end, once: decide what it means (decide.go), then
// write the job and its upstream in one round trip. A permanent failure
// asks its upstream first whether it is part of a wave (one more trip).
func (l *Lease) settle(ctx context.Context, out outcome, v classify.Verdict) (Result, error) {
	g := l.g
	l.mu.Lock()
	if l.settled {
		l.mu.Unlock()
		return Result{}, ErrAlreadySettled
	}
	l.settled = true
	lost := l.lost
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
	defer g.forget(l)
	if l.cancel != nil {
		defer l.cancel(context.Canceled)
	}
	if l.ungated {
		return Result{State: Ready, Verdict: v}, nil
	}
	if lost && !g.opts.ContinueOnLeaseLost {
		return Result{Verdict: v}, ErrLeaseLost
	}
	held := time.Since(l.start)

	// Detached from the caller, so a request that went away still records
	// its outcome; bounded when the client applies context deadlines.
	rctx := context.WithoutCancel(ctx)
	if g.store.Deadlines() {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(rctx, g.opts.Timeout)
		defer cancel()
	}

	in := decideIn{out: out, v: v, hist: l.hist, upstream: l.up.Guarded(), fallback: g.ups.Len() > 1}
	in.probe, in.level = l.up.Probe()
	if out == outFailure && v.ProviderWide {
		in.fits = l.budgetWait(v.RetryAfter)
	}
	waveStarted := false
	if out == outFailure && v.Class == classify.ClassPermanent {
		var err error
		in.wave, waveStarted, err = l.up.Wave(rctx, g.store, v.Reason, l.job)
		if err != nil {
			// No wave known: the failure is judged on its own.
			g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Upstream: l.up.Name(), Op: redisop.Upstream, Err: redisError("scope", err)})
		}
	}
	d := g.decide(in)

	l.writing.Wait() // an early budget write lands before the settle's
	t := g.store.Trip()
	if out == outSuccess {
		// For a waiter for this run, whatever DoneTTL is.
		t.MarkDone(rctx, keyspace.Done(g.opts.Prefix, l.job), l.token)
	}
	settled := t.Settle(rctx, l.key, l.token, l.fence, d.job.settlement())
	rec := l.up.Record(rctx, &t, d.upstream, l.token)
	budget := l.up.Budget(rctx, &t, &l.seen, time.Now())
	t.Send(rctx)
	if err := budget.Err(); err != nil {
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Upstream: l.up.Name(), Op: redisop.Upstream, Err: redisError("budget", err)})
	}

	res := Result{State: d.job.state, Attempts: d.job.attempts, Verdict: v}
	if d.job.state == CoolingDown {
		res.RetryAfter = d.job.ttl
	}
	res.Upstream = UpstreamStatus{Upstream: l.up.Name(), Scope: l.up.Name()}
	if d.upstream.Op != upstream.Keep {
		res.Upstream = l.recordUpstream(ctx, rctx, rec, v, waveStarted)
	}

	rep, err := settled.Result()
	if err != nil {
		werr := redisError("settle", err)
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Upstream: l.Upstream(), Op: redisop.Settle, Err: werr})
		if d.job.state == CoolingDown || d.job.state == Failed {
			// The failure is not in Redis: refuse the job here for the
			// cooldown it should have had, so no retry through this
			// process runs early; other processes see the lease's TTL.
			b := g.unwritten.add(l.job, d.job)
			g.emit(ctx, Event{Kind: EventWarning, Job: l.job, Upstream: l.Upstream(), State: d.job.state, Fence: l.fence, Attempt: l.attempt,
				Class: v.Class, Reason: WarnSettleUnwritten, Cooldown: b.RetryAfter, Err: werr})
		}
		return res, werr
	}
	if !rep.Owned {
		st := Ready
		if !rep.Gone {
			st = heldState(rep.Found)
		}
		g.emit(ctx, Event{Kind: EventSettled, Job: l.job, Upstream: l.Upstream(), State: st,
			Fence: l.fence, Attempt: l.attempt, Held: held, Err: ErrNotOwned})
		return res, ErrNotOwned
	}
	g.calls.add(held)
	l.mu.Lock()
	l.result = res
	l.mu.Unlock()
	g.emit(ctx, Event{Kind: EventSettled, Job: l.job, Upstream: l.Upstream(), State: res.State, Fence: l.fence, Attempt: l.attempt,
		Class: v.Class, Reason: v.Reason, Held: held, Cooldown: res.RetryAfter})
	return res, nil
}

// recordUpstream reads what the settle did to the run's upstream, sends
// its events, and returns the upstream's state after it.
func (l *Lease) recordUpstream(ctx, rctx context.Context, rec upstream.Record, v classify.Verdict, waveStarted bool) UpstreamStatus {
	g, name := l.g, l.up.Name()
	u, wrote, err := l.up.Recorded(rctx, g.store, rec, l.token)
	st := statusOf(u)
	if err != nil {
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Upstream: name, Op: redisop.Upstream, Err: redisError("scope", err)})
		return st
	}
	if wrote && g.obs != nil {
		kind := EventUpstreamCooling
		if st.State == UpstreamPaused {
			kind = EventUpstreamPaused
		}
		g.emit(ctx, Event{Kind: kind, Job: l.job, Upstream: name, State: UpstreamCooling, Class: v.Class, Reason: st.Reason, Cooldown: st.RetryAfter})
	}
	if waveStarted {
		g.emit(ctx, Event{Kind: EventWarning, Job: l.job, Upstream: name, State: UpstreamCooling, Class: v.Class,
			Reason: WarnPermanentWave, Cooldown: st.RetryAfter})
	}
	return st
}

// forget ends a settled lease's in-process life: merging, and the local
// waiters, woken without waiting for Redis's message.
func (g *Gate) forget(l *Lease) {
	g.flight.forget(l)
	g.hub.Local(l.key)
}
