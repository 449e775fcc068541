package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retrygate/retrygate/gate/internal/hub"
	"github.com/retrygate/retrygate/internal/keyspace"
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

// runningRefusal returns the refusal of a job that is running, nil otherwise.
func runningRefusal(err error) *BlockedError {
	b, ok := err.(*BlockedError) // acquireOnce returns refusals unwrapped
	if ok && b.State == Running {
		return b
	}
	return nil
}

// waitFor waits for job, refused as running the run holding token, until
// deadline. Each read also reads the job's done key, so the success of
// that run refuses it (ErrDone) even when Retention.Done is 0.
func (g *Gate) waitFor(ctx context.Context, job, token string, deadline time.Time) (*Lease, error) {
	if g.test.refused != nil {
		g.test.refused(job)
	}
	key := keyspace.Job(g.opts.Prefix, job) // checked by the first attempt
	w := &waiting{token: token, done: keyspace.Done(g.opts.Prefix, job)}
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
		l, err := g.acquireOnce(ctx, job, w)
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
		case <-ctx.Done():
			return nil, ctxError(ctx, "acquire")
		}
	}
}
