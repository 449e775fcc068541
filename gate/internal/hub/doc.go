// Package hub is the gate's pub/sub multiplexer: the subscriptions behind
// its waits and watches. Every script that changes a job's or an
// upstream's state publishes on a channel. The channel is named as the
// key the script changed.
//
// A Hub keeps one redis.PubSub per Redis server that holds a watched
// channel. That is one on a single node, and one per master on a cluster.
// go-redis sends every SSUBSCRIBE of a PubSub on one connection, routed
// by its first channel. A PubSub is created on the first Listen and closed
// Linger after the last. The listeners of one channel share its
// subscription.
//
// A Listener is woken, never told what changed: it re-reads. These wake
// it:
//   - a message on one of its channels;
//   - Hub.Local, a settle in this process;
//   - a message that may have been missed: the connection broke, was
//     re-established and resubscribed, or Redis dropped the subscription
//     (a cluster slot moved).
//
// A subscription may not be confirmed. The client cannot subscribe, Redis
// refused it, or the connection is down. Ready then reports false, and
// the listener's owner polls. The Hub says so through Config.Warn, at most
// once per Retry. So a cause that persists warns once, not at every poll
// step. Such causes are an ACL, a slot map that lags a moved slot, or a
// busy script.
//
// A Hub holds no pointer to the gate. What it needs is its Config: how to
// subscribe, how to warn. It is safe for concurrent use.
package hub
