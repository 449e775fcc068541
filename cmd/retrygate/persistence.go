package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// warnNoPersistence: the server keeps nothing across a restart, so a
// restart forgets every cooldown, failed and done mark, and their jobs run
// again. The CLI's own reason, beside the gate's Check reasons.
const warnNoPersistence = "no_persistence"

// persistenceFinding is what checkPersistence learned about one server:
// a warning when it persists nothing, a note when it could not tell.
type persistenceFinding struct {
	addr    string
	warning string // the no_persistence message, or ""
	note    string // why the settings could not be read, or ""
}

// checkPersistence reads, on every master, whether Redis persists the
// gate's keys: CONFIG GET appendonly and save, or, where CONFIG is refused
// (an ACL without +config|get, a managed service), INFO persistence's
// aof_enabled. A server that refuses both gets a note, not a warning: the
// CLI cannot tell.
func checkPersistence(ctx context.Context, rdb redis.UniversalClient) ([]persistenceFinding, error) {
	var (
		mu  sync.Mutex
		out []persistenceFinding
	)
	one := func(ctx context.Context, c *redis.Client) error {
		f, err := persistenceOf(ctx, c)
		if err != nil {
			return err
		}
		mu.Lock()
		out = append(out, f)
		mu.Unlock()
		return nil
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, one)
	case *redis.Client:
		err = one(ctx, c)
	default:
		out = append(out, persistenceFinding{note: fmt.Sprintf("cannot read the persistence settings through a %T; make sure Redis persists (appendonly yes)", rdb)})
	}
	// ForEachMaster runs in parallel: report in a stable order.
	sortFindings(out)
	return out, err
}

func persistenceOf(ctx context.Context, c *redis.Client) (persistenceFinding, error) {
	f := persistenceFinding{addr: serverAddr(ctx, c)}
	on := ""
	if f.addr != "" {
		on = " on " + f.addr
	}
	aof, save, cerr := persistenceConfig(ctx, c)
	if cerr != nil {
		var rerr redis.Error
		if !errors.As(cerr, &rerr) {
			return f, cerr // unreachable: the caller's error
		}
		// CONFIG refused: INFO persistence tells whether the AOF is on,
		// not the RDB schedule.
		info, ierr := c.Info(ctx, "persistence").Result()
		switch {
		case ierr == nil && strings.Contains(info, "aof_enabled:1"):
			return f, nil
		case ierr == nil:
			f.note = fmt.Sprintf("cannot read the RDB save schedule%s (%s) and the AOF is off: without RDB snapshots a restart forgets every cooldown, failed and done mark", on, oneLine(cerr.Error()))
		default:
			f.note = fmt.Sprintf("cannot read the persistence settings%s (%s); make sure Redis persists (appendonly yes), or a restart forgets every cooldown, failed and done mark", on, oneLine(cerr.Error()))
		}
		return f, nil
	}
	if !aof && strings.TrimSpace(save) == "" {
		f.warning = fmt.Sprintf("Redis%s persists nothing (appendonly no, no save schedule): a restart forgets every cooldown, failed and done mark, and those jobs run again; set appendonly yes with appendfsync everysec, or a save schedule", on)
	}
	return f, nil
}

// persistenceConfig reads appendonly and save in one CONFIG GET each.
func persistenceConfig(ctx context.Context, c *redis.Client) (aof bool, save string, err error) {
	m, err := c.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		return false, "", err
	}
	s, err := c.ConfigGet(ctx, "save").Result()
	if err != nil {
		return false, "", err
	}
	return strings.EqualFold(m["appendonly"], "yes"), s["save"], nil
}

// serverAddr names the server a one-node client reached: a Sentinel
// failover client's Addr is the placeholder "FailoverClient", so the
// server says which address the connection reached (CLIENT INFO's laddr).
func serverAddr(ctx context.Context, c *redis.Client) string {
	addr := c.Options().Addr
	if addr != "FailoverClient" {
		return addr
	}
	if info, err := c.ClientInfo(ctx).Result(); err == nil && info.LAddr != "" {
		return info.LAddr
	}
	return ""
}

func sortFindings(fs []persistenceFinding) {
	slices.SortStableFunc(fs, func(a, b persistenceFinding) int { return cmp.Compare(a.addr, b.addr) })
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
