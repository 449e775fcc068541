package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/internal/engine"
)

func checkCommand() *command {
	return &command{
		name: "check", redis: true,
		summary: "name the gate's Redis and warn where it can break the lock or lose its keys: an engine " +
			"or version that breaks the lock, a maxmemory-policy that evicts, no persistence, no maxmemory " +
			"or little room left (exit 3 on a warning)",
		run: runCheck,
	}
}

type warningJSON struct {
	Reason  string `json:"reason"`
	Addr    string `json:"addr,omitempty"`
	Engine  string `json:"engine,omitempty"`
	Version string `json:"version,omitempty"`
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
		warns = append(warns, warningJSON{w.Reason, w.Addr, w.Engine, w.Version, w.Policy, w.Message})
	}
	servers, err := serverNames(ctx, c.rdb)
	if err != nil && !errors.Is(err, errNoNodes) {
		return err
	}
	notes, err := persistenceNotes(ctx, c.rdb)
	if err != nil {
		return err
	}
	if c.json {
		out := struct {
			OK       bool          `json:"ok"`
			Servers  []string      `json:"servers"`
			Warnings []warningJSON `json:"warnings"`
			Notes    []string      `json:"notes"`
		}{OK: len(warns) == 0, Servers: servers, Warnings: warns, Notes: notes}
		if err := writeJSON(c.stdout, out); err != nil {
			return err
		}
	} else {
		for _, n := range servers {
			fmt.Fprintf(c.stdout, "server: %s\n", n)
		}
		switch {
		case len(warns) == 0 && len(notes) == 0:
			fmt.Fprintln(c.stdout, "ok: the lock holds on this server, maxmemory-policy cannot evict the gate's keys, maxmemory leaves room, and Redis keeps the keys across a restart")
		case len(warns) == 0:
			fmt.Fprintln(c.stdout, "ok: the lock holds on this server, maxmemory-policy cannot evict the gate's keys, and maxmemory leaves room")
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

// serverNames names each server check reads (every master of a cluster):
// its engine and version as INFO tells them (internal/engine, as
// Gate.Check reads them), printable. A server that refuses INFO is named
// by its address; Gate.Check warns about it.
func serverNames(ctx context.Context, rdb redis.UniversalClient) ([]string, error) {
	var (
		mu    sync.Mutex
		names []string
	)
	err := eachNode(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
		s := engine.Server{Addr: serverAddr(ctx, c)}
		info, err := c.Info(ctx).Result()
		var rerr redis.Error
		switch {
		case err == nil:
			s.Info, s.Sections = engine.Parse(info)
		case !errors.As(err, &rerr):
			return err
		}
		mu.Lock()
		names = append(names, safeLine(s.Name()))
		mu.Unlock()
		return nil
	})
	slices.Sort(names)
	return names, err
}
