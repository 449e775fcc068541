package gateasynq

import (
	"context"
	"errors"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gatequeue"
)

// A task the gate refuses waits in its worker, and asks the gate again,
// when the refusal's wait is at most holdWait (the shortest wait the gate
// gives a running call, a probe's included): asynq keeps a retry's
// time in whole seconds, so a refusal handed back costs up to a second
// (and DelayedTaskCheckInterval) more than the gate's wait, where an
// upstream at its budget says "in 10 ms". A run waits so for at most
// holdRun, so that a worker held by an upstream at its limit turns over
// to other tasks, and never within holdWait of the task's deadline: asynq
// counts a task whose deadline passed as failed, whatever the handler
// returns, and the call needs the time.
const (
	holdWait = time.Second
	holdRun  = 5 * time.Second
)

// run runs job under g as gatequeue.Run does, and waits out in this
// worker each refusal of at most holdWait that ends within holdRun of
// the run's start and holdWait before ctx's deadline. A job running
// elsewhere is not waited for here (gate.Options.Wait does that, woken by
// its settle), nor is a failure of fn: fn runs at most once a run.
func run(ctx context.Context, g *gate.Gate, job string, fn func(context.Context) error) (gatequeue.Plan, error) {
	end := time.Now().Add(holdRun)
	if d, ok := ctx.Deadline(); ok && d.Add(-holdWait).Before(end) {
		end = d.Add(-holdWait)
	}
	var t *time.Timer
	for {
		plan, err := gatequeue.Run(ctx, g, job, fn, isRevoke)
		if !holdable(plan, err) || plan.Wait > holdWait || time.Until(end) <= plan.Wait {
			return plan, err
		}
		// go 1.23 timers: Reset drops a stale tick, no drain needed.
		if t == nil {
			t = time.NewTimer(plan.Wait)
			defer t.Stop()
		} else {
			t.Reset(plan.Wait)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return plan, err
		}
	}
}

// holdable reports a refusal run may wait out: a Retry before fn ran (a
// failure of fn is a *gate.CallError), the job not running elsewhere.
func holdable(plan gatequeue.Plan, err error) bool {
	var (
		ce *gate.CallError
		b  *gate.BlockedError
	)
	return plan.Action == gatequeue.Retry && !errors.As(err, &ce) && errors.As(err, &b) && b.State != gate.Running
}
