package gate

// SetWaitHooks installs AcquireWait's test hooks until the returned
// function restores them: refused runs after the first refusal, before
// the subscription; subscribed after it is confirmed, before each read.
func SetWaitHooks(refused, subscribed func(job string)) (restore func()) {
	r, s := testHookRefused, testHookSubscribed
	testHookRefused, testHookSubscribed = refused, subscribed
	return func() { testHookRefused, testHookSubscribed = r, s }
}

// Listeners counts g's live waits and watches.
func Listeners(g *Gate) int { return int(g.hub.listeners.Load()) }
