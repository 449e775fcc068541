package gate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/internal/redisop"
)

// ScopeState is the state of an upstream scope.
type ScopeState uint8

const (
	// ScopeOpen: calls of the scope may run.
	ScopeOpen ScopeState = iota
	// ScopeCooling: a provider-wide transient failure (rate limit, overload,
	// repeated 5xx) cooled the scope; it reopens by itself.
	ScopeCooling
	// ScopePaused: a provider-wide systemic failure (quota, credentials) paused the
	// scope until ResetScope or ScopePauseTTL.
	ScopePaused
)

var scopeStateNames = [...]string{"open", "cooling", "paused"}

func (s ScopeState) String() string {
	if int(s) < len(scopeStateNames) {
		return scopeStateNames[s]
	}
	return fmt.Sprintf("scope_state(%d)", uint8(s))
}

// UpstreamStatus is the state of the gate's upstream scope.
type UpstreamStatus struct {
	// Scope is Options.Scope ("" when the gate has none).
	Scope string
	State ScopeState
	// RetryAfter is the time left in the cooldown or pause; while one call
	// probes the upstream after it (Probing), the probe's lease left.
	RetryAfter time.Duration
	// Reason is the classification code that cooled or paused the scope.
	Reason string
	// Probing is set while one call probes the upstream after a cooldown
	// or pause ended; the others stay refused until it settles.
	Probing bool
}

// scopeStatusOf decodes a scope value (scope_lib.lua) and its wait.
func scopeStatusOf(v string, wait int64) UpstreamStatus {
	st := UpstreamStatus{State: ScopeCooling, RetryAfter: pttl(wait)}
	kind, rest, _ := strings.Cut(v, ":")
	st.Reason, _, _ = strings.Cut(rest, ":")
	switch kind {
	case "p":
		st.State = ScopePaused
	case "h":
		st.Probing = true
	}
	return st
}

type scopeOp string

const (
	scopeNone  scopeOp = ""
	scopeCool  scopeOp = "c"
	scopePause scopeOp = "p"
	scopeCount scopeOp = "f" // one more 5xx in the sliding window
)

type scopeUpdate struct {
	op     scopeOp
	ttl    time.Duration
	factor float64 // escalation per cooldown in a row (scope_lib.lua)
}

const scopeOpen scopeOp = "o" // the probe's call reached the upstream

// scopeUpdateFor decides what a settle does to the upstream scope:
// provider-wide transient failures cool it for the server's hint (else
// ScopePolicy.Cooldown, escalating by BackoffFactor when the probe after
// a cooldown fails again), provider-wide systemic failures (the key, the
// quota) pause it, and other 5xx count toward ScopePolicy.AllowedFails. A
// systemic failure of one job's request (a model it names that does not
// exist, a permission for that model) cools that job alone. When the lease
// was the scope's probe, any other outcome means the upstream answered:
// the scope opens.
func (g *Gate) scopeUpdateFor(op settleOp, v classify.Verdict, probe bool) scopeUpdate {
	if g.scopeKey == "" {
		return scopeUpdate{}
	}
	p := g.opts.ScopePolicy
	switch {
	case op == opSystemic && v.ProviderWide, op == opWave:
		// A wave keeps the scope paused for its reason (wave.go), and a
		// probe that meets it again pauses it anew.
		return scopeUpdate{op: scopePause, ttl: p.PauseTTL, factor: 1}
	case op == opProviderWide && v.RetryAfter > 0:
		return scopeUpdate{op: scopeCool, ttl: v.RetryAfter, factor: 1} // the provider said when
	case op == opProviderWide:
		return scopeUpdate{op: scopeCool, ttl: p.Cooldown, factor: g.opts.BackoffFactor}
	case op == opTransient && v.Reason == classify.ReasonUpstream5xx && !probe:
		return scopeUpdate{op: scopeCount, ttl: p.Cooldown, factor: g.opts.BackoffFactor}
	case probe:
		return scopeUpdate{op: scopeOpen, factor: 1}
	}
	return scopeUpdate{}
}

type scopeResult struct {
	status UpstreamStatus
	err    error
}

// updateScope applies su on the scope's own slot (multi-node clients).
func (g *Gate) updateScope(ctx context.Context, su scopeUpdate, reason, member string) scopeResult {
	args := append([]any{nil, nil, member}, g.scopeArgs(su, reason)[2:]...)
	args[0], args[1] = string(su.op), reason
	v, err := g.scripts.scope.Run(ctx, g.rdb, []string{g.scopeKey, g.scopeFails}, args...).Slice()
	if err != nil {
		return scopeResult{err: err}
	}
	st, _ := decodeScopePair(v)
	return scopeResult{status: st}
}

