package gate

import (
	"context"
	"time"
)

// Status is a job's state as Redis holds it now.
type Status struct {
	Job   string
	State State
	// RetryAfter is how long until the job may run again: the cooldown's
	// or the running lease's time left. 0 for Ready, Failed and Done.
	RetryAfter time.Duration
	// Attempts counts failures since the last success.
	Attempts int
	// Reason is the classification code behind a cooldown or failed mark.
	Reason string
	// Fence is the last fencing token issued for the job (0 if forgotten).
	Fence int64
	// TTL is the lock key's time left in any state (how long a failed or
	// done mark is kept); 0 when Ready.
	TTL time.Duration
	// Upstream is the gate's scope; its State is ScopeOpen without a Scope.
	Upstream UpstreamStatus
}

// Status reads a job's state in one round trip (two in parallel on a
// cluster with a Scope). It never changes anything.
func (g *Gate) Status(ctx context.Context, job string) (Status, error) {
	if err := checkJob(job); err != nil {
		return Status{}, err
	}
	k := g.jobKeys(job)
	keys := k.both[:]

	var scopeCh chan scopeResult
	if g.scopeKey != "" {
		if g.oneNode {
			keys = append(keys, g.scopeKey)
		} else {
			scopeCh = make(chan scopeResult, 1)
			go func() {
				s, _, err := g.readScope(ctx, "")
				var r scopeResult
				r.err = err
				if s != nil {
					r.status = scopeStatusOf(s.value, s.pttl)
				}
				scopeCh <- r
			}()
		}
	}
	script := statusScript
	if len(keys) > 2 {
		script = statusScopeScript
	}
	st, err := g.decodeStatus(job, script.Run(ctx, g.rdb, keys))
	if scopeCh != nil {
		sr := <-scopeCh
		if sr.err != nil {
			return Status{}, redisError("scope status", sr.err)
		}
		st.Upstream = sr.status
		st.Upstream.Scope = g.opts.Scope
	}
	return st, err
}

// Reset clears a job's cooldown, failed or done mark and its attempt count,
// so the next call runs (operator action). A running job is left alone and
// Reset returns a *BlockedError matching ErrInFlight: its owner would lose
// fencing; wait for it to settle or for its lease to expire.
func (g *Gate) Reset(ctx context.Context, job string) error {
	if err := checkJob(job); err != nil {
		return err
	}
	k := g.jobKeys(job)
	v, err := g.scripts.reset.Run(ctx, g.rdb, k.both[:]).Slice()
	if err != nil {
		return redisError("reset", err)
	}
	if len(v) == 2 {
		if lv, ok := v[0].(string); ok {
			if st, _, _ := stateOf(lv); st == Running {
				p, _ := v[1].(int64)
				return &BlockedError{Job: job, State: Running, RetryAfter: pttl(p)}
			}
		}
	}
	return nil
}
