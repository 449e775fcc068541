package gate

import (
	"context"
	"errors"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/gate/internal/upstream"
	"github.com/retrygate/retrygate/internal/code"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/redisop"
)

// recorded is what a settle recorded.
type recorded struct {
	// State is the job's state after the settle:
	//   - Ready or Done after a success;
	//   - Ready after a release, or CoolingDown after a cancelled call
	//     with Backoff.Canceled;
	//   - CoolingDown or Failed after a failure;
	//   - Ready after a provider-wide failure while another upstream is
	//     ready.
	State State
	// RetryAfter is the cooldown set (0 unless CoolingDown).
	RetryAfter time.Duration
	// Attempts counts failures since the last success.
	Attempts int
	// Verdict is the classification of the failure (zero on success).
	Verdict classify.Verdict
	// Upstream is the state of the run's upstream after the settle.
	Upstream UpstreamStatus
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

// Succeed releases the lock and resets the attempt count. With
// Retention.Done it keeps the job Done instead of releasing it. ctx only
// carries values. The write runs on a detached context bounded by
// Options.Redis.Timeout.
func (l *Lease) Succeed(ctx context.Context) error {
	_, err := l.settle(ctx, outSuccess, classify.Verdict{})
	return err
}

// Release frees the lock with no cooldown and no attempt counted. Use it
// when the call did not reach the model, or its failure was not the job's
// (a client's bad request). A released probe of the upstream gives the
// probe to the next call.
func (l *Lease) Release(ctx context.Context) error {
	_, err := l.settle(ctx, outRelease, classify.Verdict{Class: classify.ClassCanceled, Reason: classify.ReasonCanceled})
	return err
}

// Settle records the outcome of a call that returned err, as Do does. It
// is the one verb an adapter needs after Acquire. It returns what Do would
// return:
//   - after a success, nil, or ErrLeaseLost or ErrNotOwned when a newer
//     owner may have run meanwhile;
//   - for an error, a *CallError wrapping it that says what the gate did
//     (State, RetryAfter, SettleErr).
func (l *Lease) Settle(ctx context.Context, err error) error {
	if err != nil {
		return l.failError(ctx, err)
	}
	serr := l.Succeed(ctx)
	if errors.Is(serr, ErrLeaseLost) || errors.Is(serr, ErrNotOwned) {
		return serr
	}
	// A success whose settle could not reach Redis stays a success. With
	// Retention.Done it is kept Done here and written again (unwritten.go).
	// Else the lock expires with the lease. The observer saw the error.
	return nil
}

// Fail classifies err with Options.Classify and records the outcome. The
// outcome is a cooldown or a failed mark. When the acquiring context was
// cancelled, it is a release. Fail returns nil when the outcome was
// recorded. Else it returns ErrLeaseLost, ErrNotOwned, ErrAlreadySettled
// or an ErrUnavailable. If Redis cannot be reached, the lock's own TTL is
// the cooldown: a failure never leads to an immediate free retry.
func (l *Lease) Fail(ctx context.Context, err error) error {
	out, v := l.g.verdict(l.parent, err)
	_, serr := l.settle(ctx, out, v)
	return serr
}

// failError settles a failure and builds the error Do returns.
func (l *Lease) failError(ctx context.Context, ferr error) error {
	out, v := l.g.verdict(l.parent, ferr)
	res, serr := l.settle(ctx, out, v)
	ce := &CallError{Job: l.job, Verdict: v, State: res.State, RetryAfter: res.RetryAfter,
		Attempts: res.Attempts, Fence: l.fence, Err: ferr, SettleErr: serr}
	if serr != nil {
		// Not written: the lock's own TTL, at most a lease, is the
		// cooldown.
		ce.State, ce.RetryAfter = Running, l.g.opts.Lease
	}
	return ce
}

var panicVerdict = classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonPanic, Evidence: "go:panic"}

// verdict classifies err. A "canceled" verdict is the caller giving up
// only when the caller's own context was cancelled. Otherwise it is a
// transient failure. A custom classifier may panic, or return a verdict
// no code can build. It then gets a transient "unknown" verdict, or a
// cleaned one.
func (g *Gate) verdict(parent context.Context, err error) (out outcome, v classify.Verdict) {
	defer func() {
		if r := recover(); r != nil { // a custom classifier must not crash the settle
			out, v = outFailure, classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonUnknown}
		}
	}()
	v = g.opts.Classify(err)
	if v.Class == classify.ClassCanceled && errors.Is(parent.Err(), context.Canceled) {
		return outCanceled, classify.Verdict{Class: classify.ClassCanceled, Reason: classify.ReasonCanceled}
	}
	if v.Class >= classify.ClassCanceled {
		v.Class = classify.ClassTransient
	}
	if !code.Reason(v.Reason) {
		v.Reason = classify.ReasonUnknown
	}
	if v.Evidence != "" && !code.Evidence(v.Evidence) {
		v.Evidence = ""
	}
	if v.Class != classify.ClassPermanent {
		v.Suspect = false
	}
	v.RetryAfter = min(max(v.RetryAfter, 0), classify.MaxHint)
	return outFailure, v
}