type scopeReply struct {
	value string
	pttl  int64
}

// readScope reads the scope on its own slot (scope_check.lua): nil when
// it is open. With a token, the caller claims the probe when the scope's
// wait is over (claimed), and must give it back (unclaimScope) if it does
// not run after all.
func (g *Gate) readScope(ctx context.Context, token string) (s *scopeReply, claimed bool, err error) {
	claim := "0"
	if token != "" {
		claim = "1"
	}
	v, err := scopeCheckScript.Run(ctx, g.rdb, []string{g.scopeKey}, token, g.argLease, claim).Slice()
	if err != nil {
		return nil, false, err
	}
	if len(v) != 2 {
		return nil, false, fmt.Errorf("unexpected scope reply %v", v)
	}
	p, _ := v[1].(int64)
	sv, ok := v[0].(string)
	if !ok {
		return nil, p == 1, nil
	}
	return &scopeReply{value: sv, pttl: p}, false, nil
}

// unclaimScope gives a claimed probe back, so the next call probes.
func (g *Gate) unclaimScope(ctx context.Context, token string) {
	rctx, cancel := g.opCtx(context.WithoutCancel(ctx))
	defer cancel()
	if err := g.scripts.unclaim.Run(rctx, g.rdb, []string{g.scopeKey}, token, g.argLease).Err(); err != nil {
		g.emit(ctx, Event{Kind: EventRedisError, Op: redisop.Scope, Err: redisError("scope", err)})
	}
}

// noteScope remembers until when this process knows the scope cools: a
// multi-node client then reads the scope before the acquire, and no client
// takes the refusal fast path (hint.go), so the scope's refusal comes first.
// The latest reading wins; a wait of 0 says the scope is as good as open.
func (g *Gate) noteScope(left time.Duration) {
	g.scopeHint.Store(time.Now().Add(left).UnixNano())
}

// scopeMayCool reports whether this process last saw the scope cooling and
// that cooldown has not ended yet (never, before any reading: the hint is
// 0).
func (g *Gate) scopeMayCool() bool {
	return time.Now().UnixNano() < g.scopeHint.Load()
}

func (g *Gate) refuseScope(ctx context.Context, job string, s *scopeReply) error {
	st := scopeStatusOf(s.value, s.pttl)
	g.noteScope(st.RetryAfter)
	b := &BlockedError{Job: job, State: UpstreamCooling, Scope: g.opts.Scope,
		RetryAfter: st.RetryAfter, Reason: st.Reason, Paused: st.State == ScopePaused}
	g.emit(ctx, Event{Kind: EventRefused, Job: job, State: UpstreamCooling, Reason: st.Reason, Cooldown: st.RetryAfter})
	return b
}

func (g *Gate) emitScope(ctx context.Context, job string, su scopeUpdate, up UpstreamStatus, v classify.Verdict) {
	if g.obs == nil || su.op == scopeNone {
		return
	}
	kind := EventScopeCooling
	if up.State == ScopePaused {
		kind = EventScopePaused
	}
	g.emit(ctx, Event{Kind: kind, Job: job, State: UpstreamCooling, Class: v.Class, Reason: up.Reason, Cooldown: up.RetryAfter})
}

// ScopeStatus reads the upstream scope's state; ScopeOpen without a Scope.
func (g *Gate) ScopeStatus(ctx context.Context) (UpstreamStatus, error) {
	if g.scopeKey == "" {
		return UpstreamStatus{}, nil
	}
	s, _, err := g.readScope(ctx, "")
	if err != nil {
		return UpstreamStatus{}, redisError("scope status", err)
	}
	if s == nil {
		return UpstreamStatus{Scope: g.opts.Scope}, nil
	}
	st := scopeStatusOf(s.value, s.pttl)
	st.Scope = g.opts.Scope
	return st, nil
}

// ResetScope ends the upstream scope's cooldown or pause and clears its
// failure window (operator action, e.g. after topping up the quota).
func (g *Gate) ResetScope(ctx context.Context) error {
	if g.scopeKey == "" {
		return nil
	}
	if err := g.scripts.scopeReset.Run(ctx, g.rdb, []string{g.scopeKey, g.scopeFails}).Err(); err != nil {
		return redisError("scope reset", err)
	}
	return nil
}
