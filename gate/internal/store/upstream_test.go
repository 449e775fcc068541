package store

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// upstream_stop.lua is the one script that judges a transition, since it
// must read and write the upstream's key atomically: a stop never
// shortens a longer wait, a cooldown never replaces a pause, a call that
// is not the probe never ends another's probe, the probe's own failure
// stops it one level up, and a foreign value is never overwritten. Each
// rule is a row, on every engine. The current values are written raw:
// the rows are about how the script reads them.
func TestStopUpstreamRules(t *testing.T) {
	const lease = time.Minute
	probe := NewToken()
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			if tg.FastForward != nil {
				tg.FastForward(0) // TIME stays put
			}
			s := New(tg.Client, Config{Lease: lease})
			for _, row := range []struct {
				name  string
				cur   string // "" for no key; {u} is now+delta ms
				delta int64
				pause bool // the stop pauses, else cools
				token Token
				wrote bool
				mode  Mode // the value after, and its level
				level int
			}{
				{name: "ready, cooled", wrote: true, mode: ModeCooling, level: 1},
				{name: "ready, paused", pause: true, wrote: true, mode: ModePaused, level: 1},
				{name: "a longer cooldown kept", cur: "c:overloaded:2:{u}", delta: 60_000, mode: ModeCooling, level: 2},
				{name: "a shorter cooldown lengthened, its level kept", cur: "c:overloaded:2:{u}", delta: 5_000, wrote: true, mode: ModeCooling, level: 2},
				{name: "a cooldown over, cooled again", cur: "c:overloaded:2:{u}", delta: -5_000, wrote: true, mode: ModeCooling, level: 2},
				{name: "a shorter cooldown paused", cur: "c:overloaded:1:{u}", delta: 5_000, pause: true, wrote: true, mode: ModePaused, level: 1},
				{name: "a pause not replaced by a cooldown", cur: "p:quota_exhausted:1:{u}", delta: 5_000, mode: ModePaused, level: 1},
				{name: "a shorter pause lengthened", cur: "p:quota_exhausted:1:{u}", delta: 5_000, pause: true, wrote: true, mode: ModePaused, level: 1},
				{name: "another's probe kept", cur: "h:overloaded:2:{u}:someone", delta: 5_000, pause: true, mode: ModeProbing, level: 2},
				{name: "the probe's own failure, one level up", cur: "h:overloaded:2:{u}:" + probe.Token, delta: 5_000, token: probe, wrote: true, mode: ModeCooling, level: 3},
				{name: "the probe's own systemic failure, one level up", cur: "h:overloaded:2:{u}:" + probe.Token, delta: 5_000, token: probe, pause: true, wrote: true, mode: ModePaused, level: 3},
				{name: "a foreign letter kept", cur: "x:overloaded:1:{u}", delta: -5_000, mode: ModeForeign},
				{name: "a cooldown with a fifth field kept", cur: "c:overloaded:1:{u}:junk", delta: -5_000, mode: ModeForeign},
				{name: "an operator's word kept", cur: "maintenance", pause: true, mode: ModeForeign},
			} {
				t.Run(row.name, func(t *testing.T) {
					p := redistest.Prefix(t)
					key, window := p+"up", p+"fails"
					tm, err := tg.Client.Time(ctx).Result()
					if err != nil {
						t.Fatal(err)
					}
					now := tm.UnixMilli()
					if row.cur != "" {
						cur := strings.ReplaceAll(row.cur, "{u}", strconv.FormatInt(now+row.delta, 10))
						if err := tg.Client.Set(ctx, key, cur, time.Hour).Err(); err != nil {
							t.Fatal(err)
						}
					}
					if err := tg.Client.Set(ctx, window, "1", time.Hour).Err(); err != nil {
						t.Fatal(err)
					}
					token := row.token
					if token.Token == "" {
						token = NewToken()
					}
					const ttl = 10 * time.Second
					tr := s.Trip()
					stop := tr.StopUpstream(ctx, key, token, Stop{Pause: row.pause, Reason: "overloaded", TTL: ttl, Clear: window})
					tr.Send(ctx)
					got, err := stop.Result()
					if err != nil {
						t.Fatal(err)
					}
					if got.Wrote != row.wrote || got.Value.Mode != row.mode || got.Value.Level != row.level || !got.Present {
						t.Fatalf("stop: wrote %v, %c level %d, present %v; want wrote %v, %c level %d, the upstream's value present", got.Wrote, got.Value.Mode, got.Value.Level, got.Present, row.wrote, row.mode, row.level)
					}
					cleared := tg.Client.Exists(ctx, window).Val() == 0
					if cleared != row.wrote {
						t.Errorf("the window cleared: %v, want %v (only by a stop that wrote)", cleared, row.wrote)
					}
					if !row.wrote {
						return
					}
					// The wait ends ttl after now; the key outlives it by a
					// lease, so the first call after it claims the probe.
					if w := got.Value.Until - now; w < ttl.Milliseconds() || w > ttl.Milliseconds()+5_000 {
						t.Errorf("the wait ends %d ms from now, want %d (+ the test's own time)", w, ttl.Milliseconds())
					}
					if pt := tg.Client.PTTL(ctx, key).Val(); pt <= ttl+lease/2 {
						t.Errorf("the key's PTTL %v, want past the wait by about a lease (%v)", pt, lease)
					}
				})
			}
		})
	}
}