// settle records a run's end, once. It decides what the end means
// (decide.go). Then it writes the job and its upstream in one round trip.
// A permanent failure first asks its upstream whether it is part of a
// wave, in one more trip.
func (l *Lease) settle(ctx context.Context, out outcome, v classify.Verdict) (recorded, error) {
	g := l.g
	l.mu.Lock()
	if l.settled {
		l.mu.Unlock()
		return recorded{}, ErrAlreadySettled
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
		return recorded{State: Ready, Verdict: v}, nil
	}
	if lost && !g.opts.Redis.ContinueOnLeaseLost {
		return recorded{Verdict: v}, ErrLeaseLost
	}
	held := time.Since(l.start)

	// Detached from the caller, so a request that went away still records
	// its outcome. Bounded when the client applies context deadlines.
	rctx := context.WithoutCancel(ctx)
	if g.store.Deadlines() {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeoutCause(rctx, g.opts.Redis.Timeout, errRedisTimeout)
		defer cancel()
	}

	in := decideIn{out: out, v: v, hist: l.hist, upstream: l.up.Guarded(), fallback: g.ups.Len() > 1}
	in.probe, in.level = l.up.Probe()
	if out == outFailure && v.ProviderWide {
		in.fits = l.budgetWait(v.RetryAfter)
		if _, rate, _ := teaches(out, v); rate && in.fits <= 0 && v.RetryAfter <= 0 && l.up.Learned() && l.up.Learns(&l.seen) {
			// Here a 429 reports no budget and states no wait. Its call
			// was admitted by a rate learned from the provider's answers.
			// The 429 cuts that rate (Budget's lesson, below), and the
			// rate judges the retries. The upstream cools for one call's
			// length, then one call probes.
			in.fits = g.calls.estimate()
			if in.fits <= 0 {
				in.fits = max(held, time.Millisecond) // no call's length known yet but this one's
			}
		}
	}
	waveStarted := false
	if out == outFailure && v.Class == classify.ClassPermanent {
		var err error
		in.wave, waveStarted, err = l.up.Wave(rctx, g.store, v.Reason, l.job)
		if err != nil {
			// No wave known: the failure is judged on its own.
			g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Upstream: l.up.Name(), Op: redisop.Upstream, Err: redisError(rctx, "upstream", err)})
		}
	}
	d := g.opts.decide(in)
	if out == outFailure && v.ProviderWide && v.Class == classify.ClassTransient {
		var fitsAt time.Time
		if d.fits > 0 {
			fitsAt = time.Now().Add(d.fits)
		}
		l.seen.Refused(fitsAt, l.tokens)
	}

	l.writing.Wait() // an early budget write lands before the settle's
	g.calls.add(held)
	t := g.store.Trip()
	if out == outSuccess {
		// For a waiter for this run, whatever Retention.Done is.
		t.MarkDone(rctx, keyspace.Done(l.key), l.token, l.fence)
	}
	settled := t.Settle(rctx, l.key, l.token, l.fence, d.job.settlement())
	d.upstream.Job = l.job
	rec := l.up.Record(rctx, &t, d.upstream, l.token)
	var lesson store.Lesson
	if a, _, ok := teaches(out, v); ok && !g.opts.UpstreamPolicy.IgnoreBudget {
		lesson = store.Lesson{Teach: true, Answer: a, Ran: held, Keep: learnKeep}
	}
	budget := l.up.Budget(rctx, &t, &l.seen, time.Now(), lesson)
	if q := g.lineNamed(l.up.Name()); q != nil && (l.up.Reserved() || in.probe) && givesTurns(d.upstream.Op) {
		// The call's reservation is released, or its probe settled. The
		// calls that now fit go to callers waiting in line. This is in
		// the same round trip.
		q.give(rctx, &t, nil, false)
	}
	// The call durations go out with the settle. They come back as every
	// process's. So any process can tell a duplicate when a running call
	// ends (estimate.go), without a round trip of its own.
	calls := t.RecordCalls(rctx, keyspace.Calls(g.opts.Prefix, g.opts.Upstream), g.calls.takeUnsent(), callSamples)
	t.Send(rctx)
	g.sharedCalls(calls)
	if err := budget.Err(); err != nil {
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Upstream: l.up.Name(), Op: redisop.Upstream, Err: redisError(rctx, "budget", err)})
	}

	res := recorded{State: d.job.state, Attempts: d.job.attempts, Verdict: v}
	if d.job.state == CoolingDown {
		res.RetryAfter = d.job.ttl
	}
	res.Upstream = UpstreamStatus{Upstream: l.up.Name()}
	if d.upstream.Op != upstream.Keep {
		res.Upstream = l.recordUpstream(ctx, rctx, rec, v, waveStarted)
	}

	rep, err := settled.Result()
	if err == nil && rep.Gone && (d.job.state == CoolingDown || d.job.state == Failed) {
		// The lease ended in Redis before the failure reached it. The
		// failure is still written, unless a newer run's success or a
		// reset is remembered. It is not written either when it is too
		// late for that memory to tell (store.Trip.SettleGone).
		l.mu.Lock()
		stale := store.StaleAfter(l.fence, l.acquired, l.expires)
		l.mu.Unlock()
		t := g.store.Trip()
		settled = t.SettleGone(rctx, l.key, keyspace.Done(l.key), l.token, l.fence, stale, d.job.settlement())
		t.Send(rctx)
		rep, err = settled.Result()
	}
	if err != nil {
		werr := redisError(rctx, "settle", err)
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Upstream: l.Upstream(), Op: redisop.Settle, Err: werr})
		if d.job.state == CoolingDown || d.job.state == Failed || d.job.state == Done {
			// The outcome is not in Redis. Refuse the job here for the
			// cooldown, failed or done mark it should have had. So no
			// retry through this process runs early, nor a success twice.
			// Other processes see the lease's TTL. A success is written
			// again meanwhile.
			f := g.unwritten.add(d.job.refusal(l.job), d.job.ttl)
			g.emit(ctx, Event{Kind: EventWarning, Job: l.job, Upstream: l.Upstream(), State: d.job.state, Fence: l.fence, Attempt: l.attempt,
				Class: v.Class, Reason: WarnSettleUnwritten, Cooldown: g.retryIn(refuser{state: d.job.state, left: d.job.ttl}), Err: werr})
			if d.job.state == Done {
				g.rewriting.Add(1)
				go l.rewrite(ctx, f, d.job, held)
			}
		}
		return res, werr
	}
	if !rep.Owned {
		st := Ready
		if !rep.Gone {
			st = kindState(rep.Found)
		}
		g.emit(ctx, Event{Kind: EventSettled, Job: l.job, Upstream: l.Upstream(), State: st,
			Fence: l.fence, Attempt: l.attempt, Held: held, Err: ErrNotOwned})
		if d.job.state == Done && !lost && (rep.Gone || unrenewed(rep.Found)) {
			// The lease ended in Redis before the success reached it (a
			// Redis paused past the lease). Either nothing recorded it, or
			// an acquire took the job whose caller may have given up. The
			// success is kept and written as an unwritten success is.
			f := g.unwritten.add(d.job.refusal(l.job), d.job.ttl)
			g.rewriting.Add(1)
			go l.rewrite(ctx, f, d.job, held)
		}
		return res, ErrNotOwned
	}
	g.emit(ctx, Event{Kind: EventSettled, Job: l.job, Upstream: l.Upstream(), State: res.State, Fence: l.fence, Attempt: l.attempt,
		Class: v.Class, Reason: v.Reason, Held: held, Cooldown: res.RetryAfter})
	return res, nil
}

// recordUpstream reads what the settle did to the run's upstream. It sends
// its events and returns the upstream's state after the settle.
func (l *Lease) recordUpstream(ctx, rctx context.Context, rec upstream.Record, v classify.Verdict, waveStarted bool) UpstreamStatus {
	g, name := l.g, l.up.Name()
	u, wrote, err := l.up.Recorded(rctx, g.store, rec, l.token)
	st := statusOf(u)
	if err != nil {
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Upstream: name, Op: redisop.Upstream, Err: redisError(rctx, "upstream", err)})
		return st
	}
	if wrote && g.obs != nil {
		kind := EventUpstreamCooling
		if st.State == Paused {
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
// waiters. It wakes them without waiting for Redis's message.
func (g *Gate) forget(l *Lease) {
	g.flight.forget(l)
	g.hub.Local(l.key)
}
