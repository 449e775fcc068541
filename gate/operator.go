package gate

import (
	"context"
	"fmt"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
)

// ReasonOperator is the Reason of an upstream paused by PauseUpstream. It
// is also the Reason of every refusal and event that pause causes. The
// operator's words are in UpstreamStatus.Note.
const ReasonOperator = "operator"

// PauseUpstream pauses the gate's upstream name for d, with the operator's
// reason (a key rotation, an incident). Every process refuses its calls
// from its next acquire. The refusal matches ErrUpstreamCooling and names
// the reason and the time left. The pause ends by itself after d, or when
// ResumeUpstream ends it. It replaces a cooldown or pause the upstream
// had. The reason is kept as UpstreamStatus.Note, without control
// characters and cut to 200 bytes. An error matching ErrInvalidOptions
// means d is not positive, or name is not one of the gate's upstreams
// (Options.Upstream, Fallbacks).
func (g *Gate) PauseUpstream(ctx context.Context, name string, d time.Duration, reason string) error {
	if d <= 0 {
		return fmt.Errorf("%w: PauseUpstream: the pause must be positive, not %v", ErrInvalidOptions, d)
	}
	st, ok, err := g.ups.Pause(ctx, g.store, name, store.Pause{Reason: ReasonOperator, Note: reason, TTL: d})
	switch {
	case !ok:
		return notAnUpstream("PauseUpstream", name)
	case err != nil:
		return redisError(ctx, "upstream pause", err)
	}
	g.emit(ctx, Event{Kind: EventUpstreamPaused, Upstream: name, State: UpstreamCooling, Reason: ReasonOperator, Cooldown: st.RetryAfter})
	return nil
}

// ResumeUpstream ends the pause PauseUpstream set on the gate's upstream
// name before its time. It leaves a cooldown or pause the provider caused
// as it is (ResetUpstreams ends those). Without such a pause it does
// nothing. An error matching ErrInvalidOptions means name is not one of
// the gate's upstreams.
func (g *Gate) ResumeUpstream(ctx context.Context, name string) error {
	_, ok, err := g.ups.Resume(ctx, g.store, name, ReasonOperator)
	switch {
	case !ok:
		return notAnUpstream("ResumeUpstream", name)
	case err != nil:
		return redisError(ctx, "upstream resume", err)
	}
	return nil
}

func notAnUpstream(op, name string) error {
	return fmt.Errorf("%w: %s: %q is not an upstream of this gate (Options.Upstream or Fallbacks)", ErrInvalidOptions, op, name)
}
