package gate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate/internal/store"
)

// Sentinels. Every error the gate returns matches one of them with
// errors.Is. The typed errors below carry the data.
var (
	// ErrCoolingDown: the job failed transiently and waits out its cooldown.
	ErrCoolingDown = errors.New("gate: job is cooling down")
	// ErrInFlight: the job is running, in this process or another.
	ErrInFlight = errors.New("gate: job is already running")
	// ErrFailed: the job failed permanently. Reset clears the mark.
	ErrFailed = errors.New("gate: job failed permanently")
	// ErrDone: the job succeeded and is kept Done (Options.Retention.Done).
	ErrDone = errors.New("gate: job is done")
	// ErrUpstreamCooling: every upstream of the gate (Options.Upstream and
	// Fallbacks) is cooling down, paused or being probed after a
	// provider-wide failure. No job of the gate runs.
	ErrUpstreamCooling = errors.New("gate: upstream is cooling down")
	// ErrLeaseLost: the lease expired or was taken over while fn ran.
	// fn's context is cancelled with this cause, unless
	// Redis.ContinueOnLeaseLost.
	ErrLeaseLost = errors.New("gate: lease lost")
	// ErrNotOwned: a settle found the lock owned by someone else, or gone.
	// Nothing was written.
	ErrNotOwned = errors.New("gate: lock not owned")
	// ErrAlreadySettled: Succeed, Fail or Release was called twice.
	ErrAlreadySettled = errors.New("gate: lease already settled")
	// ErrUnavailable: Redis could not serve the call now. It passes by
	// itself. The error wraps the cause, one of:
	//   - Redis could not be reached or did not answer in time;
	//   - a cluster slot was moving or failing over (TRYAGAIN,
	//     CLUSTERDOWN, MOVED or ASK past the client's redirects, LOADING,
	//     MASTERDOWN);
	//   - fewer replicas than Options.Redis.WaitReplicas acknowledged an
	//     acquire.
	//
	// A caller's context that ended (cancelled, its deadline passed) is
	// never ErrUnavailable. Every call then returns an error matching
	// context.Canceled or context.DeadlineExceeded.
	ErrUnavailable = errors.New("gate: redis unavailable")
	// ErrRedisRefused: Redis answered with an error no wait fixes:
	//   - a missing ACL permission (NOPERM);
	//   - a full noeviction Redis (OOM);
	//   - a replica (READONLY);
	//   - a script it would not load or run (NOSCRIPT, ERR);
	//   - a key of another type (WRONGTYPE).
	//
	// It is a configuration problem, not an outage. The gate fails closed,
	// Redis.FailOpen or not. The error wraps Redis's reply.
	ErrRedisRefused = errors.New("gate: redis refused the command")
	// ErrInvalidJob: the job key is empty or longer than 1024 bytes.
	ErrInvalidJob = errors.New("gate: invalid job key")
	// ErrInvalidTenant: the call's tenant (WithTenant) is longer than 256
	// bytes, not UTF-8, or holds a control character.
	ErrInvalidTenant = errors.New("gate: invalid tenant")
)

