package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/retrygate/retrygate/gate"
)

// bulkReset clears the marks of every job in one state, optionally of one
// reason: after a wave of permanent failures (gate.WarnPermanentWave) was
// fixed, the failed marks written before the wave was seen.
type bulkReset struct {
	state, reason string
	dryRun        bool
}

type bulkResetJSON struct {
	State  string       `json:"state"`
	Reason string       `json:"reason,omitempty"`
	DryRun bool         `json:"dry_run"`
	Jobs   []statusJSON `json:"jobs"`
	// Reset counts the jobs cleared (0 with dry_run); Skipped those that
	// were running by the time they were reached.
	Reset   int `json:"reset"`
	Skipped int `json:"skipped"`
}

func (b *bulkReset) run(ctx context.Context, c *cli, args []string) error {
	if len(args) > 0 {
		return usageErrorf("--state resets every matching job: give no JOB (got %q)", echo(args[0]))
	}
	st, ok := listStates[b.state]
	if !ok || (st != gate.Failed && st != gate.CoolingDown) {
		return usageErrorf("reset --state takes failed or cooling (got %q); --reason and --dry-run go with it", echo(b.state))
	}
	reason, err := parseName("--reason", b.reason)
	if err != nil {
		return err
	}
	g, err := c.gate(false)
	if err != nil {
		return err
	}
	l := &lister{g: g, prefix: c.prefix, want: &st}
	if err := forEachNode(ctx, c.rdb, l.scan); err != nil {
		return fmt.Errorf("%w: scan: %w", gate.ErrUnavailable, err)
	}
	if l.err != nil {
		return l.err
	}
	var jobs []gate.Status
	for _, s := range l.found {
		if reason == "" || s.Reason == reason {
			jobs = append(jobs, s)
		}
	}
	slices.SortFunc(jobs, func(a, b gate.Status) int { return strings.Compare(a.Job, b.Job) })

	out := bulkResetJSON{State: st.String(), Reason: reason, DryRun: b.dryRun, Jobs: []statusJSON{}}
	for _, s := range jobs {
		out.Jobs = append(out.Jobs, toStatusJSON(s))
		if b.dryRun {
			continue
		}
		err := g.Reset(ctx, s.Job)
		var blocked *gate.BlockedError
		switch {
		case errors.As(err, &blocked): // running again since the SCAN: left alone
			out.Skipped++
		case err != nil:
			return err
		default:
			out.Reset++
		}
	}
	if c.json {
		return writeJSON(c.stdout, out)
	}
	what := st.String()
	if reason != "" {
		what += " (" + printable(reason) + ")"
	}
	verb := "reset"
	if b.dryRun {
		verb = "would reset"
	}
	tw := table(c.stdout)
	row(tw, "JOB", "STATE", "REASON", "ATTEMPTS", "TTL")
	for _, s := range jobs {
		row(tw, printable(s.Job), s.State, printable(s.Reason), s.Attempts, fmtDur(s.TTL))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	n := out.Reset
	if b.dryRun {
		n = len(jobs)
	}
	_, err = fmt.Fprintf(c.stdout, "%s %d %s jobs", verb, n, what)
	if err == nil && out.Skipped > 0 {
		_, err = fmt.Fprintf(c.stdout, "; %d skipped: running again", out.Skipped)
	}
	if err == nil {
		_, err = fmt.Fprintln(c.stdout)
	}
	return err
}
