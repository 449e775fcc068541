package persistence

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Server is the part of a go-redis client Read needs: *redis.Client has it.
type Server interface {
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
	Info(ctx context.Context, section ...string) *redis.StringCmd
}

var _ Server = (*redis.Client)(nil)

// Finding is what one server says about its persistence.
type Finding struct {
	// Addr names the server ("" when not known).
	Addr string
	// None: the server persists nothing (appendonly no, no save schedule).
	None bool
	// Unknown says why the settings could not be read in full, "" when
	// they were; the server may or may not persist.
	Unknown string
}

// Warning is the problem None stands for and its fix, in one line.
func (f Finding) Warning() string {
	return fmt.Sprintf("Redis%s persists nothing (appendonly no, no save schedule): a restart forgets every cooldown, failed and done mark, and those jobs run again; set appendonly yes with appendfsync everysec, or a save schedule", on(f.Addr))
}

// Read reads c's persistence: CONFIG GET appendonly and save or, where
// CONFIG is refused (an ACL without +config|get, a managed service), INFO
// persistence's aof_enabled. A server that refuses both, or whose AOF is
// off while its save schedule cannot be read, is Unknown. The error is a
// network failure only.
func Read(ctx context.Context, c Server, addr string) (Finding, error) {
	f := Finding{Addr: addr}
	aof, save, cerr := config(ctx, c)
	if cerr == nil {
		f.None = !aof && strings.TrimSpace(save) == ""
		return f, nil
	}
	var rerr redis.Error
	if !errors.As(cerr, &rerr) {
		return f, cerr
	}
	// CONFIG refused: INFO persistence tells whether the AOF is on, not the
	// RDB schedule.
	info, ierr := c.Info(ctx, "persistence").Result()
	switch {
	case ierr == nil && strings.Contains(info, "aof_enabled:1"):
	case ierr == nil:
		f.Unknown = fmt.Sprintf("cannot read the RDB save schedule%s (%s) and the AOF is off: without RDB snapshots a restart forgets every cooldown, failed and done mark", on(addr), oneLine(cerr.Error()))
	case errors.As(ierr, &rerr):
		f.Unknown = fmt.Sprintf("cannot read the persistence settings%s (%s); make sure Redis persists (appendonly yes), or a restart forgets every cooldown, failed and done mark", on(addr), oneLine(cerr.Error()))
	default:
		return f, ierr
	}
	return f, nil
}

// config reads appendonly and save, one CONFIG GET each.
func config(ctx context.Context, c Server) (aof bool, save string, err error) {
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

func on(addr string) string {
	if addr == "" {
		return ""
	}
	return " on " + addr
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
