package store

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/internal/code"
)

// An upstream's operations (lua/upstream_*.lua, lua/window_count.lua).
// Every one names the upstream by its key; a probe holds the upstream for
// a lease (Config.Lease), and a cooldown's key outlives its wait by as
// long, so the first call after it claims the probe.

// UpstreamRead is an upstream's value read with Redis's clock.
type UpstreamRead struct {
	Upstream Upstream
	TTL      time.Duration // its key's time left
	Now      int64         // Redis ms
}

// ReadUpstream queues read.lua for an upstream's key.
func (t *Trip) ReadUpstream(ctx context.Context, key string) Reply[UpstreamRead] {
	return Reply[UpstreamRead]{t.eval(ctx, readScript, []string{key}), decodeUpstreamRead}
}

func decodeUpstreamRead(c redis.Cmder) (UpstreamRead, error) {
	val, p, now, err := decodeRead(c)
	if err != nil {
		return UpstreamRead{}, err
	}
	return UpstreamRead{Upstream: parseUpstream(val), TTL: pttl(p), Now: now}, nil
}

// Claim is upstream_claim.lua's answer.
type Claim struct {
	Ready   bool // no key: nothing to claim, the call runs as usual
	Claimed bool // this call probes; Level is the stops in a row so far
	Level   int
	// Refused: the value that refused, and its wait.
	Value Upstream
	Wait  time.Duration
}

// Claim queues upstream_claim.lua: ask for the upstream's probe for token.
func (t *Trip) Claim(ctx context.Context, key string, token Token) Reply[Claim] {
	return Reply[Claim]{t.eval(ctx, upstreamClaimScript, []string{key}, token.Token, t.s.lease), decodeClaim}
}

// decodeClaim reads {1} ready, {2, level} claimed, {0, value, wait ms}
// refused.
func decodeClaim(c redis.Cmder) (Claim, error) {
	v, err := slice(c)
	if err != nil {
		return Claim{}, err
	}
	kind, ok := replyInt(v, 0)
	switch {
	case ok && kind == 1 && len(v) == 1:
		return Claim{Ready: true}, nil
	case ok && kind == 2 && len(v) == 2:
		n, ok := replyInt(v, 1)
		if ok {
			return Claim{Claimed: true, Level: int(n)}, nil
		}
	case ok && kind == 0 && len(v) == 3:
		val, ok1 := replyString(v, 1)
		w, ok2 := replyInt(v, 2)
		if ok1 && ok2 {
			return Claim{Value: parseUpstream(val), Wait: pttl(w)}, nil
		}
	}
	return Claim{}, badReply("claim", v)
}

// CancelProbe queues upstream_cancel.lua: give the probe token claimed
// back, so the next call probes at once. It reports whether it was the
// probe.
func (t *Trip) CancelProbe(ctx context.Context, key string, token Token) Reply[bool] {
	return Reply[bool]{t.eval(ctx, t.s.scripts.upstreamCancel, []string{key}, token.Token, t.s.lease), decodeFlag}
}

// RecoverUpstream queues upstream_recover.lua: the probe's call reached the
// upstream; make it ready for every call. It reports whether token was the
// probe.
func (t *Trip) RecoverUpstream(ctx context.Context, key string, token Token) Reply[bool] {
	return Reply[bool]{t.eval(ctx, t.s.scripts.upstreamRecover, []string{key}, token.Token), decodeFlag}
}

// Stop is what a provider-wide failure writes to an upstream.
type Stop struct {
	Pause  bool // pause, else cool
	Reason string
	TTL    time.Duration
	// Clear is a window (a sliding count's key) the stop empties; "" for
	// none.
	Clear string
}

// Stopped is upstream_stop.lua's answer: the upstream's value after it
// and its wait, and whether this call wrote it (a stop never shortens a
// longer wait, a cooldown never replaces a pause, and a call that is not
// the probe never ends another's probe).
type Stopped struct {
	Value   Upstream
	Wait    time.Duration
	Wrote   bool
	Present bool // the upstream has a value (it refuses calls)
}

