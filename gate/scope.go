package gate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/retrygate/retrygate/classify"
)

// ScopeState is the state of an upstream scope.
type ScopeState uint8

const (
	// ScopeOpen: calls of the scope may run.
	ScopeOpen ScopeState = iota
	// ScopeCooling: a provider-wide transient failure (rate limit, overload,
	// repeated 5xx) cooled the scope; it reopens by itself.
	ScopeCooling
	// ScopePaused: a systemic failure (quota, credentials, model) paused the
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
	// RetryAfter is the time left in the cooldown or pause.
	RetryAfter time.Duration
	// Reason is the classification code that cooled or paused the scope.
	Reason string
}

func scopeStatusOf(v string, p int64) UpstreamStatus {
	st := ScopeCooling
	if strings.HasPrefix(v, "p:") {
		st = ScopePaused
	}
	_, reason, _ := strings.Cut(v, ":")
	return UpstreamStatus{State: st, RetryAfter: pttl(p), Reason: reason}
}

type scopeOp string

const (
	scopeNone  scopeOp = ""
	scopeCool  scopeOp = "c"
	scopePause scopeOp = "p"
	scopeCount scopeOp = "f" // one more 5xx in the sliding window
)

type scopeUpdate struct {
	op  scopeOp
	ttl time.Duration
}

// scopeUpdateFor decides what a settle does to the upstream scope:
// provider-wide transient failures cool it for the server's hint (else
// ScopeCooldown), systemic failures pause it, and other 5xx count toward
// ScopeAllowedFails.
func (g *Gate) scopeUpdateFor(op settleOp, v classify.Verdict) scopeUpdate {
	if g.scopeKey == "" {
		return scopeUpdate{}
	}
	switch {
	case op == opSystemic:
		return scopeUpdate{op: scopePause, ttl: g.opts.ScopePolicy.PauseTTL}
	case op == opTransient && v.ProviderWide:
		ttl := g.opts.ScopePolicy.Cooldown
		if v.RetryAfter > 0 {
			ttl = v.RetryAfter
		}
		return scopeUpdate{op: scopeCool, ttl: ttl}
	case op == opTransient && v.Reason == classify.ReasonUpstream5xx:
		return scopeUpdate{op: scopeCount, ttl: g.opts.ScopePolicy.Cooldown}
	}
	return scopeUpdate{}
}

type scopeResult struct {
	status UpstreamStatus
	err    error
}

// updateScope applies su on the scope's own slot (multi-node clients).
func (g *Gate) updateScope(ctx context.Context, su scopeUpdate, reason, member string) scopeResult {
	v, err := g.scripts.scope.Run(ctx, g.rdb, []string{g.scopeKey, g.scopeFails},
		string(su.op), reason, ms(su.ttl), g.opts.ScopePolicy.AllowedFails, ms(g.opts.ScopePolicy.FailWindow), member).Slice()
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

// readScope reads the scope key; nil when the scope is open.
func (g *Gate) readScope(ctx context.Context) (*scopeReply, error) {
	v, err := scopeCheckScript.Run(ctx, g.rdb, []string{g.scopeKey}).Slice()
	if err != nil {
		return nil, err
	}
	if len(v) < 2 {
		return nil, fmt.Errorf("unexpected scope reply %v", v)
	}
	s, ok := v[0].(string)
	if !ok {
		return nil, nil
	}
	p, _ := v[1].(int64)
	return &scopeReply{value: s, pttl: p}, nil
}

// noteScope remembers until when this process knows the scope cools: a
// multi-node client then reads the scope before the acquire, and no client
// takes the refusal fast path (hint.go), so the scope's refusal comes first.
func (g *Gate) noteScope(left time.Duration) {
	if left > 0 {
		g.scopeHint.Store(time.Now().Add(left).UnixNano())
	}
}

// scopeMayCool reports whether this process last saw the scope cooling and
// that cooldown has not ended yet.
func (g *Gate) scopeMayCool() bool {
	h := g.scopeHint.Load()
	return h != 0 && time.Now().UnixNano() < h
}

func (g *Gate) refuseScope(ctx context.Context, job string, s *scopeReply) error {
	st := scopeStatusOf(s.value, s.pttl)
	g.noteScope(st.RetryAfter)
	b := &BlockedError{Job: job, State: UpstreamCooling, Scope: g.opts.Scope,
		RetryAfter: st.RetryAfter, Reason: st.Reason, Paused: st.State == ScopePaused}
	if g.obs != nil {
		g.emit(ctx, Event{Kind: EventRefused, Job: job, State: UpstreamCooling, Reason: st.Reason, Cooldown: st.RetryAfter})
	}
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
	s, err := g.readScope(ctx)
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
