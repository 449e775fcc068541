package gate

import (
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/gate/internal/upstream"
)

// UpstreamStatus is the state of one of the gate's upstreams.
type UpstreamStatus struct {
	// Upstream names it: Options.Upstream or one of
	// Options.UpstreamPolicy.Fallbacks. It is "" when the gate has none.
	Upstream string
	// State is Ready, CoolingDown or Paused.
	State State
	// RetryAfter is the time left in the cooldown or pause. While one call
	// probes the upstream after it (Probing), it is the probe's lease left.
	RetryAfter time.Duration
	// Reason is the classification code that cooled or paused it, or
	// ReasonOperator for a pause PauseUpstream set.
	Reason string
	// Note is the operator's reason for a pause PauseUpstream set ("key
	// rotation"), without control characters. It is "" otherwise.
	Note string
	// Probing is set while one call probes the upstream after a cooldown
	// or pause ended. The others stay refused until it settles.
	Probing bool

	// Budget is what the upstream's provider last reported of its rate
	// limits, as admission estimates them now (UpstreamPolicy.IgnoreBudget).
	// Upstreams sets it. It is zero in a refusal, or when no response
	// reported one.
	Budget UpstreamBudget
}

// UpstreamBudget is an upstream's budget: what its provider last reported
// of its rate limits, estimated now. Every process shares it.
type UpstreamBudget struct {
	Requests, Tokens BudgetLimit
	// InFlight counts the calls admitted by the budget and not yet
	// settled. Left has their requests taken already, and the tokens
	// their callers said (WithTokens).
	InFlight int64
	// Spent is set in a refusal by the budget. Less than its reserve
	// would be left after the call. RetryAfter is then the wait until one
	// call fits.
	Spent bool
	// Unreported is set once a response without rate-limit headers
	// settled: the provider reports no budget, and its calls are admitted
	// by the rate learned from its answers (LearnedRPM) instead. Unset
	// too while no response has come back yet.
	Unreported bool
	// LearnedRPM is that rate, in calls a minute: slowly up from one
	// call at a time until the provider's first 429, then held just under
	// what it accepted. 0 while none is known (after an operator's reset,
	// until the next response).
	LearnedRPM int64
}

// BudgetLimit is one rate limit of an UpstreamBudget.
type BudgetLimit struct {
	// Reported: a response reported this limit.
	Reported bool
	// Left is what is left now, less the calls in flight. It is estimated
	// from the last reading, as the limit refills evenly to its size at
	// its reset. It is -1 when unknown: a limit of unknown size past its
	// reset.
	Left int64
	// Limit is the limit's size. 0 when the provider did not say.
	Limit int64
	// Reset is the time until the limit is whole again. -1 when the
	// provider did not say.
	Reset time.Duration
}

func budgetOf(r store.BudgetRead, spent bool) UpstreamBudget {
	limit := func(l store.BudgetLeft) BudgetLimit {
		if !l.Reported {
			return BudgetLimit{}
		}
		return BudgetLimit{Reported: true, Left: l.Left, Limit: l.Limit, Reset: l.Reset}
	}
	return UpstreamBudget{Requests: limit(r.Requests), Tokens: limit(r.Tokens), InFlight: r.Calls, Spent: spent,
		Unreported: r.Unreported, LearnedRPM: r.Learned}
}

// refusing reports whether the upstream refuses calls.
func (u UpstreamStatus) refusing() bool {
	return u.State == CoolingDown || u.State == Paused || u.Probing
}

// statusOf is the public form of an upstream's status.
func statusOf(s upstream.Status) UpstreamStatus {
	return UpstreamStatus{Upstream: s.Name, State: upstreamState(s.Mode), RetryAfter: s.RetryAfter,
		Reason: s.Reason, Note: s.Note, Probing: s.Probing, Budget: budgetOf(s.Limits, s.Budget)}
}

// upstreamState is the public state of an upstream's stored mode.
func upstreamState(m store.Mode) State {
	switch m {
	case store.ModeReady:
		return Ready
	case store.ModePaused:
		return Paused
	}
	return CoolingDown // cooling; a probe or a foreign value reads as its mode says before this
}

func statusesOf(ss []upstream.Status) []UpstreamStatus {
	if ss == nil {
		return nil
	}
	out := make([]UpstreamStatus, len(ss))
	for i, s := range ss {
		out[i] = statusOf(s)
	}
	return out
}

// upstreamRefusal refuses a call every upstream refused. The wait is the
// soonest any of them recovers or admits a call.
func (g *Gate) upstreamRefusal(job string, ss []upstream.Status) *BlockedError {
	told := make([]time.Duration, len(ss)) // each one's own wait
	for i := range ss {
		u := ss[i]
		told[i] = u.RetryAfter
		ss[i].RetryAfter = g.retryIn(refuser{state: UpstreamCooling, left: u.RetryAfter, probing: u.Probing, budget: u.Budget})
	}
	b := &BlockedError{Job: job, State: UpstreamCooling, Upstreams: statusesOf(ss)}
	for i, u := range ss {
		// A caller that waits waits in this upstream's line: for its
		// budget's refill, or for its probe, whose settle gives the turns
		// (a success) or cools it again (the line's head probes next).
		if u.Budget || u.Probing {
			b.line = &lineRefusal{of: i, gap: u.Gap}
			break
		}
	}
	for i, u := range b.Upstreams {
		if i == 0 || u.RetryAfter < b.RetryAfter {
			b.RetryAfter, b.Reason = u.RetryAfter, u.Reason
		}
	}
	if l := b.line; l != nil && l.gap > 0 && b.Upstreams[l.of].RetryAfter == b.RetryAfter {
		// The budget told the call its turn one refill after each turn
		// before it (the callers in line, and the refusals told before
		// it): a caller that cannot wait learns its place too.
		b.Ahead = max(int(told[l.of]/l.gap)-1, 0)
	}
	return b
}

// nextUpstream is the upstream a call would use: the first ready one.
// With none ready, it is the one that recovers soonest.
func nextUpstream(ups []UpstreamStatus) UpstreamStatus {
	if len(ups) == 0 {
		return UpstreamStatus{State: Ready} // upstreams off: nothing refuses
	}
	var soonest UpstreamStatus
	for i, u := range ups {
		if !u.refusing() {
			return u
		}
		if i == 0 || u.RetryAfter < soonest.RetryAfter {
			soonest = u
		}
	}
	return soonest
}
