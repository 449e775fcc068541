package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/retrygate/retrygate/gate"
)

func upstreamCommand() *command {
	return &command{
		name: "upstream", args: "status|reset", redis: true, prefix: true, upstream: true,
		summary: "show (status) or end (reset) the upstream's cooldown or pause; needs --upstream",
		run:     runUpstream,
	}
}

// upstreamResetJSON is reset's --json answer.
type upstreamResetJSON struct {
	Upstream string       `json:"upstream"`
	Reset    bool         `json:"reset"`
	Was      upstreamJSON `json:"was"`
}

func runUpstream(ctx context.Context, c *cli, args []string) error {
	if len(args) != 1 || (args[0] != "status" && args[0] != "reset") {
		return usageErrorf("expected 'upstream status' or 'upstream reset'")
	}
	if c.upstream == "" {
		return usageErrorf("%s: --upstream is required (the gate's Options.Upstream)", args[0])
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
	if args[0] == "reset" {
		if err := g.ResetUpstreams(ctx); err != nil {
			return err
		}
		if c.json {
			return writeJSON(c.stdout, upstreamResetJSON{Upstream: c.upstream, Reset: true, Was: *j})
		}
		if st.State == gate.UpstreamReady {
			_, err = fmt.Fprintf(c.stdout, "upstream %s was ready; failure window cleared\n", printable(c.upstream))
			return err
		}
		_, err = fmt.Fprintf(c.stdout, "upstream %s reset: was %s (%s) with %s left; the upstream no longer refuses its jobs, "+
			"but a job that failed keeps its own cooldown or failed mark (retrygate%s list --state cooling, --state failed; reset JOB)\n",
			printable(c.upstream), st.State, printable(st.Reason), fmtDur(st.RetryAfter), c.globalHint())
		return err
	}
	if c.json {
		return writeJSON(c.stdout, j)
	}
	tw := table(c.stdout)
	row(tw, "upstream", printable(st.Upstream))
	row(tw, "state", st.State)
	if st.Reason != "" {
		row(tw, "reason", printable(st.Reason))
	}
	if st.RetryAfter > 0 {
		row(tw, "retry in", fmt.Sprintf("%s (at %s)", fmtDur(st.RetryAfter), j.RetryAt))
	}
	switch st.State {
	case gate.UpstreamReady:
		row(tw, "meaning", "calls of this upstream run (each job's own state still applies)")
	case gate.UpstreamCoolingDown:
		row(tw, "meaning", "a provider-wide failure (rate limit, overload, repeated 5xx): every job of the upstream is refused until the cooldown ends")
	case gate.UpstreamPaused:
		row(tw, "meaning", "a systemic failure (quota, credentials, model): every job of the upstream is refused until an operator resets it or the pause expires")
	}
	if st.State != gate.UpstreamReady {
		row(tw, "clear", c.clearHint(gate.Status{Upstream: st}))
	}
	budgetRows(tw, st.Budget)
	return tw.Flush()
}

// budgetRows shows what the upstream's provider last reported of its
// rate limits, as admission estimates them now.
func budgetRows(tw *tabwriter.Writer, b gate.UpstreamBudget) {
	if !b.Requests.Reported && !b.Tokens.Reported {
		row(tw, "budget", "none reported (calls are admitted by the breaker alone)")
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
