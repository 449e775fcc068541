// Package hub is the gate's pub/sub multiplexer: the subscriptions behind
// its waits and watches. Every script that changes a job's or an
// upstream's state publishes on the channel named as the key it changed;
// a Hub keeps one redis.PubSub per Redis server that holds a watched
// channel (one on a single node; one per master on a cluster, since
// go-redis sends every SSUBSCRIBE of a PubSub on one connection routed by
// its first channel), created on the first Listen and closed Linger after
// the last. The listeners of one channel share its subscription.
//
// A Listener is woken (never told what changed: it re-reads) by a message
// on one of its channels, by Hub.Local (a settle in this process), and
// whenever a message may have been missed: the connection broke, was
// re-established and resubscribed, or Redis dropped the subscription (a
// cluster slot moved). Where no subscription is confirmed (the client
// cannot subscribe, Redis refused it, the connection is down) Ready
// reports false and the listener's owner polls; the Hub says so through
// Config.Warn, at most once per Retry: a cause that persists (an ACL, a
// slot map that lags a moved slot, a busy script) warns once, not at
// every poll step.
//
// A Hub holds no pointer to the gate: what it needs (how to subscribe,
// how to warn) is its Config. It is safe for concurrent use.
package hub