// BlockedError is returned by Do, Call and Acquire when the job may not run
// now. errors.Is matches the sentinel of State. That is ErrCoolingDown,
// ErrInFlight (Running), ErrFailed, ErrDone or ErrUpstreamCooling.
type BlockedError struct {
	Job string
	// State is the job's state. It is UpstreamCooling when every upstream
	// of the gate refused the call. The job's own state was then not read.
	State State
	// RetryAfter is how long until a retry may run:
	//   - for a cooldown, its time left;
	//   - for a running job, an estimate of when its call ends (see
	//     Acquire);
	//   - for UpstreamCooling, the soonest any upstream recovers;
	//   - 0 for Failed and Done.
	RetryAfter time.Duration
	// Attempts counts failures since the last success.
	Attempts int
	// Reason is the classification code of the failure behind a cooldown
	// or failed mark, or of the upstream's cooldown or pause. It is never
	// upstream text.
	Reason string
	// Evidence names the signal that decided that failure's verdict
	// (classify.Verdict.Evidence), when known.
	Evidence string
	// Upstreams holds each of the gate's upstreams, in order, when State
	// is UpstreamCooling.
	Upstreams []UpstreamStatus
	// Ahead is how many callers were ahead of this one in its upstream's
	// line when it was refused. Its wait could not reach its turn. Its
	// RetryAfter is then the expected wait for that turn. 0: it was not
	// in line.
	Ahead int

	token string        // Running: the running lease's token, which a waiter waits for
	lease time.Duration // Running: the lease's time left, when a waiter reads again
	local bool          // decided in-process, without Redis (Event.Local)
	// UpstreamCooling by a budget: the upstream whose line a caller with
	// a wait joins. nil otherwise.
	line   *lineRefusal
	waited time.Duration // the time spent in line before it (Event.Waited)
}

func (e *BlockedError) Error() string {
	switch e.State {
	case UpstreamCooling:
		parts := make([]string, 0, len(e.Upstreams))
		for _, u := range e.Upstreams {
			switch {
			case u.Probing:
				parts = append(parts, fmt.Sprintf("%q is being probed (%s), retry in %v", u.Upstream, u.Reason, u.RetryAfter))
			case u.State == Paused && u.Reason == ReasonOperator:
				parts = append(parts, fmt.Sprintf("%q is paused by an operator (%q) for %v or until resumed", u.Upstream, u.Note, u.RetryAfter))
			case u.State == Paused:
				parts = append(parts, fmt.Sprintf("%q is paused (%s) for %v or until reset", u.Upstream, u.Reason, u.RetryAfter))
			default:
				parts = append(parts, fmt.Sprintf("%q is cooling down (%s), retry in %v", u.Upstream, u.Reason, u.RetryAfter))
			}
		}
		return "gate: upstream " + strings.Join(parts, "; upstream ")
	case CoolingDown:
		return fmt.Sprintf("gate: job %s is cooling down (%s), retry in %v", quoteJob(e.Job), e.Reason, e.RetryAfter)
	case Failed:
		return fmt.Sprintf("gate: job %s failed permanently (%s)", quoteJob(e.Job), e.Reason)
	case Done:
		return fmt.Sprintf("gate: job %s is done", quoteJob(e.Job))
	}
	if e.RetryAfter > 0 {
		return fmt.Sprintf("gate: job %s is already running, retry in about %v", quoteJob(e.Job), e.RetryAfter)
	}
	return fmt.Sprintf("gate: job %s is already running", quoteJob(e.Job))
}

// waitInLine makes wait the refusal's, and its line's upstream's, whose
// wait the text states: a caller told a turn the line computed (the
// expected wait, one refill) reads the same wait in both.
func (e *BlockedError) waitInLine(wait time.Duration) {
	e.RetryAfter = wait
	if e.line != nil && e.line.of < len(e.Upstreams) {
		e.Upstreams = slices.Clone(e.Upstreams) // a copy's may be another's
		e.Upstreams[e.line.of].RetryAfter = wait
	}
}

// Is maps the error to its sentinel.
func (e *BlockedError) Is(target error) bool {
	switch e.State {
	case UpstreamCooling:
		return target == ErrUpstreamCooling
	case CoolingDown:
		return target == ErrCoolingDown
	case Failed:
		return target == ErrFailed
	case Done:
		return target == ErrDone
	case Running:
		return target == ErrInFlight
	}
	return false
}

