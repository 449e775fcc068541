package gate

import (
	"context"
	"time"

	"github.com/retrygate/retrygate/internal/keyspace"
)

// Status is a job's state as Redis holds it now. A Status returned with an
// error has State Unknown.
type Status struct {
	Job   string
	State State
	// RetryAfter is how long until the job may run again: the cooldown's
	// time left, or for a running job the estimate of when its call ends
	// (see Acquire). 0 for Ready, Failed and Done.
	RetryAfter time.Duration
	// Attempts counts failures since the last success.
	Attempts int
	// Reason is the classification code of the job's last failure: behind
	// a cooldown or failed mark, and still after a cooldown ended (Ready),
	// until the attempt count is forgotten or the job succeeds.
	Reason string
	// Evidence names the signal that decided that failure's verdict
	// (classify.Verdict.Evidence): the answer to "why is this job Failed?".
	Evidence string
	// Fence is the last fencing token issued for the job (0 if forgotten).
	Fence int64
	// TTL is how long the state lasts: a lease's, cooldown's, failed or
	// done mark's time left; 0 when Ready.
	TTL time.Duration
	// Upstream is the upstream the job's next call would use: the first of
	// Upstreams that is ready, else the one that recovers soonest. Its State
	// is Ready with UpstreamPolicy.Off.
	Upstream UpstreamStatus
	// Upstreams holds each of the gate's upstreams, in order
	// (Options.Upstream, then Fallbacks); nil with UpstreamPolicy.Off.
	Upstreams []UpstreamStatus
	// InLine reports that the job's caller waits in its upstream's line,
	// in any process. Ahead is then how many callers are ahead of it (0:
	// it is next), and RetryAfter the expected wait for its turn.
	InLine bool
	Ahead  int
}

// Status reads a job's state and its upstreams' in one round trip. It
// never changes anything.
func (g *Gate) Status(ctx context.Context, job string) (Status, error) {
	key, err := g.jobKey(job)
	if err != nil {
		return Status{}, err
	}
	t := g.store.Trip()
	read := t.ReadJob(ctx, key)
	peeks := g.ups.Peek(ctx, &t)
	places := g.placeOf(ctx, &t, key)
	t.Send(ctx)
	r, err := read.Result()
	if err != nil {
		return Status{}, redisError(ctx, "status", err)
	}
	v := r.Job
	st := Status{Job: job, State: Ready, Attempts: v.Attempts, Reason: v.Reason, Evidence: v.Evidence, Fence: v.Fence}
	if r.Exists {
		st.State = stateAt(v, r.Now)
	}
	switch st.State {
	case Running:
		st.TTL, st.RetryAfter = g.runningWait(v, r.Now, r.TTL, r.NoTTL)
	case CoolingDown:
		st.TTL = v.Left(r.Now)
		st.RetryAfter = g.retryIn(refuser{state: CoolingDown, left: st.TTL})
	case Failed, Done:
		st.TTL = v.Left(r.Now)
	}
	ups, err := peeks.Judge()
	if err != nil {
		return Status{}, redisError(ctx, "status", err)
	}
	st.Upstreams = statusesOf(ups)
	st.Upstream = nextUpstream(st.Upstreams)
	for _, p := range places {
		pl, err := p.Result()
		if err != nil {
			return Status{}, redisError(ctx, "status", err)
		}
		if pl.Waiting && st.State == Ready {
			// Its caller waits in line: the turns ahead of it, and the
			// expected wait for its own.
			st.InLine, st.Ahead = true, int(pl.Ahead)
			st.RetryAfter = time.Duration(pl.Ahead+1) * pl.Gap
			break
		}
	}
	return st, nil
}

// Reset clears a job's cooldown, failed or done mark and its attempt count,
// so the next call runs (operator action). A running job is left alone and
// Reset returns a *BlockedError matching ErrInFlight: its owner would lose
// fencing; wait for it to settle or for its lease to expire.
func (g *Gate) Reset(ctx context.Context, job string) error {
	key, err := g.jobKey(job)
	if err != nil {
		return err
	}
	t := g.store.Trip()
	reset := t.ResetJob(ctx, key)
	t.ForgetDone(ctx, keyspace.Done(key))
	t.Send(ctx)
	r, err := reset.Result()
	if err != nil {
		return redisError(ctx, "reset", err)
	}
	if r.Running {
		_, wait := g.runningWait(r.Job, r.Now, r.TTL, r.NoTTL)
		return &BlockedError{Job: job, State: Running, Attempts: r.Job.Attempts, RetryAfter: wait}
	}
	g.unwritten.drop(job)
	return nil
}

// Upstreams reads the state of each of the gate's upstreams, in order
// (Options.Upstream, then Fallbacks), in one round trip; nil without
// upstreams. It never changes anything.
func (g *Gate) Upstreams(ctx context.Context) ([]UpstreamStatus, error) {
	t := g.store.Trip()
	reads := g.ups.Read(ctx, &t)
	t.Send(ctx)
	ss, err := reads.Result()
	if err != nil {
		return nil, redisError(ctx, "upstream status", err)
	}
	return statusesOf(ss), nil
}

// ResetUpstreams ends the cooldown or pause of every upstream of the gate
// and clears their failure windows (operator action, e.g. after topping
// up the quota).
func (g *Gate) ResetUpstreams(ctx context.Context) error {
	if err := g.ups.Reset(ctx, g.store); err != nil {
		return redisError(ctx, "upstream reset", err)
	}
	return nil
}
