package main

import (
	"context"
	"fmt"
)

func checkCommand() *command {
	return &command{
		name: "check", redis: true,
		summary: "warn when Redis's maxmemory-policy can evict cooldown keys (exit 3 on a warning)",
		run:     runCheck,
	}
}

type warningJSON struct {
	Reason  string `json:"reason"`
	Addr    string `json:"addr,omitempty"`
	Policy  string `json:"policy,omitempty"`
	Message string `json:"message"`
}

func runCheck(ctx context.Context, c *cli, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected argument %q", echo(args[0]))
	}
	g, err := c.gate(false)
	if err != nil {
		return err
	}
	warns, err := g.Check(ctx)
	if err != nil {
		return err
	}
	if c.json {
		out := struct {
			OK       bool          `json:"ok"`
			Warnings []warningJSON `json:"warnings"`
		}{OK: len(warns) == 0, Warnings: []warningJSON{}}
		for _, w := range warns {
			out.Warnings = append(out.Warnings, warningJSON{w.Reason, w.Addr, w.Policy, w.Message})
		}
		if err := writeJSON(c.stdout, out); err != nil {
			return err
		}
	} else if len(warns) == 0 {
		fmt.Fprintln(c.stdout, "ok: maxmemory-policy cannot evict the gate's keys")
	} else {
		for _, w := range warns {
			fmt.Fprintf(c.stdout, "warning: %s: %s\n", printable(w.Reason), safeLine(w.Message))
		}
	}
	if len(warns) > 0 {
		return &exitError{code: exitNotMet}
	}
	return nil
}
