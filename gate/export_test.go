package gate

import "time"

// SetWaitHooks installs AcquireWait's test hooks until the returned
// function restores them: refused runs after the first refusal, before
// the subscription; subscribed after it is confirmed, before each read.
func SetWaitHooks(refused, subscribed func(job string)) (restore func()) {
	r, s := testHookRefused, testHookSubscribed
	testHookRefused, testHookSubscribed = refused, subscribed
	return func() { testHookRefused, testHookSubscribed = r, s }
}

// SetSubscribeHook installs a hook that runs in the background subscribe
// just before its SUBSCRIBE is sent, until the returned function restores
// the previous one.
func SetSubscribeHook(f func(channel string)) (restore func()) {
	var hook *func(string)
	if f != nil {
		hook = &f
	}
	prev := testHookSubscribing.Swap(hook)
	return func() { testHookSubscribing.Store(prev) }
}

// SetPingEvery sets how long g's subscriptions stay silent before a ping
// (and as long again before they are given up). Call it before g's first
// wait or watch.
func SetPingEvery(g *Gate, d time.Duration) { g.hub.pingEvery = d }

// Listeners counts g's live waits and watches.
func Listeners(g *Gate) int { return int(g.hub.listeners.Load()) }

// SeedCallTimes records n call durations of d in g's estimate of how
// long its calls run.
func SeedCallTimes(g *Gate, d time.Duration, n int) {
	for range n {
		g.calls.add(d)
	}
}
