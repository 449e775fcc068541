package gatequeue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// Action is what the queue does with the job.
type Action uint8

const (
	// Pass: the gate has no say (Redis out of reach, the context ended, a
	// lease lost after a success): return the error to the queue as it is.
	Pass Action = iota
	// Complete: the job is done (it succeeded, or the gate holds it Done).
	Complete
	// Retry: run the job again after Wait.
	Retry
	// Cancel: the job failed permanently; never run it again.
	Cancel
)

var actionNames = [...]string{"pass", "complete", "retry", "cancel"}

// String returns the action's name: pass, complete, retry or cancel.
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// Plan is what the queue must do with a job after the gate.
type Plan struct {
	// Action is what to do; the zero value is Pass.
	Action Action
	// Wait is how long until the job may run (Retry).
	Wait time.Duration
	// Counted reports a failed attempt of the job's own (Retry): the
	// queue's retry budget pays for it. Refusals, provider-wide and
	// systemic failures are not counted: the gate did not count them
	// either.
	Counted bool
	// Reason is the classification code (Retry, Cancel).
	Reason string
	// Ahead is how many callers were ahead of the job in its upstream's
	// line when its turn could not come in time (gate.BlockedError.Ahead):
	// Wait is then the expected wait for its turn. 0: it was not in line.
	Ahead int
}

// ReasonInvalidJob is the Cancel reason for a job key the gate rejects.
const ReasonInvalidJob = "invalid_job"

// ReasonInvalidTenant is the Cancel reason for a task whose tenant
// (Caller) the gate rejects (gate.ErrInvalidTenant): it would be refused
// on every run.
const ReasonInvalidTenant = "invalid_tenant"

// minWait keeps a retry from spinning when a wait rounds to nothing.
const minWait = 10 * time.Millisecond

// Run acquires job's lease, runs fn under it (fn's context is cancelled if
// the lease is lost), settles the outcome, and returns the plan and the
// error: nil; the gate's refusal (gate.ErrDone with Complete: the queue
// completes the job without running it); a *gate.CallError wrapping fn's
// error, as gate.Do returns; or fn's error as it is when release(err) is
// true. Such an error is the queue's own instruction (River's JobSnooze,
// asynq's RevokeTask): the lease is released with no cooldown and no
// attempt, and the plan is Pass. release may be nil.
//
// A panic in fn settles the job as a transient failure and panics on.
func Run(ctx context.Context, g *gate.Gate, job string, fn func(context.Context) error, release func(error) bool) (Plan, error) {
	l, err := g.Acquire(ctx, job)
	if err != nil {
		return refused(err), err
	}
	attempt := l.Attempt()
	ferr := call(ctx, l, fn)
	if release != nil && ferr != nil && release(ferr) {
		_ = l.Release(ctx) // unwritten: the lease's TTL frees the job
		return Plan{}, ferr
	}
	serr := l.Settle(ctx, ferr)
	if ferr == nil {
		if serr != nil {
			// ErrLeaseLost, ErrNotOwned: fn's work may overlap a newer
			// owner's: the queue decides.
			return Plan{}, serr
		}
		return Plan{Action: Complete}, nil
	}
	if !l.Gated() {
		return Plan{}, ferr // Redis.FailOpen ran it ungated: nothing was recorded
	}
	var ce *gate.CallError
	if !errors.As(serr, &ce) {
		return Plan{}, serr
	}
	return failed(ce, attempt), ce
}

// call runs fn on the lease's context; a panic settles the lease as a
// transient failure first, as gate.Do does.
func call(ctx context.Context, l *gate.Lease, fn func(context.Context) error) error {
	returned := false
	defer func() {
		if !returned {
			_ = l.Fail(ctx, classify.WithReason(errors.New("gatequeue: the job panicked"), classify.ClassTransient, classify.ReasonPanic, 0))
		}
	}()
	err := fn(l.Context())
	returned = true
	return err
}

