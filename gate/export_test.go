package gate

import (
	"time"
)

// SetWaitHooks installs g's AcquireWait test hooks until the returned
// function restores them: refused runs after the first refusal, before
// the subscription; subscribed after it is confirmed, before each read.
// Call it before g's first wait.
func SetWaitHooks(g *Gate, refused, subscribed func(job string)) (restore func()) {
	old := g.test
	g.test.refused, g.test.subscribed = refused, subscribed
	return func() { g.test = old }
}

// SetGiveCheck sets how long g's givers of turns sleep when the budget
// cannot say when the next call fits. Call it before g's first wait.
func SetGiveCheck(g *Gate, d time.Duration) { g.test.giveCheck = d }

// SetSubscribeHook installs a hook that runs in g's background subscribe
// just before its SUBSCRIBE is sent. Call it before g's first wait.
func SetSubscribeHook(g *Gate, f func(channel string)) { g.hub.Test.Subscribing = f }

// SetPingEvery sets how long g's subscriptions stay silent before a ping
// (and as long again before they are given up). Call it before g's first
// wait or watch.
func SetPingEvery(g *Gate, d time.Duration) { g.hub.Test.PingEvery = d }

// Listeners counts g's live waits and watches.
func Listeners(g *Gate) int { return g.hub.Listeners() }

// SeedCallTimes records n call durations of d in g's estimate of how
// long its calls run.
func SeedCallTimes(g *Gate, d time.Duration, n int) {
	for range n {
		g.calls.add(d)
	}
}

// OptionsOf returns g's options with every default filled in.
func OptionsOf(g *Gate) Options { return g.opts }
