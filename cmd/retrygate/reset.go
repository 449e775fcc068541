package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/retrygate/retrygate/gate"
)

func resetCommand() *command {
	var b bulkReset
	var route string
	return &command{
		name: "reset", args: "JOB | --state STATE [--reason R] [--dry-run]", redis: true, prefix: true,
		summary: "clear a job's cooldown, failed or done mark and its attempt count, so the next call runs; " +
			"with --state, every such job (SCAN on every master), e.g. the failed marks of one reason",
		flags: func(fs *flagSet) {
			fs.StringVar(&b.state, "state", "", "reset every job in this `STATE` (failed or cooling) instead of one JOB")
			fs.StringVar(&b.reason, "reason", "", "with --state: only jobs whose reason is `R` (e.g. after a permanent_wave)")
			fs.BoolVar(&b.dryRun, "dry-run", false, "with --state: list what would be reset, change nothing")
			routeFlag(fs, &route)
		},
		run: func(ctx context.Context, c *cli, args []string) error {
			if b.state != "" || b.reason != "" || b.dryRun {
				if route != "" {
					return usageErrorf("--route names one job; --state resets every matching job")
				}
				return b.run(ctx, c, args)
			}
			return runReset(ctx, c, args, route)
		},
	}
}

type resetJSON struct {
	Job       string     `json:"job"`
	JobQuoted string     `json:"job_quoted,omitempty"`
	Reset     bool       `json:"reset"`
	Was       statusJSON `json:"was"`
	// Error says why it was not reset (exit 4: the job is running).
	Error string `json:"error,omitempty"`
}

func runReset(ctx context.Context, c *cli, args []string, route string) error {
	job, err := jobArg(args, route)
	if err != nil {
		return err
	}
	g, err := c.gate(false)
	if err != nil {
		return err
	}
	// Read first only to report what was cleared; Reset itself is atomic.
	was, err := g.Status(ctx, job)
	if err != nil {
		return jobError(err)
	}
	if err := g.Reset(ctx, job); err != nil {
		var b *gate.BlockedError
		if errors.As(err, &b) && b.State == gate.Running {
			msg := fmt.Sprintf("job %s is running (lease expires in %s); not reset: wait for it to settle or for its lease to expire",
				printable(job), fmtDur(b.RetryAfter))
			if c.json {
				was.State, was.RetryAfter = gate.Running, b.RetryAfter
				if err := writeJSON(c.stdout, resetJSON{Job: job, JobQuoted: quoted(job), Was: toStatusJSON(was), Error: msg}); err != nil {
					return err
				}
			}
			return &exitError{code: exitRunning, msg: msg}
		}
		return err
	}
	if c.json {
		return writeJSON(c.stdout, resetJSON{Job: job, JobQuoted: quoted(job), Reset: true, Was: toStatusJSON(was)})
	}
	if was.State == gate.Ready && was.Attempts == 0 {
		_, err = fmt.Fprintf(c.stdout, "job %s had nothing to clear (ready, no attempts)\n", printable(job))
		return err
	}
	desc := was.State.String()
	if was.Reason != "" {
		desc += " (" + printable(was.Reason) + ")"
	}
	_, err = fmt.Fprintf(c.stdout, "job %s reset: was %s, attempts %d; the next call runs\n", printable(job), desc, was.Attempts)
	return err
}