// CallError is what Do and Call return when fn failed. It wraps fn's
// error, which errors.Is and errors.As reach. It says what the gate did
// about it.
type CallError struct {
	Job string
	// Verdict is the classifier's verdict on Err.
	Verdict classify.Verdict
	// State is the job's state after the settle: CoolingDown, Failed, or
	// Ready. Ready follows a caller cancellation (released), or a
	// provider-wide failure while another upstream is ready. When the
	// outcome was not written (SettleErr set), it is Running. The lock's
	// TTL is then the cooldown.
	State State
	// RetryAfter is the wait the failure leaves:
	//   - CoolingDown: the cooldown that was set;
	//   - the outcome not written: the lease, the most the lock's TTL can
	//     be;
	//   - 0 otherwise.
	RetryAfter time.Duration
	// Attempts counts failures since the last success, this one included.
	Attempts int
	// Fence is the fencing token of the failed call.
	Fence int64
	// Err is fn's error.
	Err error
	// SettleErr is set when the outcome could not be recorded in Redis.
	// It is ErrNotOwned, ErrLeaseLost, ErrAlreadySettled, or an
	// ErrUnavailable wrapping the Redis error. nil means the outcome was
	// written.
	SettleErr error
}

func (e *CallError) Error() string {
	msg := fmt.Sprintf("gate: job %s: %v", quoteJob(e.Job), e.Err)
	if e.SettleErr != nil {
		msg += " (settle: " + e.SettleErr.Error() + ")"
	}
	return msg
}

// Is reports whether target is the sentinel of the state the failure left
// the job in. That is ErrFailed after a permanent failure, ErrCoolingDown
// after a transient one. So one errors.Is(err, ErrFailed) tells "retrying
// will not help". It does so for the failing call and for every refused
// retry after it.
func (e *CallError) Is(target error) bool {
	switch e.State {
	case Failed:
		return target == ErrFailed
	case CoolingDown:
		return target == ErrCoolingDown
	}
	return false
}

// Unwrap returns fn's error and the settle error, if any.
func (e *CallError) Unwrap() []error {
	if e.SettleErr == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.SettleErr}
}

// redisError wraps a Redis error so it matches ErrRedisRefused or
// ErrUnavailable, and the cause. ctx is the context the command was sent
// with. The caller may have ended it: cancelled it, or its deadline
// passed. The error is then the caller's, not an outage, and matches
// neither sentinel (ctxError). Only the gate's own bound on a command
// (opCtx, cause errRedisTimeout) is Redis not answering.
func redisError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil && context.Cause(ctx) != errRedisTimeout {
		return ctxError(ctx, op)
	}
	if store.Refused(err) {
		return fmt.Errorf("%w: %s: %w", ErrRedisRefused, op, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

// errRedisTimeout is the cause of the gate's own bound on a Redis command
// (Redis.Timeout). Redis did not answer in time: it is unavailable.
var errRedisTimeout = errors.New("redis did not answer within Redis.Timeout")

// ctxError is the error of a call whose caller ended ctx. It matches
// ctx.Err() (context.Canceled or context.DeadlineExceeded). It also
// matches a cause given with context.WithCancelCause.
func ctxError(ctx context.Context, op string) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return fmt.Errorf("gate: %s: %w", op, err)
	}
	return fmt.Errorf("gate: %s: %w: %w", op, err, cause)
}

// RetryAfter returns how long to wait before retrying, from any error Do,
// Call or Acquire returned. The wait is a cooldown, a running lease or an
// upstream cooldown. It returns false for errors that no wait fixes
// (failed, done, invalid input). It returns false for errors without a
// known wait, too.
func RetryAfter(err error) (time.Duration, bool) {
	var b *BlockedError
	if errors.As(err, &b) {
		if b.State == Failed || b.State == Done || b.RetryAfter <= 0 {
			return 0, false
		}
		return b.RetryAfter, true
	}
	var c *CallError
	if errors.As(err, &c) && c.State == CoolingDown {
		return c.RetryAfter, true
	}
	return 0, false
}

// quoteJob quotes a job for error text. It shortens it, so a 1 KiB key
// does not flood logs.
func quoteJob(job string) string {
	const max = 64
	if len(job) > max {
		return fmt.Sprintf("%q…", job[:max])
	}
	return fmt.Sprintf("%q", job)
}
