package engine

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Engines, as Server.Engine names them.
const (
	Redis     = "Redis"
	Valkey    = "Valkey"
	KeyDB     = "KeyDB"
	Dragonfly = "Dragonfly"
	Garnet    = "Garnet"
)

// Server is what one server says about itself: INFO's fields, and for the
// engines whose settings can break the lock what INFO does not tell.
type Server struct {
	// Addr names the server ("" when not known).
	Addr string
	// Info holds the fields of INFO's default sections ("redis_version",
	// "maxmemory", ...); Sections the sections' names, lower case
	// ("server", "keydb"). Both nil when INFO was refused.
	Info     map[string]string
	Sections map[string]bool
	// InfoRefusal is the server's error reply to INFO (an ACL without
	// +info, a renamed command).
	InfoRefusal error
	// ActiveReplica is KeyDB's CONFIG GET active-replica ("yes", "no"; ""
	// when not read or refused).
	ActiveReplica string
	// Probe is what Dragonfly and Garnet answered a script that reads a
	// key it does not declare (ProbeNotSent for other engines).
	Probe Probe
	// ProbeReply is the error reply when Probe is ProbeRefused.
	ProbeReply string
}

// Probe is a server's answer to a script that reads a key it does not
// declare.
type Probe int

const (
	ProbeNotSent Probe = iota
	// ProbeRan: the script ran.
	ProbeRan
	// ProbeUndeclared: the server refused the undeclared key, as a
	// Dragonfly that locks each script's declared keys does.
	ProbeUndeclared
	// ProbeRefused: another error reply (Lua disabled, an ACL).
	ProbeRefused
)

// Engine names the server's engine and its own version, from INFO's
// fields: "" for both when INFO was refused or names no version
// (miniredis). Valkey, Dragonfly and Garnet say who they are in fields of
// their own; KeyDB only by its "# KeyDB" section, and its version is
// redis_version.
func (s Server) Engine() (name, version string) {
	f := s.Info
	switch {
	case f["garnet_version"] != "":
		return Garnet, f["garnet_version"]
	case f["dragonfly_version"] != "":
		return Dragonfly, f["dragonfly_version"]
	case f["valkey_version"] != "" || f["server_name"] == "valkey":
		return Valkey, f["valkey_version"]
	case s.Sections["keydb"]:
		return KeyDB, f["redis_version"]
	case f["redis_version"] != "":
		return Redis, f["redis_version"]
	}
	return "", ""
}

// Name is the engine, its version and the server's address, as an
// operator reads them ("Redis 7.0.15 on 10.0.0.7:6379"); "the server on
// ADDR" when the engine is not known.
func (s Server) Name() string {
	name, v := s.Engine()
	on := ""
	if s.Addr != "" {
		on = " on " + s.Addr
	}
	switch {
	case name == "":
		return "the server" + on
	case v == "":
		return name + on
	}
	return fmt.Sprintf("%s %s%s", name, v, on)
}

// Reader is what Read needs from a single-node client: *redis.Client has
// it.
type Reader interface {
	Info(ctx context.Context, section ...string) *redis.StringCmd
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
	redis.Scripter
}

var _ Reader = (*redis.Client)(nil)

//go:embed probe.lua
var probeLua string

// probeScript reads a key it does not declare (probe.lua).
var probeScript = redis.NewScript(probeLua)

// probeKey is the key the probe reads: nothing writes it.
const probeKey = "retrygate-check-probe"

// Read reads one server: INFO (its default sections), then what its
// engine needs: KeyDB's CONFIG GET active-replica, and the probe script
// on Dragonfly and Garnet. It writes nothing. A reply error is recorded
// in the Server; the error is a network failure only.
func Read(ctx context.Context, c Reader, addr string) (Server, error) {
	s := Server{Addr: addr}
	info, err := c.Info(ctx).Result()
	if err != nil {
		if !isReply(err) {
			return s, err
		}
		s.InfoRefusal = err
		return s, nil
	}
	s.Info, s.Sections = Parse(info)
	switch name, _ := s.Engine(); name {
	case KeyDB:
		m, err := c.ConfigGet(ctx, "active-replica").Result()
		if err != nil && !isReply(err) {
			return s, err
		}
		s.ActiveReplica = m["active-replica"]
	case Dragonfly, Garnet:
		err := probeScript.Run(ctx, c, nil, probeKey).Err()
		switch {
		case err == nil:
			s.Probe = ProbeRan
		case !isReply(err):
			return s, err
		case strings.Contains(err.Error(), "undeclared key"):
			s.Probe = ProbeUndeclared
		default:
			s.Probe, s.ProbeReply = ProbeRefused, err.Error()
		}
	}
	return s, nil
}

// isReply reports whether err is the server's error reply, not a failure
// to reach it.
func isReply(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}

// Parse splits an INFO reply into its fields and its sections' names
// (lower case). Other lines are skipped.
func Parse(info string) (fields map[string]string, sections map[string]bool) {
	fields, sections = map[string]string{}, map[string]bool{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimRight(line, "\r")
		if name, ok := strings.CutPrefix(line, "# "); ok {
			sections[strings.ToLower(strings.TrimSpace(name))] = true
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok && k != "" {
			fields[k] = v
		}
	}
	return fields, sections
}
