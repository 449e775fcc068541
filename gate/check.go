package gate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/engine"
	"github.com/retrygate/retrygate/internal/persistence"
)

// Warning is one problem Check found. It is advice: the gate runs. But a
// guarantee in the package doc may not hold, or every call may fail.
type Warning struct {
	// Reason is one of the Warn* constants Check reports.
	Reason string
	// Addr is the server it concerns ("" when not known).
	Addr string
	// Engine and Version name the server's software as its INFO reports
	// it ("Redis" "7.0.15", "Valkey", "KeyDB", "Dragonfly", "Garnet").
	// Both are "" when INFO could not be read.
	Engine, Version string
	// Policy is the maxmemory-policy read, if any.
	Policy string
	// Message explains the problem and the fix, in one line.
	Message string
}

func (w Warning) String() string { return w.Message }

// Check reads what the gate's Redis is and how it is set up. It reads
// every master of a cluster and every shard of a ring. Call it once at
// start-up and log the warnings. It returns a Warning for each server
// where a guarantee fails:
//   - a maxmemory-policy that evicts keys with a TTL (WarnEvictionPolicy);
//   - no persistence (WarnNoPersistence);
//   - a Redis before 7.0 (WarnServerVersion);
//   - KeyDB's multi-master (WarnMultiMaster);
//   - non-atomic scripts (WarnScriptsNotAtomic, WarnScriptsUnchecked);
//   - no maxmemory or little room left (WarnNoMaxmemory,
//     WarnMemoryNearlyFull).
//
// The version, multi-master and script warnings name engines that break
// the lock. Each message names the server and the fix. Each warning is
// also sent to the Observer as an EventWarning.
//
// A server may refuse CONFIG GET or INFO. They are disabled or renamed on
// managed Redis, or an ACL lacks +config|get +info. That yields a
// WarnUnchecked warning, not an error. Check returns an error matching
// ErrUnavailable only when Redis cannot be reached. It writes nothing and
// never changes the server's configuration.
func (g *Gate) Check(ctx context.Context) ([]Warning, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, g.opts.Redis.Timeout, errRedisTimeout)
	defer cancel()

	ss, _, err := g.store.Servers(ctx)
	if err != nil {
		return nil, redisError(ctx, "check", err)
	}
	var warns []Warning
	infoPolicy := map[string]string{}
	byAddr := map[string]engine.Server{}
	for _, sv := range ss {
		warns = append(warns, serverWarnings(sv)...)
		if v, ok := sv.Info["maxmemory_policy"]; ok {
			infoPolicy[sv.Addr] = v
		}
		byAddr[sv.Addr] = sv
	}
	ps, checked, err := g.store.Policies(ctx)
	for _, p := range ps {
		// CONFIG GET refused or silent (an ACL with +info only, Dragonfly).
		// INFO's memory section says the policy too.
		if v, ok := infoPolicy[p.Addr]; ok && (p.Missing || p.Refusal != nil) {
			p = store.Policy{Addr: p.Addr, Value: v}
		}
		if w := policyWarning(p); w != nil {
			warns = append(warns, *w)
		}
	}
	if !checked {
		warns = append(warns, Warning{Reason: WarnUnchecked,
			Message: fmt.Sprintf("gate: cannot check maxmemory-policy through a %T (no CONFIG GET); make sure it is noeviction", g.store.Client())})
	}
	if err == nil {
		var fs []persistence.Finding
		fs, _, err = g.store.Persistence(ctx)
		for _, f := range fs {
			if f.None {
				warns = append(warns, Warning{Reason: WarnNoPersistence, Addr: f.Addr, Message: "gate: " + f.Warning()})
			}
		}
	}
	if err != nil {
		return warns, redisError(ctx, "check", err)
	}
	// What a server says (its version, its error replies) reaches logs
	// and terminals. So it carries no control characters.
	for i := range warns {
		w := &warns[i]
		if sv, ok := byAddr[w.Addr]; ok && w.Engine == "" {
			w.Engine, w.Version = sv.Engine()
		}
		w.Message, w.Engine, w.Version, w.Policy = printableLine(w.Message), printableLine(w.Engine), printableLine(w.Version), printableLine(w.Policy)
	}
	// ForEachMaster runs in parallel. Report in a stable order.
	sortWarnings(warns)
	if g.obs != nil {
		for _, w := range warns {
			g.emit(ctx, Event{Kind: EventWarning, Reason: w.Reason, Err: errors.New(w.Message)})
		}
	}
	return warns, nil
}

// policyWarning is the warning one server's policy deserves. nil for none.
func policyWarning(p store.Policy) *Warning {
	on := ""
	if p.Addr != "" {
		on = " on " + p.Addr
	}
	switch {
	case p.Refusal != nil:
		return &Warning{Reason: WarnUnchecked, Addr: p.Addr,
			Message: fmt.Sprintf("gate: cannot read maxmemory-policy%s (%s); make sure it is noeviction, or cooldowns may end early under memory pressure", on, oneLine(p.Refusal.Error()))}
	case p.Missing:
		return &Warning{Reason: WarnUnchecked, Addr: p.Addr,
			Message: fmt.Sprintf("gate: the server%s does not report maxmemory-policy; make sure it is noeviction", on)}
	case evictsTTLKeys(p.Value):
		fix := "use noeviction"
		if strings.EqualFold(p.Value, "eviction") {
			fix = "use noeviction (Dragonfly: start it without --cache_mode)"
		}
		return &Warning{Reason: WarnEvictionPolicy, Addr: p.Addr, Policy: p.Value,
			Message: fmt.Sprintf("gate: maxmemory-policy is %s%s: under memory pressure Redis may evict cooldown and failed marks, so jobs retry early; %s", p.Value, on, fix)}
	}
	return nil
}

