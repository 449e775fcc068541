package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/retrygate/retrygate/gate"
)

func upstreamCommand() *command {
	var p upstreamPause
	return &command{
		name: "upstream", args: "status|reset|pause|resume", redis: true, prefix: true, upstream: true,
		summary: "show (status) or end (reset) the upstream's cooldown or pause, or pause its calls in every process " +
			"(pause --for D --reason R) until the pause ends or resume; needs --upstream",
		flags: func(fs *flagSet) {
			durationVar(fs, &p.d, "for", 0, "pause: how long the pause lasts, a duration `D` (it ends by itself)")
			fs.StringVar(&p.reason, "reason", "", "pause: the operator's reason `R`, shown with every refusal (\"key rotation\")")
		},
		run: func(ctx context.Context, c *cli, args []string) error { return runUpstream(ctx, c, args, p) },
	}
}

// upstreamPause is pause's flags.
type upstreamPause struct {
	d      time.Duration
	reason string
}

// upstreamStatusJSON is status's --json answer: the upstream, and who
// waits in its line.
type upstreamStatusJSON struct {
	upstreamJSON
	// Line is nil when the user may not read it (no +zrange).
	Line *lineJSON `json:"line,omitempty"`
}

// upstreamResetJSON is reset's --json answer.
type upstreamResetJSON struct {
	Upstream string       `json:"upstream"`
	Reset    bool         `json:"reset"`
	Was      upstreamJSON `json:"was"`
}

// upstreamSwitchJSON is pause's and resume's --json answer: the upstream
// before and after.
type upstreamSwitchJSON struct {
	Upstream string       `json:"upstream"`
	Changed  bool         `json:"changed"`
	Was      upstreamJSON `json:"was"`
	Now      upstreamJSON `json:"now"`
}

func runUpstream(ctx context.Context, c *cli, args []string, p upstreamPause) error {
	if len(args) != 1 || !slices.Contains([]string{"status", "reset", "pause", "resume"}, args[0]) {
		return usageErrorf("expected 'upstream status', 'upstream reset', 'upstream pause --for D --reason R' or 'upstream resume'")
	}
	verb := args[0]
	if c.upstream == "" {
		return usageErrorf("%s: --upstream is required (the gate's Options.Upstream)", verb)
	}
	if (p.d != 0 || p.reason != "") && verb != "pause" {
		return usageErrorf("--for and --reason are pause's")
	}
	if verb == "pause" {
		switch {
		case p.d <= 0:
			return usageErrorf("pause: --for D is required and positive (how long the pause lasts: 10m, 2h)")
		case strings.TrimSpace(p.reason) == "":
			return usageErrorf("pause: --reason R is required: every refused call shows it")
		}
	}
	g, err := c.gate(true)
	if err != nil {
		return err
	}
	ups, err := g.Upstreams(ctx)
	if err != nil {
		return err
	}
	st := ups[0] // the gate has one upstream: --upstream
	j := toUpstreamJSON(st)
	switch verb {
	case "pause", "resume":
		return c.switchUpstream(ctx, g, verb, p, st)
	case "reset":
		if err := g.ResetUpstreams(ctx); err != nil {
			return err
		}
		if c.json {
			return writeJSON(c.stdout, upstreamResetJSON{Upstream: c.upstream, Reset: true, Was: *j})
		}
		if st.State == gate.Ready {
			_, err = fmt.Fprintf(c.stdout, "upstream %s was ready; failure window cleared\n", printable(c.upstream))
			return err
		}
		_, err = fmt.Fprintf(c.stdout, "upstream %s reset: was %s (%s) with %s left; the upstream no longer refuses its jobs, "+
			"but a job that failed keeps its own cooldown or failed mark (retrygate%s list --state cooling, --state failed; reset JOB)\n",
			printable(c.upstream), st.State, upstreamWhy(st), fmtDur(st.RetryAfter), c.globalHint())
		return err
	}
	var line *lineJSON
	switch l, err := readLine(ctx, c.rdb, c.prefix, c.upstream, linePage); {
	case err == nil:
		line = &l
	case !errors.Is(err, errLineNoPerm):
		return err
	}
	if c.json {
		return writeJSON(c.stdout, upstreamStatusJSON{upstreamJSON: *j, Line: line})
	}
	tw := table(c.stdout)
	row(tw, "upstream", printable(st.Upstream))
	row(tw, "state", st.State)
	if st.Reason != "" {
		row(tw, "reason", printable(st.Reason))
	}
	if st.Note != "" {
		row(tw, "note", printable(st.Note))
	}
	if st.RetryAfter > 0 {
		row(tw, "retry in", fmt.Sprintf("%s (at %s)", fmtDur(st.RetryAfter), j.RetryAt))
	}
	switch st.State {
	case gate.Ready:
		row(tw, "meaning", "calls of this upstream run (each job's own state still applies)")
	case gate.CoolingDown:
		row(tw, "meaning", "a provider-wide failure (rate limit, overload, repeated 5xx): every job of the upstream is refused until the cooldown ends")
	case gate.Paused:
		if st.Reason == gate.ReasonOperator {
			row(tw, "meaning", "an operator paused it: every job of the upstream is refused, in every process, until the pause ends or an operator resumes it")
			break
		}
		row(tw, "meaning", "a systemic failure (quota, credentials, model): every job of the upstream is refused until an operator resets it or the pause expires")
	}
	if st.State != gate.Ready {
		row(tw, "clear", c.clearHint(gate.Status{Upstream: st}))
	}
	budgetRows(tw, st.Budget)
	lineRows(tw, line)
	return tw.Flush()
}

