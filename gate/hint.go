package gate

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxCoolingHints bounds the cooldowns a Gate remembers (about 100 bytes
// each plus the job key).
const maxCoolingHints = 4096

// coolingHint is a cooldown (or failed mark) this process was refused by:
// the lock's value then, and when its TTL ends by the local clock. A local
// hint is a failure this process could not write to Redis (lease.go): the
// job is refused in-process until the intended cooldown ends, without
// asking Redis, which never held it.
type coolingHint struct {
	value string
	until time.Time
	local bool
}

// getter is the plain read the refusal fast path needs; every go-redis
// client has it. A redis.Scripter without it always runs the acquire script.
type getter interface {
	Get(ctx context.Context, key string) *redis.StringCmd
}

// noteCooling remembers that job was refused with lock value v until
// until, so the next Acquire of it in this process checks with a GET.
func (g *Gate) noteCooling(job string, h coolingHint) {
	if g.get == nil && !h.local {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.hints) >= maxCoolingHints {
		now := time.Now()
		for k, h := range g.hints {
			if !now.Before(h.until) {
				delete(g.hints, k)
			}
		}
		// Still full: drop a quarter, as the map's iteration order picks
		// them, so the scan above runs once per maxCoolingHints/4 inserts.
		for k := range g.hints {
			if len(g.hints) <= maxCoolingHints*3/4 {
				break
			}
			delete(g.hints, k)
		}
	}
	g.hints[job] = h
}

// refuseKnown is the refusal fast path. For a job this process saw cooling
// down (or failed) whose TTL has not ended by the local clock, it reads the
// lock with a plain GET instead of running the acquire script: the same
// value means the same cooldown, refused with the time left by the local
// clock. Anything else (the cooldown ended, an operator reset it, another
// failure replaced it) forgets the hint, and the caller runs the script.
//
// It is not used while this process has seen the upstream scope cooling:
// the scope's refusal comes first then.
func (g *Gate) refuseKnown(ctx context.Context, l *Lease) (r acquireReply, ok bool, err error) {
	if !l.hinted {
		return r, false, nil
	}
	h := l.hint
	left := time.Until(h.until)
	if h.local && left >= time.Millisecond {
		return acquireReply{kind: "job", value: h.value, pttl: left.Milliseconds(), hinted: true}, true, nil
	}
	if left < time.Millisecond || g.get == nil || (g.scopeKey != "" && g.scopeMayCool()) {
		g.forgetHint(l.job, h)
		return r, false, nil
	}
	v, err := g.get.Get(ctx, l.keys.lock).Result()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return r, false, err
	case v == h.value:
		return acquireReply{kind: "job", value: v, pttl: left.Milliseconds(), hinted: true}, true, nil
	}
	g.forgetHint(l.job, h)
	return r, false, nil
}

// forgetHint drops job's hint if it is still h.
func (g *Gate) forgetHint(job string, h coolingHint) {
	g.mu.Lock()
	if cur, ok := g.hints[job]; ok && cur == h {
		delete(g.hints, job)
	}
	g.mu.Unlock()
}
