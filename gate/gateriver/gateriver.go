package gateriver

import (
	"context"
	"errors"
	"strconv"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gatequeue"
)

// Options configures New. The zero value keys jobs by River job.
type Options struct {
	// Job returns the gate's job key for a River job. Give jobs that do
	// the same work (one document, submitted twice) the same key, from
	// their args (job.EncodedArgs), so they share one lock, one cooldown
	// and one failed mark. An error cancels the job.
	// Default: "<kind>:<job ID>".
	Job func(ctx context.Context, job *rivertype.JobRow) (string, error)
	// Caller returns a job's place when its upstream's budget cannot
	// serve every caller: its class (batch work gate.PriorityBatch, so
	// people at a screen go first) and its tenant, whose share of the
	// class's turns is fair. A job refused because its turn could not
	// come in time is snoozed for the expected wait, not counted as an
	// attempt. An error cancels the job. Default: gate.PriorityNormal,
	// tenant "".
	Caller func(ctx context.Context, job *rivertype.JobRow) (gatequeue.Caller, error)
}

// Middleware is River worker middleware that runs each job under a gate.
type Middleware struct {
	river.MiddlewareDefaults
	g        *gate.Gate
	jobOf    func(ctx context.Context, job *rivertype.JobRow) (string, error)
	callerOf func(ctx context.Context, job *rivertype.JobRow) (gatequeue.Caller, error)
}

var _ rivertype.WorkerMiddleware = (*Middleware)(nil)

// New returns middleware that runs every job's worker under g, keyed by
// opts.Job. Install it in river.Config.Middleware (all workers) or return
// it from a JobArgs' plugins (one kind).
func New(g *gate.Gate, opts Options) *Middleware {
	if g == nil {
		panic("gateriver.New: nil *gate.Gate")
	}
	m := &Middleware{g: g, jobOf: opts.Job, callerOf: opts.Caller}
	if m.jobOf == nil {
		m.jobOf = rowJob
	}
	return m
}

func rowJob(_ context.Context, job *rivertype.JobRow) (string, error) {
	return job.Kind + ":" + strconv.FormatInt(job.ID, 10), nil
}

// Work implements rivertype.WorkerMiddleware.
func (m *Middleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	key, err := m.jobOf(ctx, job)
	if err != nil {
		return river.JobCancel(errors.Join(errors.New("gateriver: job key"), err))
	}
	if m.callerOf != nil {
		c, err := m.callerOf(ctx, job)
		if err != nil {
			return river.JobCancel(errors.Join(errors.New("gateriver: caller"), err))
		}
		ctx = c.Context(ctx)
	}
	plan, err := gatequeue.Run(ctx, m.g, key, doInner, isSnooze)
	var cancel *rivertype.JobCancelError
	if errors.As(err, &cancel) {
		return err // the worker's own cancel, recorded by the gate as a failure
	}
	switch plan.Action {
	case gatequeue.Complete:
		return nil
	case gatequeue.Cancel:
		return river.JobCancel(plan.Wrap(err))
	case gatequeue.Retry:
		if plan.Counted {
			return plan.Wrap(err)
		}
		return river.JobSnooze(plan.Wait)
	}
	return err
}

func isSnooze(err error) bool {
	var s *rivertype.JobSnoozeError
	return errors.As(err, &s)
}
