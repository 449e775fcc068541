package gate

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// AcquireWait is Acquire with a wait budget for this call, overriding
// Options.Wait: if the job is running elsewhere it waits, at most wait,
// for that lease to settle, and then acquires the job if it is free or
// returns the refusal the settle left (ErrDone, ErrCoolingDown with the
// cooldown's true time left, ErrFailed, ErrUpstreamCooling). When wait
// ends first the refusal is ErrInFlight with the lease's time left; when
// ctx ends first the error is the context's. wait ≤ 0 does not wait.
// Once waiting, a Redis out of reach (a failover) does not end the wait:
// the waiter polls until its budget ends, and then returns ErrUnavailable
// (with FailOpen too: the job was running a moment ago).
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
	l, err := g.acquireNow(ctx, job)
	if wait <= 0 || !inFlight(err) {
		return l, err
	}
	return g.waitFor(ctx, job, time.Now().Add(wait))
}

// unreachable reports an acquire that could not reach Redis: an
// ErrUnavailable, or FailOpen's ungated lease.
func unreachable(l *Lease, err error) bool {
	return errors.Is(err, ErrUnavailable) || (l != nil && !l.Gated())
}

// inFlight reports a refusal because the job is running.
func inFlight(err error) bool {
	var b *BlockedError
	return errors.As(err, &b) && b.State == Running && b.Scope == ""
}

// Test hooks, nil outside tests: called after the first refusal (before
// subscribing) and after the subscription is confirmed (before the read).
var testHookRefused, testHookSubscribed func(job string)

// waitFor waits for job, refused as running, until deadline.
func (g *Gate) waitFor(ctx context.Context, job string, deadline time.Time) (*Lease, error) {
	if testHookRefused != nil {
		testHookRefused(job)
	}
	ln := g.hub.listen(g.jobKeys(job).lock)
	defer ln.close()
	poll := pollMin
	push := true
	var t *time.Timer
	for {
		left := time.Until(deadline)
		// A subscription that was not confirmed last time is waited for
		// no longer than a poll step: its owner is polling meanwhile.
		within := min(left, g.opts.Timeout)
		if !push {
			within = min(within, poll)
		}
		push = ln.ready(ctx, max(within, time.Millisecond))
		if testHookSubscribed != nil {
			testHookSubscribed(job)
		}
		l, err := g.acquireNow(ctx, job)
		if inFlight(err) {
			// The read may have joined another caller's acquire of the job
			// (in-process coalescing) sent before the subscription or the
			// wake, so its refusal may predate the settle. A refusal ends
			// coalescing, so this second read was sent after the first
			// returned: it sees any settle the first could have missed.
			l, err = g.acquireNow(ctx, job)
		}
		left = time.Until(deadline)
		down := unreachable(l, err) && ctx.Err() == nil
		if down && l != nil {
			// FailOpen's ungated lease: the job was running elsewhere a
			// moment ago, so do not run it blind; keep waiting.
			_ = l.Release(ctx)
			l, err = nil, fmt.Errorf("%w: acquire: Redis unreachable while waiting for a running job", ErrUnavailable)
		}
		if (!inFlight(err) && !down) || left <= 0 {
			return l, err
		}
		// A lease that expires publishes nothing: read again when it ends.
		// Redis out of reach (a failover): poll until the budget ends.
		ra, _ := RetryAfter(err)
		step := min(left, ra+time.Millisecond)
		if down {
			push = false
		}
		if push {
			poll = pollMin
		} else {
			step = min(step, poll)
			poll = min(2*poll, pollMax)
		}
		// go 1.23 timers: Reset drops a stale tick, no drain needed.
		if t == nil {
			t = time.NewTimer(step)
			defer t.Stop()
		} else {
			t.Reset(step)
		}
		select {
		case <-ln.wake:
		case <-t.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("gate: acquire: %w", context.Cause(ctx))
		}
	}
}