// evictsTTLKeys reports whether a maxmemory-policy may evict keys that
// have a TTL. Every gate key has one. So volatile-* policies evict them
// first. allkeys-* ones evict them as readily as any other key.
// Dragonfly's INFO says "eviction" when it runs with --cache_mode
// (src/server/server_family.cc).
func evictsTTLKeys(policy string) bool {
	p := strings.ToLower(policy)
	return strings.HasPrefix(p, "volatile-") || strings.HasPrefix(p, "allkeys-") || p == "eviction"
}

// memoryNearlyFull is the share of maxmemory in use past which Check
// warns (WarnMemoryNearlyFull).
const memoryNearlyFull = 0.9

// serverWarnings are the warnings one server deserves by what it says
// about itself. They concern its engine and its memory.
func serverWarnings(s engine.Server) []Warning {
	name, version := s.Engine()
	warn := func(reason, format string, a ...any) Warning {
		return Warning{Reason: reason, Addr: s.Addr, Engine: name, Version: version,
			Message: "gate: " + fmt.Sprintf(format, a...)}
	}
	if s.InfoRefusal != nil {
		return []Warning{warn(WarnUnchecked, "cannot read INFO%s (%s), so cannot tell which server it is or how much memory it has; allow +info, or make sure it is Redis 7.0 or later with maxmemory set",
			onAddr(s.Addr), oneLine(s.InfoRefusal.Error()))}
	}
	var ws []Warning
	switch name {
	case engine.Redis, engine.KeyDB:
		if major, ok := majorVersion(s.Info["redis_version"]); ok && major < 7 {
			ws = append(ws, warn(WarnServerVersion, "%s is a Redis before 7.0 (redis_version %s), which refuses the acquire's SET NX GET: every call fails closed; use Redis 7.0 or later, or Valkey",
				s.Name(), s.Info["redis_version"]))
		}
	}
	switch {
	case name == engine.KeyDB && (strings.EqualFold(s.ActiveReplica, "yes") || s.Info["role"] == "active-replica"):
		ws = append(ws, warn(WarnMultiMaster, "%s runs with active-replica (or multi-master): replicas take writes and the last write wins, so two processes can take the same job on two nodes; set active-replica no and multi-master no, and point every gate at one master",
			s.Name()))
	case name == engine.Dragonfly && s.Probe == engine.ProbeRan:
		ws = append(ws, warn(WarnScriptsNotAtomic, "%s lets scripts touch keys they do not declare: it was started with --default_lua_flags=disable-atomicity, which runs scripts non-atomically so two processes can take the same job, or allow-undeclared-keys, which locks the whole store for each script; start it without disable-atomicity",
			s.Name()))
	case name == engine.Garnet && s.Probe == engine.ProbeRefused && strings.Contains(s.ProbeReply, "scripting support disabled"):
		ws = append(ws, warn(WarnScriptsNotAtomic, "%s runs no Lua scripts (%s): every call fails; start it with --lua --lua-transaction-mode",
			s.Name(), oneLine(s.ProbeReply)))
	case name == engine.Garnet:
		ws = append(ws, warn(WarnScriptsUnchecked, "%s does not say whether it runs Lua scripts as transactions: without --lua-transaction-mode two processes can take the same job; make sure it was started with --lua --lua-transaction-mode",
			s.Name()))
	case s.Probe == engine.ProbeRefused:
		ws = append(ws, warn(WarnScriptsUnchecked, "cannot tell whether %s runs scripts atomically (%s); make sure its scripts are atomic",
			s.Name(), oneLine(s.ProbeReply)))
	}
	limit, okLimit := infoInt(s.Info, "maxmemory")
	used, okUsed := infoInt(s.Info, "used_memory")
	switch {
	case okLimit && limit == 0:
		ws = append(ws, warn(WarnNoMaxmemory, "%s has no maxmemory: a flood of distinct job ids, each kept for Retention.Attempts, can take the machine's memory; set maxmemory (with maxmemory-policy noeviction) and bound the ids a client can create",
			s.Name()))
	case okLimit && okUsed && float64(used) >= memoryNearlyFull*float64(limit):
		ws = append(ws, warn(WarnMemoryNearlyFull, "%s uses %d of its maxmemory %d bytes (%.0f %%): once full it refuses every new job with OOM; raise maxmemory, or find what fills it",
			s.Name(), used, limit, 100*float64(used)/float64(limit)))
	}
	return ws
}

// majorVersion is the major number of a version such as "6.2.14".
func majorVersion(v string) (int, bool) {
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	return n, err == nil
}

// infoInt reads an integer field of INFO.
func infoInt(info map[string]string, field string) (int64, bool) {
	v, ok := info[field]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	return n, err == nil
}

func onAddr(addr string) string {
	if addr == "" {
		return ""
	}
	return " on " + addr
}

func sortWarnings(ws []Warning) {
	slices.SortStableFunc(ws, func(a, b Warning) int { return cmp.Compare(a.Addr, b.Addr) })
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// printableLine is s on one line. Every character that is not printable,
// and every byte that is not UTF-8, is escaped as in a Go string.
func printableLine(s string) string {
	s = oneLine(s)
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case unicode.IsPrint(r):
			b.WriteString(s[:n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		s = s[n:]
	}
	return b.String()
}
