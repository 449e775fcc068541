package hub

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
)

const (
	// pingEvery: a subscription silent this long is pinged. It is counted
	// broken when the ping is not answered within as long again.
	pingEvery = 30 * time.Second
	// Linger keeps an idle PubSub open, so back-to-back waits do not dial
	// each time.
	Linger = 5 * time.Second
	// Retry: after Redis refused a subscription, listeners poll this long
	// before a subscription is tried again. The refusal is NOPERM (an ACL
	// without channel permission) or an unknown command. Retry is also
	// the longest silence between two warnings.
	Retry = time.Minute
	// Polling without a subscription: the first step and the longest.
	PollMin = 10 * time.Millisecond
	PollMax = time.Second
)

// Config is what a Hub needs from the gate.
type Config struct {
	// Subscriptions says how the client subscribes. With Open nil it
	// cannot, and every listener polls.
	Subscriptions store.Subscriptions
	// Timeout bounds an unsubscribe sent in the background.
	Timeout time.Duration
	// Warn is told why listeners poll, at most once per Retry. nil:
	// nobody listens.
	Warn func(ctx context.Context, err error)
}

// Hub is a gate's subscriptions. Make it with New.
type Hub struct {
	cfg Config
	// listeners counts live listeners. So a settle with nobody waiting
	// costs one atomic load (Local).
	listeners atomic.Int32

	mu       sync.Mutex
	conns    map[string]*conn    // by server address; "" on one node
	chans    map[string]*channel // by channel name
	offUntil time.Time           // Redis refused a subscription: poll until then
	warnedAt time.Time           // the last warning

	// Test is for tests only, set before the first Listen.
	Test TestHooks
}

// TestHooks are a hub's test signals. They are grouped so production
// code never sets one by accident.
type TestHooks struct {
	PingEvery     time.Duration        // silence before a ping (0: pingEvery)
	Subscribing   func(channel string) // just before each SUBSCRIBE is sent
	Unsubscribing func(channel string) // just before each UNSUBSCRIBE is sent
	Message       func(channel string) // after each message is handled
}

// New returns a hub. It connects nothing until the first Listen.
func New(cfg Config) *Hub { return &Hub{cfg: cfg} }

// Listeners counts the live listeners.
func (h *Hub) Listeners() int { return int(h.listeners.Load()) }

// Listener is one waiter's or watcher's interest in a few channels.
type Listener struct {
	h     *Hub
	names []string
	chans []*channel
	wake  chan struct{} // buffered: a wake is never lost, wakes coalesce
}

// Listen starts a listener of the named channels. Nothing is subscribed
// until Ready. Close it when done.
func (h *Hub) Listen(names ...string) *Listener {
	h.listeners.Add(1)
	return &Listener{h: h, names: names, chans: make([]*channel, len(names)), wake: make(chan struct{}, 1)}
}

// Wake delivers a value whenever one of the listener's channels may have
// changed.
func (ln *Listener) Wake() <-chan struct{} { return ln.wake }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Ready subscribes the listener's channels that are not subscribed yet.
// It waits, at most within, until Redis has confirmed them. It reports
// whether every channel is subscribed. If so, a change after this call is
// pushed. Otherwise the caller polls. A caller reads the state after
// Ready. So a change between the subscription and the read is in what it
// reads.
func (ln *Listener) Ready(ctx context.Context, within time.Duration) bool {
	h := ln.h
	if h.cfg.Subscriptions.Open == nil {
		h.warn(ctx, errNoSubscribe)
		return false
	}
	var fresh []*channel
	h.mu.Lock()
	for i, c := range ln.chans {
		if c != nil && c.phase != gone {
			continue
		}
		if c != nil {
			delete(c.lns, ln)
		}
		c, isNew := h.joinLocked(ln.names[i])
		c.lns[ln] = struct{}{}
		ln.chans[i] = c
		if isNew {
			fresh = append(fresh, c)
		}
	}
	h.mu.Unlock()
	// In the background. On a path that drops packets, dialing and
	// subscribing block for the client's timeouts. The wait must not
	// overrun within. The subscription is shared, so it does not end with
	// this caller's context.
	for _, c := range fresh {
		go h.subscribe(context.WithoutCancel(ctx), c)
	}
	var t *time.Timer
	push := true
	for _, c := range ln.chans {
		select {
		case <-c.settled:
		default:
			if t == nil {
				t = time.NewTimer(within)
				defer t.Stop()
			}
			select {
			case <-c.settled:
			case <-t.C:
				return false
			case <-ctx.Done():
				return false
			}
		}
		h.mu.Lock()
		live := c.phase == live
		h.mu.Unlock()
		push = push && live
	}
	return push
}

// Close ends the listener. A channel nobody listens to any more is
// unsubscribed.
func (ln *Listener) Close() {
	h := ln.h
	var drop []func()
	h.mu.Lock()
	for _, c := range ln.chans {
		if c == nil {
			continue
		}
		delete(c.lns, ln)
		if len(c.lns) == 0 && c.phase != gone {
			h.dropLocked(c)
			if c.sc != nil {
				drop = append(drop, h.leaveLocked(c.sc, c.name))
			}
		}
	}
	h.mu.Unlock()
	h.listeners.Add(-1)
	// In the background, like the subscribe. The caller has its answer. A
	// connection on a silent path would keep it for the client's timeouts.
	// A listener that subscribes the channel again meanwhile waits for
	// this UNSUBSCRIBE to be sent first (leaveLocked).
	for _, leave := range drop {
		go leave()
	}
}

// Local wakes the listeners of a key this process just settled. It does
// not wait for Redis's message. The in-process lease is forgotten only
// after the settle. So their re-read sees the new state.
func (h *Hub) Local(key string) {
	if h.listeners.Load() == 0 {
		return
	}
	h.mu.Lock()
	if c := h.chans[key]; c != nil {
		c.wakeLocked()
	}
	h.mu.Unlock()
}

// wakeChannel wakes the listeners of a channel a message came for on sc.
func (h *Hub) wakeChannel(sc *conn, name string) {
	h.mu.Lock()
	// Only a confirmed subscription on this connection. Redis sends
	// messages and confirmations in order. So a message read before the
	// confirmation of a new listener's SUBSCRIBE was published before it,
	// under the last listener's subscription. The new listener's first
	// read sees it anyway.
	if c := h.chans[name]; c != nil && c.sc == sc && c.phase == live {
		c.wakeLocked()
	}
	h.mu.Unlock()
}

var errNoSubscribe = errors.New("the Redis client cannot subscribe (no Subscribe or SSubscribe method): waits poll")

// warn tells Config.Warn about err, unless it was told within Retry.
func (h *Hub) warn(ctx context.Context, err error) {
	if h.cfg.Warn == nil {
		return
	}
	h.mu.Lock()
	now := time.Now()
	quiet := !h.warnedAt.IsZero() && now.Sub(h.warnedAt) < Retry
	if !quiet {
		h.warnedAt = now
	}
	h.mu.Unlock()
	if !quiet {
		h.cfg.Warn(ctx, err)
	}
}
