package gate

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate/internal/store"
)

// The subscriptions behind waits (wait.go) and watches (watch.go). Every
// script that changes a job's or a scope's state publishes on the channel
// named as the key it changed (lua/notify.lua). A Gate keeps one
// redis.PubSub per Redis server that holds a watched channel (one on a
// single node; one per master on a cluster, since go-redis sends every
// SSUBSCRIBE of a PubSub on one connection routed by its first channel),
// created on the first wait and closed pubsubLinger after the last. The
// listeners of one channel in a Gate share its subscription.
//
// A listener is woken (never told what changed: it re-reads) by a message
// on one of its channels, by a settle in this process (Gate.forget), and
// whenever a message may have been missed: the connection broke, was
// re-established and resubscribed, or Redis dropped the subscription (a
// cluster slot moved). Where no subscription is confirmed (the client
// cannot subscribe, Redis refused it, the connection is down) the
// listener's owner polls with backoff, and the gate says so with an
// EventWarning (WarnWaitPolling), at most once per pubsubRetry: a cause
// that persists (an ACL, a slot map that lags a moved slot, a busy
// script) warns once, not at every poll step.

const (
	// pingEvery: a subscription silent this long is pinged, and counted
	// broken when the ping is not answered within as long again.
	pingEvery = 30 * time.Second
	// pubsubLinger keeps an idle PubSub open, so back-to-back waits do not
	// dial each time.
	pubsubLinger = 5 * time.Second
	// pubsubRetry: after Redis refused a subscription (NOPERM: an ACL
	// without channel permission; an unknown command), waits poll this
	// long before a subscription is tried again.
	pubsubRetry = time.Minute
	// Polling without a subscription: the first step and the longest.
	pollMin = 10 * time.Millisecond
	pollMax = time.Second
)

// hub is a Gate's subscriptions. Its zero value is ready (maps are made on
// first use).
type hub struct {
	g   *Gate
	sub store.Subscriptions
	// listeners counts live listeners, so a settle with nobody waiting
	// costs one atomic load (forget).
	listeners atomic.Int32

	mu       sync.Mutex
	conns    map[string]*subConn   // by server address; "" on one node
	chans    map[string]*chanState // by channel
	offUntil time.Time             // Redis refused a subscription: poll until then
	warnedAt time.Time             // the last WarnWaitPolling

	pingEvery time.Duration // 0 = the pingEvery constant; tests shorten it
}

// subConn is one PubSub (one connection) and the channels it carries.
type subConn struct {
	addr   string
	ps     *redis.PubSub
	chans  map[string]*chanState
	start  sync.Once // the receive loop starts after the first subscribe
	idle   *time.Timer
	closed bool
	done   chan struct{} // closed with closed
}

// chanState is one subscribed channel.
type chanState struct {
	name  string
	sc    *subConn
	ready chan struct{} // closed once confirmed or failed
	shut  bool          // ready is closed
	ok    bool          // subscribed, no break since: changes are pushed
	seen  bool          // was ok once: a later confirmation is a resubscribe
	dead  bool          // no longer subscribed: listeners join again
	lns   map[*listener]struct{}
}