// StopUpstream queues upstream_stop.lua for the run holding token.
func (t *Trip) StopUpstream(ctx context.Context, key string, token Token, s Stop) Reply[Stopped] {
	keys := []string{key}
	if s.Clear != "" {
		keys = append(keys, s.Clear)
	}
	mode := "c"
	if s.Pause {
		mode = "p"
	}
	cmd := t.eval(ctx, t.s.scripts.upstreamStop, keys, mode, token.Token, s.Reason, max(ms(s.TTL), 1), t.s.lease)
	return Reply[Stopped]{cmd, decodeStopped}
}

// decodeStopped reads {value or false, wait ms, 1 wrote / 0 kept}.
func decodeStopped(c redis.Cmder) (Stopped, error) {
	v, err := slice(c)
	if err != nil {
		return Stopped{}, err
	}
	w, ok1 := replyInt(v, 1)
	n, ok2 := replyInt(v, 2)
	if !ok1 || !ok2 || len(v) != 3 {
		return Stopped{}, badReply("stop", v)
	}
	val, _ := replyString(v, 0)
	return Stopped{Value: parseUpstream(val), Wait: pttl(w), Wrote: n == 1, Present: val != ""}, nil
}

// Count queues window_count.lua: add member to the sliding window at key
// (span long); the reply is the members in the window.
func (t *Trip) Count(ctx context.Context, window, member string, span time.Duration) Reply[int64] {
	return Reply[int64]{t.eval(ctx, windowCountScript, []string{window}, member, ms(span)), decodeCount}
}

func decodeCount(c redis.Cmder) (int64, error) { return c.(*redis.Cmd).Int64() }

// WaveCount is a permanent failure counted in its reason's window, with
// its upstream's value read in the same step.
type WaveCount struct {
	N        int64 // the distinct jobs in the window, this one counted
	Upstream Upstream
}

// CountWave queues window_count.lua for a wave's window and its
// upstream's key: the count and the value, in one step.
func (t *Trip) CountWave(ctx context.Context, window, upstream, member string, span time.Duration) Reply[WaveCount] {
	cmd := t.eval(ctx, windowCountScript, []string{window, upstream}, member, ms(span))
	return Reply[WaveCount]{cmd, func(c redis.Cmder) (WaveCount, error) {
		v, err := c.(*redis.Cmd).Slice()
		if err != nil {
			return WaveCount{}, err
		}
		n, ok := replyInt(v, 0)
		val, ok2 := replyString(v, 1)
		if !ok || !ok2 {
			return WaveCount{}, badReply("wave", v)
		}
		return WaveCount{N: n, Upstream: parseUpstream(val)}, nil
	}}
}

// ResetUpstream queues upstream_reset.lua: end an upstream's cooldown or
// pause and clear its failure windows.
func (t *Trip) ResetUpstream(ctx context.Context, key string, windows ...string) Reply[bool] {
	cmd := t.eval(ctx, t.s.scripts.upstreamReset, append([]string{key}, windows...))
	return Reply[bool]{cmd, func(c redis.Cmder) (bool, error) {
		n, err := c.(*redis.Cmd).Int64()
		return n > 0, err
	}}
}

// Pause is an operator's pause of an upstream.
type Pause struct {
	Reason string // a code: the public Reason of the refusals
	Note   string // the operator's words, made safe (code.Note)
	TTL    time.Duration
}

// PauseUpstream queues upstream_pause.lua: refuse every call of the
// upstream for p.TTL, whatever it held; its key expires with the pause.
func (t *Trip) PauseUpstream(ctx context.Context, key string, p Pause) Reply[Upstream] {
	cmd := t.eval(ctx, t.s.scripts.upstreamPause, []string{key}, p.Reason, code.Note(p.Note), max(ms(p.TTL), 1))
	return Reply[Upstream]{cmd, func(c redis.Cmder) (Upstream, error) {
		v, err := c.(*redis.Cmd).Text()
		return parseUpstream(v), err
	}}
}

// ResumeUpstream queues upstream_resume.lua: end the upstream's pause by
// an operator (its reason reason), and nothing else. It reports whether
// one was ended.
func (t *Trip) ResumeUpstream(ctx context.Context, key, reason string) Reply[bool] {
	cmd := t.eval(ctx, t.s.scripts.upstreamResume, []string{key}, reason)
	return Reply[bool]{cmd, func(c redis.Cmder) (bool, error) {
		n, err := c.(*redis.Cmd).Int64()
		return n > 0, err
	}}
}
