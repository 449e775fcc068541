package gate

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/keyspace"
)

// breaker is one upstream's circuit breaker (Options.Scope, and each of
// Options.Fallbacks), kept in Redis so that every process shares it
// (lua/breaker_*.lua, value.go). Its verbs, as failsafe-go's
// CircuitBreaker and x/time/rate's Reservation have them:
//
//   - peek: read its state, a plain GET sent in the acquire's round trip
//     beside the job's acquire, and judge it with Redis's clock (judge);
//   - claim: once a cooldown or pause is over, the first call takes the
//     probe (one more round trip, once per window);
//   - cancel: a probe that did not reach the upstream gives it back;
//   - record: a run's end opens it, cools or pauses it, or counts a 5xx
//     (queue, sent in the settle's round trip);
//   - read and reset, for Status and operators.
//
// A breaker never touches a job's key, and the job scripts never touch an
// upstream's: the gate composes the two (acquire.go, settle.go) the same
// way on one node and on a cluster.
type breaker struct {
	name       string
	prefix     string
	key, fails string
	policy     ScopePolicy

	// refusingUntil (unix ns, local clock) is when the refusal this
	// process last read from the upstream ends. Until then an acquire
	// that finds every upstream so only reads them, with Redis's clock,
	// and writes nothing (acquire.go, peekKnown): it picks the path, never
	// the answer, which always comes from what Redis holds now.
	refusingUntil atomic.Int64
}

func newBreaker(prefix, name string, o Options) *breaker {
	key, fails := keyspace.Scope(prefix, name)
	return &breaker{name: name, prefix: prefix, key: key, fails: fails, policy: o.ScopePolicy}
}

// permit is a peek's verdict.
type permit uint8

const (
	permitOpen    permit = iota
	permitProbe          // the wait is over: the first call may claim the probe
	permitRefused        // cooling, paused, probing, or a value of another shape
)

// judge reads an upstream's value at Redis time now.
func (b *breaker) judge(u store.Upstream, now int64) (permit, UpstreamStatus) {
	st := UpstreamStatus{Scope: b.name, Reason: u.Reason}
	wait := u.Wait(now)
	switch u.Mode {
	case store.Open:
		return permitOpen, UpstreamStatus{Scope: b.name}
	case store.Foreign:
		// Not a value the gate wrote (an operator's SET): held, never
		// taken for open, its end unknown; read as its letter says.
		st.State = ScopeCooling
		if u.Paused {
			st.State = ScopePaused
		}
		return permitRefused, st
	case store.Probe:
		st.State, st.Probing, st.RetryAfter = ScopeCooling, true, max(wait, time.Millisecond)
		return permitRefused, st
	}
	// The wait is over: the first call may probe (claim, which checks
	// again with Redis's clock).
	if wait <= 0 {
		return permitProbe, UpstreamStatus{Scope: b.name}
	}
	st.State, st.RetryAfter = ScopeCooling, wait
	if u.Mode == store.Pause {
		st.State = ScopePaused
	}
	return permitRefused, st
}

// remember notes that the upstream refuses for st.RetryAfter.
func (b *breaker) remember(st UpstreamStatus) {
	b.refusingUntil.Store(time.Now().Add(st.RetryAfter).UnixNano())
}

// forget notes that the upstream was seen not refusing.
func (b *breaker) forget() {
	if b.refusingUntil.Load() != 0 {
		b.refusingUntil.Store(0)
	}
}

// knownRefusing reports whether this process last saw the upstream refuse
// and that refusal has not ended by the local clock.
func (b *breaker) knownRefusing() bool {
	return time.Now().UnixNano() < b.refusingUntil.Load()
}

// record is a run's end queued on a trip (decide's scopeWrite).
type record struct {
	w       scopeWrite
	stopped store.Reply[store.Stopped] // cool, pause
	count   store.Reply[int64]         // count
	done    store.Reply[bool]          // open, cancel
}

// queue puts a run's end (decide's scopeWrite) on t, for the run holding
// token.
func (b *breaker) queue(ctx context.Context, t *store.Trip, w scopeWrite, token store.Token) record {
	r := record{w: w}
	switch w.op {
	case scopeOpen:
		r.done = t.OpenUpstream(ctx, b.key, token)
	case scopeCancel:
		r.done = t.CancelProbe(ctx, b.key, token)
	case scopeCool:
		r.stopped = t.StopUpstream(ctx, b.key, token, store.Stop{Reason: w.reason, TTL: w.ttl})
	case scopePause:
		// A pause for a wave's reason starts its count anew.
		r.stopped = t.StopUpstream(ctx, b.key, token, store.Stop{Pause: true, Reason: w.reason, TTL: w.ttl,
			Clear: keyspace.Wave(b.prefix, b.name, w.reason)})
	case scopeCount:
		r.count = t.Count(ctx, b.fails, token.Token, b.policy.FailWindow)
	}
	return r
}

