package gate

import (
	"context"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/internal/redisop"
)

// inWave reports whether a permanent failure is part of a wave in the
// gate's scope: ScopePolicy.PermanentWave distinct jobs failing with the
// same permanent reason within ScopePolicy.FailWindow (a changed API, a
// broken prompt template, a billing error nobody has classified), or the
// scope already paused for that reason. Such a failure is not the job's:
// it cools instead of being marked Failed, the scope pauses, and an
// EventWarning (WarnPermanentWave) names the reason. It costs one round
// trip on the scope's slot, for permanent failures only. If Redis cannot
// be asked, the failure is no wave: the settle then fails the same way.
func (g *Gate) inWave(ctx, rctx context.Context, l *Lease, v classify.Verdict) bool {
	p := g.opts.ScopePolicy
	if g.scopeKey == "" || p.PermanentWave <= 0 {
		return false
	}
	n, err := g.scripts.wave.Run(rctx, g.rdb, []string{g.scopeKey, g.scopeKey + ":wave:" + v.Reason},
		v.Reason, l.job, p.PermanentWave, ms(p.FailWindow), ms(p.PauseTTL), ms(g.opts.Lease)).Int()
	if err != nil {
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Op: redisop.Scope, Err: redisError("scope", err)})
		return false
	}
	// The settle that follows pauses the scope and notes it (noteScope).
	if n == 2 && g.obs != nil { // this failure started the wave
		g.emit(ctx, Event{Kind: EventScopePaused, Job: l.job, State: UpstreamCooling, Class: v.Class, Reason: v.Reason, Cooldown: p.PauseTTL})
		g.emit(ctx, Event{Kind: EventWarning, Job: l.job, State: UpstreamCooling, Class: v.Class, Reason: WarnPermanentWave, Cooldown: p.PauseTTL})
	}
	return n > 0
}
