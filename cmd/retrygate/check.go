package main

import (
	"context"
	"fmt"
)

func checkCommand() *command {
	return &command{
		name: "check", redis: true,
		summary: "warn when Redis can lose the gate's keys: a maxmemory-policy that evicts them, " +
			"or no persistence across a restart (exit 3 on a warning)",
		run: runCheck,
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
	gw, err := g.Check(ctx)
	if err != nil {
		return err
	}
	warns := make([]warningJSON, 0, len(gw))
	for _, w := range gw {
		warns = append(warns, warningJSON{w.Reason, w.Addr, w.Policy, w.Message})
	}
	notes, err := persistenceNotes(ctx, c.rdb)
	if err != nil {
		return err
	}
	if c.json {
		out := struct {
			OK       bool          `json:"ok"`
			Warnings []warningJSON `json:"warnings"`
			Notes    []string      `json:"notes"`
		}{OK: len(warns) == 0, Warnings: warns, Notes: notes}
		if err := writeJSON(c.stdout, out); err != nil {
			return err
		}
	} else {
		switch {
		case len(warns) == 0 && len(notes) == 0:
			fmt.Fprintln(c.stdout, "ok: maxmemory-policy cannot evict the gate's keys, and Redis keeps them across a restart")
		case len(warns) == 0:
			fmt.Fprintln(c.stdout, "ok: maxmemory-policy cannot evict the gate's keys")
		}
		for _, w := range warns {
			fmt.Fprintf(c.stdout, "warning: %s: %s\n", printable(w.Reason), safeLine(w.Message))
		}
		for _, n := range notes {
			fmt.Fprintf(c.stdout, "note: %s\n", safeLine(n))
		}
	}
	if len(warns) > 0 {
		return &exitError{code: exitNotMet}
	}
	return nil
}