// budgetRows shows what the upstream's provider last reported of its
// rate limits, as admission estimates them now.
func budgetRows(tw *tabwriter.Writer, b gate.UpstreamBudget) {
	if !b.Requests.Reported && !b.Tokens.Reported {
		if !b.Unreported {
			row(tw, "budget", "none reported yet (calls go one at a time until a response settles, unless budgets are ignored)")
			return
		}
		row(tw, "budget", "the provider sends no rate-limit headers: calls are admitted at the rate learned from its answers")
		learned := "none yet (no call refused since it was learned or reset: calls go unjudged until the provider's first 429)"
		if b.LearnedRPM > 0 {
			learned = fmt.Sprintf("%d calls a minute", b.LearnedRPM)
		}
		row(tw, "learned rate", learned)
		row(tw, "in flight", fmt.Sprintf("%d calls admitted, not settled", b.InFlight))
		return
	}
	for _, l := range []struct {
		name string
		l    gate.BudgetLimit
	}{{"budget requests", b.Requests}, {"budget tokens", b.Tokens}} {
		if !l.l.Reported {
			continue
		}
		left := "unknown (reset passed)"
		if l.l.Left >= 0 {
			left = fmt.Sprint(l.l.Left)
		}
		if l.l.Limit > 0 {
			left += fmt.Sprintf(" of %d", l.l.Limit)
		}
		left += " left"
		if l.l.Reset >= 0 {
			left += fmt.Sprintf(", whole in %s (at %s)", fmtDur(l.l.Reset), at(l.l.Reset))
		}
		row(tw, l.name, left)
	}
	row(tw, "in flight", fmt.Sprintf("%d calls admitted, not settled", b.InFlight))
}

// switchUpstream pauses or resumes the upstream (was: its status before)
// and says what changed.
func (c *cli) switchUpstream(ctx context.Context, g *gate.Gate, verb string, p upstreamPause, was gate.UpstreamStatus) error {
	if verb == "pause" {
		if err := g.PauseUpstream(ctx, c.upstream, p.d, p.reason); err != nil {
			return err
		}
	} else if err := g.ResumeUpstream(ctx, c.upstream); err != nil {
		return err
	}
	ups, err := g.Upstreams(ctx)
	if err != nil {
		return err
	}
	now := ups[0]
	operator := func(u gate.UpstreamStatus) bool {
		return u.State == gate.Paused && u.Reason == gate.ReasonOperator
	}
	changed := verb == "pause" || operator(was) && !operator(now)
	if c.json {
		return writeJSON(c.stdout, upstreamSwitchJSON{Upstream: c.upstream, Changed: changed, Was: *toUpstreamJSON(was), Now: *toUpstreamJSON(now)})
	}
	name := printable(c.upstream)
	switch {
	case verb == "pause":
		_, err = fmt.Fprintf(c.stdout, "upstream %s paused for %s (%s): every process refuses its calls from its next one, "+
			"until %s or: %s\n", name, fmtDur(now.RetryAfter), printable(now.Note), at(now.RetryAfter), c.upstreamHint(now))
	case changed:
		_, err = fmt.Fprintf(c.stdout, "upstream %s resumed: was paused by an operator (%s) with %s left; its calls run again\n",
			name, printable(was.Note), fmtDur(was.RetryAfter))
	case now.State == gate.Ready:
		_, err = fmt.Fprintf(c.stdout, "upstream %s was not paused by an operator; it is ready\n", name)
	default:
		_, err = fmt.Fprintf(c.stdout, "upstream %s was not paused by an operator; it is %s (%s) for %s, which resume leaves: %s\n",
			name, now.State, upstreamWhy(now), fmtDur(now.RetryAfter), c.upstreamHint(now))
	}
	return err
}