// listener is one waiter's or watcher's interest in a few channels.
type listener struct {
	h     *hub
	names []string
	chans []*chanState
	wake  chan struct{} // buffered: a wake is never lost, wakes coalesce
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (h *hub) listen(names ...string) *listener {
	h.listeners.Add(1)
	return &listener{h: h, names: names, chans: make([]*chanState, len(names)), wake: make(chan struct{}, 1)}
}

// ready subscribes the listener's channels that are not subscribed yet
// and waits, at most within, until Redis has confirmed them. It reports
// whether every channel is subscribed: then a change after this call is
// pushed; otherwise the caller polls. A caller reads the state after ready,
// so a change between the subscription and the read is in what it reads.
func (ln *listener) ready(ctx context.Context, within time.Duration) bool {
	h := ln.h
	if h.sub.Open == nil {
		h.warn(ctx, errNoSubscribe)
		return false
	}
	var fresh []*chanState
	h.mu.Lock()
	for i, cs := range ln.chans {
		if cs != nil && !cs.dead {
			continue
		}
		if cs != nil {
			delete(cs.lns, ln)
		}
		cs, isNew := h.joinLocked(ln.names[i])
		cs.lns[ln] = struct{}{}
		ln.chans[i] = cs
		if isNew {
			fresh = append(fresh, cs)
		}
	}
	h.mu.Unlock()
	// In the background: on a path that drops packets, dialing and
	// subscribing block for the client's timeouts, and the wait must not
	// overrun within (TestAcquireWaitSilentSubscription). The subscription
	// is shared, so it does not end with this caller's context.
	for _, cs := range fresh {
		go h.subscribe(context.WithoutCancel(ctx), cs)
	}
	var t *time.Timer
	push := true
	for _, cs := range ln.chans {
		select {
		case <-cs.ready:
		default:
			if t == nil {
				t = time.NewTimer(within)
				defer t.Stop()
			}
			select {
			case <-cs.ready:
			case <-t.C:
				return false
			case <-ctx.Done():
				return false
			}
		}
		h.mu.Lock()
		ok := cs.ok && !cs.dead
		h.mu.Unlock()
		push = push && ok
	}
	return push
}

// close ends the listener; a channel nobody listens to any more is
// unsubscribed.
func (ln *listener) close() {
	h := ln.h
	type unsub struct {
		sc   *subConn
		name string
	}
	var gone []unsub
	h.mu.Lock()
	for _, cs := range ln.chans {
		if cs == nil {
			continue
		}
		delete(cs.lns, ln)
		if len(cs.lns) == 0 && !cs.dead {
			h.dropLocked(cs)
			if cs.sc != nil {
				gone = append(gone, unsub{cs.sc, cs.name})
			}
		}
	}
	h.mu.Unlock()
	h.listeners.Add(-1)
	// In the background, like the subscribe: the caller has its answer, and
	// a connection on a silent path would hold it for the client's
	// timeouts. An UNSUBSCRIBE that lands after a new listener subscribed
	// the channel again is seen as Redis dropping it (dropped): that
	// listener reads again and resubscribes.
	for _, u := range gone {
		go h.unsubscribe(u.sc, u.name)
	}
}

// joinLocked returns the channel's state, made and registered when new
// (the caller then subscribes). While subscriptions cannot work it returns
// a failed state at once.
func (h *hub) joinLocked(name string) (*chanState, bool) {
	if cs := h.chans[name]; cs != nil {
		return cs, false
	}
	cs := &chanState{name: name, ready: make(chan struct{}), lns: make(map[*listener]struct{})}
	if time.Now().Before(h.offUntil) {
		cs.dead, cs.shut = true, true
		close(cs.ready)
		return cs, false
	}
	if h.chans == nil {
		h.chans = make(map[string]*chanState)
		h.conns = make(map[string]*subConn)
	}
	h.chans[name] = cs
	return cs, true
}

// testHookSubscribing, when set, runs in subscribe just before the
// SUBSCRIBE is sent (export_test.go). Atomic: a background subscribe of an
// earlier test may still read it while a test sets it.
var testHookSubscribing atomic.Pointer[func(channel string)]

// subscribe subscribes cs on the PubSub of the server that holds it.
func (h *hub) subscribe(ctx context.Context, cs *chanState) {
	addr, err := h.sub.Node(ctx, cs.name)
	if err != nil {
		h.fail(ctx, cs, err)
		return
	}
	h.mu.Lock()
	if cs.dead { // every listener left meanwhile
		h.mu.Unlock()
		return
	}
	sc := h.conns[addr]
	if sc == nil {
		sc = &subConn{addr: addr, ps: h.sub.Open(ctx), chans: make(map[string]*chanState), done: make(chan struct{})}
		h.conns[addr] = sc
	}
	if sc.idle != nil {
		sc.idle.Stop()
		sc.idle = nil
	}
	sc.chans[cs.name] = cs
	cs.sc = sc
	h.mu.Unlock()

	if hook := testHookSubscribing.Load(); hook != nil {
		(*hook)(cs.name)
	}
	if h.sub.Sharded {
		err = sc.ps.SSubscribe(ctx, cs.name)
	} else {
		err = sc.ps.Subscribe(ctx, cs.name)
	}
	if err != nil {
		h.fail(ctx, cs, err)
		h.unsubscribe(sc, cs.name)
		return
	}
	sc.start.Do(func() { go h.receive(sc) })
	// Subscribing runs in the background (ready), so every listener may
	// have left while the SUBSCRIBE was on its way, and close's UNSUBSCRIBE
	// may have gone first: undo it here, or the connection would carry a
	// channel nobody listens to.
	h.mu.Lock()
	left := cs.dead
	h.mu.Unlock()
	if left {
		h.unsubscribe(sc, cs.name)
	}
}

// unsubscribe drops a channel from sc, best effort: on a broken connection
// it only leaves go-redis's list of channels to resubscribe.
func (h *hub) unsubscribe(sc *subConn, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), h.g.opts.Timeout)
	defer cancel()
	if h.sub.Sharded {
		_ = sc.ps.SUnsubscribe(ctx, name)
	} else {
		_ = sc.ps.Unsubscribe(ctx, name)
	}
}

