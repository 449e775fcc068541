package gate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/retrygate/retrygate/gate/internal/store"
)

// Warning is one problem Check found. It is advice: the gate works, but a
// guarantee in the package doc may not hold.
type Warning struct {
	// Reason is WarnEvictionPolicy or WarnUnchecked.
	Reason string
	// Addr is the server it concerns ("" when not known).
	Addr string
	// Policy is the maxmemory-policy read, if any.
	Policy string
	// Message explains the problem and the fix, in one line.
	Message string
}

func (w Warning) String() string { return w.Message }

// Check reads the maxmemory-policy of the gate's Redis (every master of a
// cluster, every shard of a ring) and returns a Warning for each server
// whose policy can evict keys with a TTL, which would silently end
// cooldowns early. Each warning is also sent to the Observer as an
// EventWarning. Call it once at start-up and log the warnings.
//
// A server that refuses CONFIG GET (disabled or renamed on managed Redis,
// or an ACL without the permission) yields a WarnUnchecked warning, not an
// error. Check returns an error matching ErrUnavailable only when Redis
// cannot be reached. It never changes the server's configuration.
func (g *Gate) Check(ctx context.Context) ([]Warning, error) {
	ctx, cancel := g.opCtx(ctx)
	defer cancel()

	ps, checked, err := g.store.Policies(ctx)
	var warns []Warning
	for _, p := range ps {
		if w := policyWarning(p); w != nil {
			warns = append(warns, *w)
		}
	}
	if !checked {
		warns = append(warns, Warning{Reason: WarnUnchecked,
			Message: fmt.Sprintf("gate: cannot check maxmemory-policy through a %T (no CONFIG GET); make sure it is noeviction", g.store.Client())})
	}
	if err != nil {
		return warns, redisError("check", err)
	}
	// ForEachMaster runs in parallel: report in a stable order.
	sortWarnings(warns)
	if g.obs != nil {
		for _, w := range warns {
			g.emit(ctx, Event{Kind: EventWarning, Reason: w.Reason, Err: errors.New(w.Message)})
		}
	}
	return warns, nil
}

// policyWarning is the warning one server's policy deserves, nil for none.
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
		return &Warning{Reason: WarnEvictionPolicy, Addr: p.Addr, Policy: p.Value,
			Message: fmt.Sprintf("gate: maxmemory-policy is %s%s: under memory pressure Redis may evict cooldown and failed marks, so jobs retry early; use noeviction", p.Value, on)}
	}
	return nil
}

// evictsTTLKeys reports whether a maxmemory-policy may evict keys that
// have a TTL: every gate key has one, so volatile-* policies evict them
// first and allkeys-* ones as readily as any other key.
func evictsTTLKeys(policy string) bool {
	p := strings.ToLower(policy)
	return strings.HasPrefix(p, "volatile-") || strings.HasPrefix(p, "allkeys-")
}

func sortWarnings(ws []Warning) {
	slices.SortStableFunc(ws, func(a, b Warning) int { return cmp.Compare(a.Addr, b.Addr) })
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
