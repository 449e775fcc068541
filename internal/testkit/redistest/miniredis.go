package redistest

import (
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Miniredis starts an in-process miniredis and a client for it; both are
// closed in t.Cleanup. Use Advance (or m.FastForward, for TTLs alone) to
// move time without sleeping.
func Miniredis(t testing.TB) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return m, c
}

// Advance moves a miniredis's clock forward by d: its TTLs (FastForward)
// and the time its TIME command reports, which the gate's scripts use for
// deadlines kept in values (an upstream's cooldown). TIME then stays
// at the new time until the next Advance.
func Advance(m *miniredis.Miniredis, d time.Duration) {
	m.FastForward(d)
	now := time.Now()
	if t, ok := clocks.Load(m); ok {
		now = t.(time.Time)
	}
	now = now.Add(d)
	clocks.Store(m, now)
	m.SetTime(now)
}

// clocks holds the time Advance last set, by miniredis.
var clocks sync.Map