// dropLocked forgets cs; its PubSub is closed pubsubLinger after its last
// channel goes.
func (h *hub) dropLocked(cs *chanState) {
	cs.dead, cs.ok = true, false
	if !cs.shut {
		cs.shut = true
		close(cs.ready)
	}
	if h.chans[cs.name] == cs {
		delete(h.chans, cs.name)
	}
	sc := cs.sc
	if sc == nil || sc.chans[cs.name] != cs {
		return
	}
	delete(sc.chans, cs.name)
	if len(sc.chans) == 0 && sc.idle == nil && !sc.closed {
		sc.idle = time.AfterFunc(pubsubLinger, func() { h.closeIdle(sc) })
	}
}

func (h *hub) closeIdle(sc *subConn) {
	h.mu.Lock()
	if len(sc.chans) > 0 || sc.closed {
		h.mu.Unlock()
		return
	}
	h.closeLocked(sc)
	h.mu.Unlock()
	_ = sc.ps.Close()
}

func (h *hub) closeLocked(sc *subConn) {
	sc.closed = true
	close(sc.done)
	if h.conns[sc.addr] == sc {
		delete(h.conns, sc.addr)
	}
}

// reset gives up on sc (a ping went unanswered): its channels' listeners
// subscribe again, on a new connection.
func (h *hub) reset(sc *subConn, err error) {
	h.mu.Lock()
	if sc.closed {
		h.mu.Unlock()
		return
	}
	h.closeLocked(sc)
	for _, cs := range sc.chans {
		for ln := range cs.lns {
			signal(ln.wake)
		}
		cs.sc = nil
		h.dropLocked(cs)
	}
	h.mu.Unlock()
	_ = sc.ps.Close()
	h.warn(context.Background(), err)
}

// fail ends a subscription that could not be made: its listeners poll.
func (h *hub) fail(ctx context.Context, cs *chanState, err error) {
	h.mu.Lock()
	if store.Refused(err) {
		h.offUntil = time.Now().Add(pubsubRetry)
	}
	h.dropLocked(cs)
	h.mu.Unlock()
	h.warn(ctx, err)
}

// receive reads sc's messages until sc is closed.
func (h *hub) receive(sc *subConn) {
	ctx := context.Background()
	backoff := pollMin
	pinged := false
	every := cmp.Or(h.pingEvery, pingEvery)
	for {
		msg, err := sc.ps.ReceiveTimeout(ctx, every)
		h.mu.Lock()
		closed := sc.closed
		h.mu.Unlock()
		if closed {
			return
		}
		if err != nil {
			var ne interface{ Timeout() bool }
			switch {
			case errors.As(err, &ne) && ne.Timeout() && !pinged:
				pinged = true
				_ = sc.ps.Ping(ctx)
				continue
			case errors.As(err, &ne) && ne.Timeout():
				h.reset(sc, err)
				return
			case store.Replied(err):
				pinged = false // any reply shows the connection alive
				h.refusedOn(sc, err)
				continue
			}
			// go-redis closed the connection and tried to reconnect and
			// resubscribe; until a confirmation, listeners poll.
			pinged = false
			h.broke(sc, err)
			select {
			case <-time.After(backoff):
			case <-sc.done:
				return
			}
			backoff = min(2*backoff, pollMax)
			continue
		}
		pinged, backoff = false, pollMin
		switch m := msg.(type) {
		case *redis.Message:
			h.wakeChannel(m.Channel)
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				h.confirmed(sc, m.Channel)
			case "unsubscribe", "sunsubscribe":
				h.dropped(sc, m.Channel)
			}
		}
	}
}

