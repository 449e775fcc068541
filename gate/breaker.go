package gate

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

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
	name        string
	prefix      string
	key, fails  string
	grace       any // the lease, ms: how long a probe holds the upstream
	policy      ScopePolicy
	maxCooldown time.Duration

	// refusingUntil (unix ns, local clock) is when the refusal this
	// process last read from the upstream ends. Until then an acquire
	// that finds every upstream so only reads them, with Redis's clock,
	// and writes nothing (acquire.go, peekKnown): it picks the path, never
	// the answer, which always comes from what Redis holds now.
	refusingUntil atomic.Int64
}

func newBreaker(prefix, name string, o Options) *breaker {
	key, fails := keyspace.Scope(prefix, name)
	return &breaker{name: name, prefix: prefix, key: key, fails: fails, grace: ms(o.Lease),
		policy: o.ScopePolicy, maxCooldown: o.MaxCooldown}
}

// permit is a peek's verdict.
type permit uint8

const (
	permitOpen    permit = iota
	permitProbe          // the wait is over: the first call may claim the probe
	permitRefused        // cooling, paused, probing, or a value of another shape
)

// judge reads an upstream value ("" when it has no key) at Redis time now.
func (b *breaker) judge(value string, now int64) (permit, UpstreamStatus) {
	st := UpstreamStatus{Scope: b.name}
	if value == "" {
		return permitOpen, st
	}
	s := parseScope(value)
	st.Reason = s.reason
	wait := time.Duration(s.until-now) * time.Millisecond
	switch s.kind {
	case 0:
		// Not a value the gate wrote (an operator's SET): held, never
		// taken for open, its end unknown; read as its letter says.
		st.State = ScopeCooling
		if value[0] == scopePaused {
			st.State = ScopePaused
		}
		if _, rest, ok := strings.Cut(value, ":"); ok {
			st.Reason, _, _ = strings.Cut(rest, ":")
		}
		return permitRefused, st
	case scopeProbing:
		st.State, st.Probing, st.RetryAfter = ScopeCooling, true, max(wait, time.Millisecond)
		return permitRefused, st
	}
	// The wait is over: the first call may probe (claim, which checks
	// again with Redis's clock).
	if wait <= 0 {
		return permitProbe, UpstreamStatus{Scope: b.name}
	}
	st.State, st.RetryAfter = ScopeCooling, wait
	if s.kind == scopePaused {
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

// queue puts a run's end (decide's scopeWrite) on t, for the run holding
// token; nil when there is nothing to write.
func (b *breaker) queue(ctx context.Context, t *trip, s *writeScripts, w scopeWrite, token string) *redis.Cmd {
	switch w.op {
	case scopeOpen:
		return t.breakerOpen(ctx, s, b.key, token)
	case scopeCancel:
		return t.breakerCancel(ctx, s, b.key, token, b.grace)
	case scopeCool:
		return t.breakerTrip(ctx, s, b.key, "", scopeCooling, token, w.reason, w.ttl, b.grace)
	case scopePause:
		// A pause for a wave's reason starts its count anew.
		return t.breakerTrip(ctx, s, b.key, keyspace.Wave(b.prefix, b.name, w.reason), scopePaused, token, w.reason, w.ttl, b.grace)
	case scopeCount:
		return t.breakerCount(ctx, b.fails, token, b.policy.FailWindow)
	}
	return nil
}

// recorded decodes what queue sent. A 5xx that fills the window past
// ScopePolicy.AllowedFails cools the upstream, in one more round trip.
func (b *breaker) recorded(ctx context.Context, c Client, s *writeScripts, w scopeWrite, token string, cmd *redis.Cmd) (tripReply, error) {
	switch w.op {
	case scopeCool, scopePause:
		return decodeTrip(cmd)
	case scopeCount:
		n, err := cmd.Int64()
		if err != nil || n <= int64(b.policy.AllowedFails) {
			return tripReply{}, err
		}
		var t trip
		cmd = t.breakerTrip(ctx, s, b.key, b.fails, scopeCooling, token, w.reason, w.ttl, b.grace)
		t.exec(ctx, c)
		return decodeTrip(cmd)
	}
	return tripReply{}, cmd.Err()
}

// wave reports whether a permanent failure of job with reason is part of a
// wave in the upstream: ScopePolicy.PermanentWave distinct jobs failing
// with it within ScopePolicy.FailWindow, or the upstream already paused
// (or probing) for it. started is set for the failure that fills the
// window. One round trip, for permanent failures only.
func (b *breaker) wave(ctx context.Context, c Client, reason, job string) (in, started bool, err error) {
	if b.policy.PermanentWave <= 0 {
		return false, false, nil
	}
	var t trip
	peek := t.get(ctx, b.key)
	count := t.breakerCount(ctx, keyspace.Wave(b.prefix, b.name, reason), job, b.policy.FailWindow)
	t.exec(ctx, c)
	v, err := peek.Result()
	if err != nil && !isNil(err) {
		return false, false, err
	}
	n, err := count.Int64()
	if err != nil {
		return false, false, err
	}
	if s := parseScope(v); (s.kind == scopePaused || s.kind == scopeProbing) && s.reason == reason {
		return true, false, nil
	}
	size := int64(b.policy.PermanentWave)
	return n >= size, n == size, nil
}

// claim asks for the probe. An open reply (the key expired meanwhile)
// lets the call run as usual.
func (b *breaker) claim(ctx context.Context, c Client, token string) (claimReply, error) {
	var t trip
	cmd := t.breakerClaim(ctx, b.key, token, b.grace)
	t.exec(ctx, c)
	return decodeClaim(cmd)
}

// unclaim queues on t the give-back of the probe token claimed.
func (b *breaker) unclaim(ctx context.Context, t *trip, s *writeScripts, token string) *redis.Cmd {
	return t.breakerCancel(ctx, s, b.key, token, b.grace)
}

// reset ends the upstream's cooldown or pause and clears its failure
// window.
func (b *breaker) reset(ctx context.Context, c Client, s *writeScripts) error {
	var t trip
	cmd := t.breakerReset(ctx, s, b.key, b.fails)
	t.exec(ctx, c)
	if err := cmd.Err(); err != nil {
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