// failed plans a call that failed: ce is what the settle recorded, attempt
// the lease's attempt number (a counted failure leaves Attempts at it, an
// uncounted one below it).
func failed(ce *gate.CallError, attempt int) Plan {
	switch ce.State {
	case gate.Failed:
		return Plan{Action: Cancel, Reason: ce.Verdict.Reason}
	case gate.CoolingDown:
		return Plan{Action: Retry, Wait: max(ce.RetryAfter, minWait), Counted: ce.Attempts >= attempt, Reason: ce.Verdict.Reason}
	case gate.Running:
		// The settle was not written (or the lock was no longer ours):
		// the lock's own TTL, at most a lease, is the cooldown, and
		// RetryAfter says so.
		return Plan{Action: Retry, Wait: max(ce.RetryAfter, minWait), Counted: true, Reason: ce.Verdict.Reason}
	case gate.Ready:
		if ce.Verdict.Class != classify.ClassCanceled {
			// A provider-wide failure while another upstream is ready
			// (gate.Options.UpstreamPolicy.Fallbacks): the next run goes there, now.
			return Plan{Action: Retry, Wait: minWait, Reason: ce.Verdict.Reason}
		}
	}
	// Released: the caller's context ended while fn ran.
	return Plan{Reason: ce.Verdict.Reason}
}

// refused plans an acquire that returned err.
func refused(err error) Plan {
	var b *gate.BlockedError
	switch {
	case errors.As(err, &b):
	case errors.Is(err, gate.ErrInvalidJob):
		return Plan{Action: Cancel, Reason: ReasonInvalidJob}
	case errors.Is(err, gate.ErrInvalidTenant):
		return Plan{Action: Cancel, Reason: ReasonInvalidTenant}
	default:
		return Plan{}
	}
	if b.Ahead > 0 && b.State != gate.Done && b.State != gate.Failed {
		// Its turn in line could not come in time: run again when it
		// is expected, not counted (the gate counted nothing).
		return Plan{Action: Retry, Wait: max(b.RetryAfter, minWait), Reason: b.Reason, Ahead: b.Ahead}
	}
	if b.State == gate.UpstreamCooling {
		return Plan{Action: Retry, Wait: max(upstreamWait(b), minWait), Reason: b.Reason}
	}
	switch b.State {
	case gate.Done:
		return Plan{Action: Complete}
	case gate.Failed:
		return Plan{Action: Cancel, Reason: b.Reason}
	}
	// Cooling down (the cooldown's time left) or running elsewhere (the
	// running lease's time left: the job is retried when that lease has
	// settled or expired, never while it runs).
	return Plan{Action: Retry, Wait: max(b.RetryAfter, minWait), Reason: b.Reason}
}

// upstreamWait is how long a job refused by its upstreams waits: until
// the soonest of them may run a call. A cooldown or pause says when its
// probe may run, and that is the wait: at its end one job probes and the
// others are refused again. While a probe runs, the refusal's wait is the
// gate's estimate of the probe's call, never its lease.
func upstreamWait(b *gate.BlockedError) time.Duration {
	wait := time.Duration(-1)
	for _, u := range b.Upstreams {
		w := u.RetryAfter
		if wait < 0 || w < wait {
			wait = w
		}
	}
	if wait < 0 {
		return b.RetryAfter
	}
	return wait
}

// Wrap returns err with the plan in front, for the queue's own record of
// the job (an archived task's last error, a cancelled job's error):
// "retrygate: failed permanently (<reason>): <err>" for Cancel,
// "retrygate: retry in <wait>: <err>" for Retry ("retrygate: in line, <n>
// ahead, retry in <wait>: <err>" with Ahead), err itself otherwise.
// The result unwraps to err.
func (p Plan) Wrap(err error) error {
	switch {
	case p.Action == Cancel:
		return fmt.Errorf("retrygate: failed permanently (%s): %w", p.Reason, err)
	case p.Action == Retry && p.Ahead > 0:
		return fmt.Errorf("retrygate: in line, %d ahead, retry in %v: %w", p.Ahead, p.Wait, err)
	case p.Action == Retry:
		return fmt.Errorf("retrygate: retry in %v: %w", p.Wait, err)
	}
	return err
}
