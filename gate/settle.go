package gate

import (
	"context"
	"time"

	"github.com/retrygate/retrygate/classify"
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

	in := decideIn{out: out, v: v, hist: l.hist, upstream: l.up != nil, probe: l.probe, level: l.level,
		fallback: len(g.breakers) > 1}
	waveStarted := false
	if out == outFailure && v.Class == classify.ClassPermanent && l.up != nil {
		var err error
		in.wave, waveStarted, err = l.up.wave(rctx, g.store, v.Reason, l.job)
		if err != nil {
			// No wave known: the failure is judged on its own.
			g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Scope: l.up.name, Op: redisop.Scope, Err: redisError("scope", err)})
		}
	}
	d := g.decide(in)

	t := g.store.Trip()
	if out == outSuccess {
		// For a waiter for this run, whatever DoneTTL is.
		t.MarkDone(rctx, keyspace.Done(g.opts.Prefix, l.job), l.token)
	}
	settled := t.Settle(rctx, l.key, l.token, l.fence, d.job.settlement())
	var rec record
	if l.up != nil {
		rec = l.up.queue(rctx, &t, d.scope, l.token)
	}
	t.Send(rctx)

	res := Result{State: d.job.state, Attempts: d.job.attempts, Verdict: v}
	if d.job.state == CoolingDown {
		res.RetryAfter = d.job.ttl
	}
	if d.scope.op != scopeNone && l.up != nil {
		res.Upstream = l.recordUpstream(ctx, rctx, rec, v, waveStarted)
	} else if l.up != nil {
		res.Upstream.Scope = l.up.name
	}

	rep, err := settled.Result()
	if err != nil {
		werr := redisError("settle", err)
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Scope: l.Scope(), Op: redisop.Settle, Err: werr})
		if d.job.state == CoolingDown || d.job.state == Failed {
			// The failure is not in Redis: refuse the job here for the
			// cooldown it should have had, so no retry through this
			// process runs early; other processes see the lease's TTL.
			b := g.unwritten.add(l.job, d.job)
			g.emit(ctx, Event{Kind: EventWarning, Job: l.job, Scope: l.Scope(), State: d.job.state, Fence: l.fence, Attempt: l.attempt,
				Class: v.Class, Reason: WarnSettleUnwritten, Cooldown: b.RetryAfter, Err: werr})
		}
		return res, werr
	}
	if !rep.Owned {
		st := Ready
		if !rep.Gone {
			st = heldState(rep.Found)
		}
		g.emit(ctx, Event{Kind: EventSettled, Job: l.job, Scope: l.Scope(), State: st,
			Fence: l.fence, Attempt: l.attempt, Held: held, Err: ErrNotOwned})
		return res, ErrNotOwned
	}
	g.calls.add(held)
	l.mu.Lock()
	l.result = res
	l.mu.Unlock()
	g.emit(ctx, Event{Kind: EventSettled, Job: l.job, Scope: l.Scope(), State: res.State, Fence: l.fence, Attempt: l.attempt,
		Class: v.Class, Reason: v.Reason, Held: held, Cooldown: res.RetryAfter})
	return res, nil
}

// recordUpstream reads what the settle did to the run's upstream, sends
// its events, and returns the upstream's state after it.
func (l *Lease) recordUpstream(ctx, rctx context.Context, rec record, v classify.Verdict, waveStarted bool) UpstreamStatus {
	g, b := l.g, l.up
	st := UpstreamStatus{Scope: b.name}
	tr, err := b.recorded(rctx, g.store, rec, l.token)
	if err != nil {
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Scope: b.name, Op: redisop.Scope, Err: redisError("scope", err)})
		return st
	}
	if tr.Present {
		st = refusedStatus(b.name, tr.Value, tr.Wait)
		// This process now knows: its next acquires only read.
		b.remember(st)
	}
	if tr.Wrote && g.obs != nil {
		kind := EventScopeCooling
		if st.State == ScopePaused {
			kind = EventScopePaused
		}
		g.emit(ctx, Event{Kind: kind, Job: l.job, Scope: b.name, State: UpstreamCooling, Class: v.Class, Reason: st.Reason, Cooldown: st.RetryAfter})
	}
	if waveStarted {
		g.emit(ctx, Event{Kind: EventWarning, Job: l.job, Scope: b.name, State: UpstreamCooling, Class: v.Class,
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
