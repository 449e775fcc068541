package gateasynq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gatequeue"
)

// Options configures Middleware. The zero value keys jobs by task.
type Options struct {
	// Job returns the gate's job key for a task. Give tasks that do the
	// same work (one document, submitted twice) the same key, from the
	// payload, so they share one lock, one cooldown and one failed mark.
	// An error archives the task. Default: "<type>:<task ID>".
	Job func(ctx context.Context, t *asynq.Task) (string, error)
	// Caller returns a task's place when its upstream's budget cannot
	// serve every caller: its class (batch work gate.PriorityBatch, so
	// people at a screen go first) and its tenant, whose share of the
	// class's turns is fair. A task refused because its turn could not
	// come in time is retried after the expected wait, not counted as a
	// failure. An error archives the task. Default: gate.PriorityNormal,
	// tenant "".
	Caller func(ctx context.Context, t *asynq.Task) (gatequeue.Caller, error)
}

// Middleware runs every task's handler under g, keyed by opts.Job, and
// turns the gate's answer into what asynq does next (see the package
// doc). Wire Config into the server too, or refusals are retried at
// asynq's pace and counted as failures.
func Middleware(g *gate.Gate, opts Options) asynq.MiddlewareFunc {
	if g == nil {
		panic("gateasynq.Middleware: nil *gate.Gate")
	}
	jobOf := opts.Job
	if jobOf == nil {
		jobOf = taskJob
	}
	return func(h asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			job, err := jobOf(ctx, t)
			if err != nil {
				return fmt.Errorf("gateasynq: job key: %w: %w", err, asynq.SkipRetry)
			}
			if opts.Caller != nil {
				c, err := opts.Caller(ctx, t)
				if err != nil {
					return fmt.Errorf("gateasynq: caller: %w: %w", err, asynq.SkipRetry)
				}
				ctx = c.Context(ctx)
			}
			plan, err := run(ctx, g, job, func(ctx context.Context) error {
				return h.ProcessTask(ctx, t)
			})
			switch plan.Action {
			case gatequeue.Complete:
				return nil
			case gatequeue.Cancel:
				return fmt.Errorf("%w: %w", plan.Wrap(err), asynq.SkipRetry)
			case gatequeue.Retry:
				return &retryError{plan: plan, err: plan.Wrap(err)}
			}
			return err
		})
	}
}

func taskJob(ctx context.Context, t *asynq.Task) (string, error) {
	id, ok := asynq.GetTaskID(ctx)
	if !ok {
		return "", errors.New("no task ID in the context")
	}
	return t.Type() + ":" + id, nil
}

func isRevoke(err error) bool { return errors.Is(err, asynq.RevokeTask) }

// retryError is a task the gate wants run again after plan.Wait; Config's
// functions read it. Its text is what asynq records as the task's last
// error.
type retryError struct {
	plan gatequeue.Plan
	err  error
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// Config returns cfg with a RetryDelayFunc and an IsFailure that follow
// the gate for the tasks Middleware ran, and defer to cfg's own (asynq's
// defaults when nil) for every other error. DelayedTaskCheckInterval
// becomes 1 s when unset.
func Config(cfg asynq.Config) asynq.Config {
	delay := cfg.RetryDelayFunc
	if delay == nil {
		delay = asynq.DefaultRetryDelayFunc
	}
	cfg.RetryDelayFunc = func(n int, err error, t *asynq.Task) time.Duration {
		var r *retryError
		if errors.As(err, &r) {
			return wholeSeconds(time.Now(), r.plan.Wait)
		}
		return delay(n, err, t)
	}
	isFailure := cfg.IsFailure
	if isFailure == nil {
		isFailure = func(err error) bool { return err != nil }
	}
	cfg.IsFailure = func(err error) bool {
		var r *retryError
		if errors.As(err, &r) {
			return r.plan.Counted
		}
		return isFailure(err)
	}
	if cfg.DelayedTaskCheckInterval == 0 {
		cfg.DelayedTaskCheckInterval = time.Second
	}
	return cfg
}

// wholeSeconds stretches d so that now+d is a whole second: asynq stores
// a retry's time as Unix seconds, truncated, and would otherwise run it up
// to a second before the gate's wait ends.
func wholeSeconds(now time.Time, d time.Duration) time.Duration {
	at := now.Add(d)
	up := at.Truncate(time.Second)
	if up.Before(at) {
		up = up.Add(time.Second)
	}
	return up.Sub(now)
}