// confirmed marks a channel subscribed; a resubscription (after a break)
// wakes its listeners, since a change may have been missed meanwhile.
func (h *hub) confirmed(sc *subConn, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cs := sc.chans[name]
	if cs == nil || cs.dead {
		return
	}
	again := cs.seen && !cs.ok
	cs.ok, cs.seen = true, true
	if !cs.shut {
		cs.shut = true
		close(cs.ready)
	}
	if again {
		for ln := range cs.lns {
			signal(ln.wake)
		}
	}
}

// dropped handles an unsubscribe message: the gate's own unsubscribe (the
// channel is no longer in sc) or Redis dropping a subscribed channel (a
// cluster slot moved away): its listeners then subscribe again.
func (h *hub) dropped(sc *subConn, name string) {
	h.mu.Lock()
	cs := sc.chans[name]
	if cs == nil || !cs.ok {
		h.mu.Unlock()
		return
	}
	lns := cs.lns
	h.dropLocked(cs)
	for ln := range lns {
		signal(ln.wake)
	}
	h.mu.Unlock()
	h.unsubscribe(sc, name)
}

// broke marks every channel of sc unconfirmed after a connection error and
// wakes their listeners, which read the state and poll until the
// resubscription is confirmed. On a cluster the client's slot map is
// reloaded: the server may be a master that died, and go-redis routes the
// resubscription (and the job's scripts) by that map.
func (h *hub) broke(sc *subConn, err error) {
	if h.sub.Reload != nil {
		h.sub.Reload(context.Background())
	}
	h.mu.Lock()
	for _, cs := range sc.chans {
		cs.ok = false
		for ln := range cs.lns {
			signal(ln.wake)
		}
	}
	h.mu.Unlock()
	h.warn(context.Background(), err)
}

// refusedOn handles an error reply on sc (a SUBSCRIBE refused or
// redirected): the channels not confirmed yet fail and their listeners
// poll, then subscribe again. A refusal no wait fixes (NOPERM, an unknown
// command) keeps waits polling for pubsubRetry; a redirection (MOVED: the
// slot moved to another master) is retried at the next step, once the
// client's slot map is reloaded.
//
// The listeners are not woken: closing ready ends a wait in ready, and a
// listener past it polls already (its channel was not confirmed), so it
// retries at its next poll step, with backoff. A wake would retry at once:
// while the client's slot map still names the old master (a reload lags
// behind a moved slot by 200 ms or more), subscribe, MOVED, wake would
// spin, each turn reading the job again (TestWaitAcrossSlotMigration).
func (h *hub) refusedOn(sc *subConn, err error) {
	var gone []string
	if !store.Refused(err) && h.sub.Reload != nil {
		h.sub.Reload(context.Background())
	}
	h.mu.Lock()
	for name, cs := range sc.chans {
		if !cs.ok {
			h.dropLocked(cs)
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 && store.Refused(err) {
		h.offUntil = time.Now().Add(pubsubRetry)
	}
	h.mu.Unlock()
	if len(gone) == 0 {
		// Not a subscription's refusal: an UNSUBSCRIBE or PING the user
		// may not run. The connection answered, so it is alive.
		return
	}
	for _, name := range gone {
		h.unsubscribe(sc, name)
	}
	h.warn(context.Background(), err)
}

// wakeChannel wakes the listeners of a channel.
func (h *hub) wakeChannel(name string) {
	h.mu.Lock()
	if cs := h.chans[name]; cs != nil {
		for ln := range cs.lns {
			signal(ln.wake)
		}
	}
	h.mu.Unlock()
}

// local wakes the listeners of a key this process just settled, without
// waiting for Redis's message: the in-process lease is forgotten only
// after the settle, so their re-read sees the new state.
func (h *hub) local(key string) {
	if h.listeners.Load() == 0 {
		return
	}
	h.wakeChannel(key)
}

var errNoSubscribe = errors.New("the Redis client cannot subscribe (no Subscribe or SSubscribe method): waits poll")

// warn sends WarnWaitPolling with err, unless one was sent within
// pubsubRetry.
func (h *hub) warn(ctx context.Context, err error) {
	if h.g.obs == nil {
		return
	}
	h.mu.Lock()
	now := time.Now()
	quiet := !h.warnedAt.IsZero() && now.Sub(h.warnedAt) < pubsubRetry
	if !quiet {
		h.warnedAt = now
	}
	h.mu.Unlock()
	if !quiet {
		h.g.emit(ctx, Event{Kind: EventWarning, Reason: WarnWaitPolling, Err: err})
	}
}