// recorded decodes what queue sent. A 5xx that fills the window past
// ScopePolicy.AllowedFails cools the upstream, in one more round trip.
func (b *breaker) recorded(ctx context.Context, s *store.Store, r record, token store.Token) (store.Stopped, error) {
	switch r.w.op {
	case scopeCool, scopePause:
		return r.stopped.Result()
	case scopeCount:
		n, err := r.count.Result()
		if err != nil || n <= int64(b.policy.AllowedFails) {
			return store.Stopped{}, err
		}
		t := s.Trip()
		stopped := t.StopUpstream(ctx, b.key, token, store.Stop{Reason: r.w.reason, TTL: r.w.ttl, Clear: b.fails})
		t.Send(ctx)
		return stopped.Result()
	}
	return store.Stopped{}, r.done.Err()
}

// wave reports whether a permanent failure of job with reason is part of a
// wave in the upstream: ScopePolicy.PermanentWave distinct jobs failing
// with it within ScopePolicy.FailWindow, or the upstream already paused
// (or probing) for it. started is set for the failure that fills the
// window. One round trip, for permanent failures only.
func (b *breaker) wave(ctx context.Context, s *store.Store, reason, job string) (in, started bool, err error) {
	if b.policy.PermanentWave <= 0 {
		return false, false, nil
	}
	t := s.Trip()
	peek := t.PeekUpstream(ctx, b.key)
	count := t.Count(ctx, keyspace.Wave(b.prefix, b.name, reason), job, b.policy.FailWindow)
	t.Send(ctx)
	u, err := peek.Result()
	if err != nil {
		return false, false, err
	}
	n, err := count.Result()
	if err != nil {
		return false, false, err
	}
	if (u.Mode == store.Pause || u.Mode == store.Probe) && u.Reason == reason {
		return true, false, nil
	}
	size := int64(b.policy.PermanentWave)
	return n >= size, n == size, nil
}

// claim asks for the probe. An open reply (the key expired meanwhile)
// lets the call run as usual.
func (b *breaker) claim(ctx context.Context, s *store.Store, token store.Token) (store.Claim, error) {
	t := s.Trip()
	c := t.Claim(ctx, b.key, token)
	t.Send(ctx)
	return c.Result()
}

// unclaim queues on t the give-back of the probe token claimed.
func (b *breaker) unclaim(ctx context.Context, t *store.Trip, token store.Token) store.Reply[bool] {
	return t.CancelProbe(ctx, b.key, token)
}

// reset ends the upstream's cooldown or pause and clears its failure
// window.
func (b *breaker) reset(ctx context.Context, s *store.Store) error {
	t := s.Trip()
	r := t.ResetUpstream(ctx, b.key, b.fails)
	t.Send(ctx)
	if err := r.Err(); err != nil {
		return err
	}
	b.forget()
	return nil
}

// ScopeState is the state of an upstream.
type ScopeState uint8

const (
	// ScopeOpen: calls of the upstream may run.
	ScopeOpen ScopeState = iota
	// ScopeCooling: a provider-wide transient failure (rate limit, overload,
	// repeated 5xx) cooled the upstream; it reopens by itself.
	ScopeCooling
	// ScopePaused: a provider-wide systemic failure (quota, credentials) or
	// a wave of one permanent reason paused the upstream until ResetScope
	// or ScopePolicy.PauseTTL.
	ScopePaused
)

var scopeStateNames = [...]string{"open", "cooling", "paused"}

func (s ScopeState) String() string {
	if int(s) < len(scopeStateNames) {
		return scopeStateNames[s]
	}
	return fmt.Sprintf("scope_state(%d)", uint8(s))
}

// UpstreamStatus is the state of one of the gate's upstreams.
type UpstreamStatus struct {
	// Scope names the upstream (Options.Scope or one of Options.Fallbacks;
	// "" when the gate has none).
	Scope string
	State ScopeState
	// RetryAfter is the time left in the cooldown or pause; while one call
	// probes the upstream after it (Probing), the probe's lease left.
	RetryAfter time.Duration
	// Reason is the classification code that cooled or paused it.
	Reason string
	// Probing is set while one call probes the upstream after a cooldown
	// or pause ended; the others stay refused until it settles.
	Probing bool
}

// refusing reports whether the upstream refuses calls.
func (u UpstreamStatus) refusing() bool { return u.State != ScopeOpen || u.Probing }
