package gate

import (
	"context"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/redisop"
)

// renew is the heartbeat Acquire arms with time.AfterFunc. AfterFunc
// starts no goroutine until it fires, so a call shorter than Lease/3 costs
// none. renew extends the lease with a compare-token PEXPIRE and re-arms
// itself. The same round trip keeps the call's reservation in its
// upstream's budget. So a call longer than a lease stays counted while it
// runs.
//
// The lease is lost at once on a "not owned" reply. It is also lost when a
// renewal fails after the lock must have expired by the local clock. With
// renewals every Lease/3, that is the third failure in a row.
func (l *Lease) renew() {
	g := l.g
	l.mu.Lock()
	if l.settled || l.lost {
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()

	sent := time.Now()
	est, unsent := l.shareCalls()
	l.renewals++
	ctx, cancel := context.WithTimeoutCause(context.WithoutCancel(l.parent), min(g.renewEvery(), g.opts.Redis.Timeout), errRedisTimeout)
	t := g.store.Trip()
	renewed := t.Renew(ctx, l.key, l.token, l.fence, l.attempt-1, est)
	reserved := l.up.Renew(ctx, &t)
	var shared store.Reply[[]time.Duration]
	if len(unsent) > 0 {
		shared = t.RecordCalls(ctx, keyspace.Calls(g.opts.Prefix, g.opts.Upstream), unsent, callSamples)
	}
	t.Send(ctx)
	owned, err := renewed.Result()
	var werr error
	if err != nil {
		werr = redisError(ctx, "renew", err) // before cancel ends ctx
	}
	g.sharedCalls(shared)
	if rerr := reserved.Err(); rerr != nil {
		g.emit(l.parent, Event{Kind: EventRedisError, Job: l.job, Upstream: l.up.Name(), Op: redisop.Upstream, Err: redisError(ctx, "budget", rerr)})
	}
	cancel()

	var (
		events []Event
		lost   bool
	)
	l.mu.Lock()
	if l.settled || l.lost {
		l.mu.Unlock()
		return
	}
	switch {
	case err == nil && owned:
		l.expires = sent.Add(g.opts.Lease)
		l.estimate = est
		l.timer.Reset(l.nextRenewal(est))
		events = append(events, Event{Kind: EventRenewed, Job: l.job, State: Running, Fence: l.fence, Attempt: l.attempt})
	case err == nil:
		events = append(events, l.loseLocked(ErrNotOwned))
		lost = true
	default:
		events = append(events,
			Event{Kind: EventRenewed, Job: l.job, State: Running, Fence: l.fence, Attempt: l.attempt, Err: err},
			Event{Kind: EventRedisError, Job: l.job, Op: redisop.Renew, Err: werr})
		if !time.Now().Before(l.expires) {
			events = append(events, l.loseLocked(err))
			lost = true
		} else {
			l.timer.Reset(g.renewEvery())
		}
	}
	l.mu.Unlock()
	for _, e := range events {
		g.emit(l.parent, e)
	}
	// Cancel after reporting, so observers have seen the loss by the time
	// Do returns.
	if lost && !g.opts.Redis.ContinueOnLeaseLost {
		l.cancel(ErrLeaseLost)
	}
}

// nextRenewal is when the renewal after one that recorded est is sent. A
// first renewal may also have read the gate's calls. Where they moved this
// process's estimate by a second or more, the next renewal goes at once
// and records it. Else Status, Reset and every refusal would tell the
// job's duplicates a wait from calls the gate no longer sees until a
// third of a lease later. l.mu must be held.
func (l *Lease) nextRenewal(est time.Duration) time.Duration {
	if l.renewals == 1 {
		if d := l.g.calls.estimate() - est; d >= minRunningWait || d <= -minRunningWait {
			return 0
		}
	}
	return l.g.renewEvery()
}

// loseLocked marks the lease lost. The caller then cancels fn's context,
// unless Redis.ContinueOnLeaseLost. l.mu must be held.
func (l *Lease) loseLocked(cause error) Event {
	l.lost = true
	e := Event{Kind: EventLeaseLost, Job: l.job, State: Running, Fence: l.fence, Attempt: l.attempt, Err: cause}
	if !l.g.opts.Redis.ContinueOnLeaseLost {
		e.Held = time.Since(l.start) // no settle follows to report it
	}
	return e
}

// renewEvery is how often a lease is renewed: three times per lease. So a
// renewal may fail twice before the lease must have expired.
func (g *Gate) renewEvery() time.Duration { return g.opts.Lease / 3 }

// firstRenewal bounds when a lease is first renewed. A lease taken on a
// free key records its fence in Redis then (job_renew.lua). So Status
// shows the fence within a second of the call's start. A call shorter
// than that renews nothing.
const firstRenewal = time.Second

// shareCalls runs in a renewal, before its trip. It returns the estimate
// the renewal records in the job's value. It also returns the durations to
// send with it, newest first. This Gate may know too few calls to
// estimate at a lease's first renewal. Then shareCalls first sends them
// and reads the gate's in a trip of its own. So a fresh process's first
// run records the gate's estimate.
func (l *Lease) shareCalls() (time.Duration, []time.Duration) {
	g := l.g
	unsent := g.calls.takeUnsent()
	if est := g.calls.estimate(); est > 0 || l.renewals > 0 {
		return est, unsent
	}
	ctx, cancel := context.WithTimeoutCause(context.WithoutCancel(l.parent), min(g.renewEvery(), g.opts.Redis.Timeout), errRedisTimeout)
	defer cancel()
	t := g.store.Trip()
	rec := t.RecordCalls(ctx, keyspace.Calls(g.opts.Prefix, g.opts.Upstream), unsent, callSamples)
	t.Send(ctx)
	if ds, err := rec.Result(); err == nil {
		g.calls.set(ds)
		unsent = nil
	}
	return g.calls.estimate(), unsent
}

// sharedCalls reads what a renewal's trip read of the gate's calls.
func (g *Gate) sharedCalls(rec store.Reply[[]time.Duration]) {
	if ds, err := rec.Result(); err == nil {
		g.calls.set(ds)
	}
}
