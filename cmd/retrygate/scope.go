package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/retrygate/retrygate/gate"
)

func scopeCommand() *command {
	return &command{
		name: "scope", args: "status|reset", redis: true, prefix: true, scope: true,
		summary: "show (status) or end (reset) the upstream scope's cooldown or pause; needs --scope",
		run:     runScope,
	}
}

type scopeResetJSON struct {
	Scope string       `json:"scope"`
	Reset bool         `json:"reset"`
	Was   upstreamJSON `json:"was"`
}

func runScope(ctx context.Context, c *cli, args []string) error {
	if len(args) != 1 || (args[0] != "status" && args[0] != "reset") {
		return usageErrorf("expected 'scope status' or 'scope reset'")
	}
	if c.scope == "" {
		return usageErrorf("%s: --scope is required (the gate's Options.Scope)", args[0])
	}
	g, err := c.gate(true)
	if err != nil {
		return err
	}
	st, err := g.ScopeStatus(ctx)
	if err != nil {
		return err
	}
	j := toUpstreamJSON(st)
	if args[0] == "reset" {
		if err := g.ResetScope(ctx); err != nil {
			return err
		}
		if c.json {
			return writeJSON(c.stdout, scopeResetJSON{Scope: c.scope, Reset: true, Was: *j})
		}
		if st.State == gate.ScopeOpen {
			_, err = fmt.Fprintf(c.stdout, "scope %s was open; failure window cleared\n", printable(c.scope))
			return err
		}
		_, err = fmt.Fprintf(c.stdout, "scope %s reset: was %s (%s) with %s left; the scope no longer refuses its jobs, "+
			"but a job that failed keeps its own cooldown or failed mark (retrygate%s list --state cooling, --state failed; reset JOB)\n",
			printable(c.scope), st.State, printable(st.Reason), fmtDur(st.RetryAfter), c.globalHint())
		return err
	}
	if c.json {
		return writeJSON(c.stdout, j)
	}
	tw := table(c.stdout)
	row(tw, "scope", printable(st.Scope))
	row(tw, "state", st.State)
	if st.Reason != "" {
		row(tw, "reason", printable(st.Reason))
	}
	if st.RetryAfter > 0 {
		row(tw, "retry in", fmt.Sprintf("%s (at %s)", fmtDur(st.RetryAfter), j.RetryAt))
	}
	switch st.State {
	case gate.ScopeOpen:
		row(tw, "meaning", "calls of this upstream run (each job's own state still applies)")
	case gate.ScopeCooling:
		row(tw, "meaning", "a provider-wide failure (rate limit, overload, repeated 5xx): every job of the scope is refused until the cooldown ends")
	case gate.ScopePaused:
		row(tw, "meaning", "a systemic failure (quota, credentials, model): every job of the scope is refused until an operator resets it or the pause expires")
	}
	if st.State != gate.ScopeOpen {
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
