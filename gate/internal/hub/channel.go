package hub

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate/internal/store"
)

// phase is where a channel's subscription stands.
//
//	pending ──confirmed──▶ live ──connection broke──▶ broken ──confirmed again (wake)──▶ live
//	   │                     │                          │
//	   └──refused, failed────┴──dropped by Redis (wake)─┴──▶ gone (its listeners join anew)
//
// A channel leaves pending once. Its settled channel is closed then, and
// Ready reads the phase. Only a live channel's changes are pushed.
type phase uint8

const (
	pending phase = iota // SUBSCRIBE sent, not confirmed yet
	live                 // confirmed, no break since: changes are pushed
	broken               // was live; the connection broke, a resubscription is on its way
	gone                 // no longer subscribed (or never will be): listeners join again
)

// channel is one subscribed channel.
type channel struct {
	name    string
	sc      *conn
	phase   phase
	settled chan struct{} // closed when the channel leaves pending
	lns     map[*Listener]struct{}
}

// moveLocked sets the channel's phase. h.mu must be held.
func (c *channel) moveLocked(to phase) {
	if c.phase == pending && to != pending {
		close(c.settled)
	}
	c.phase = to
}

func (c *channel) wakeLocked() {
	for ln := range c.lns {
		signal(ln.wake)
	}
}

// conn is one PubSub (one connection) and the channels it carries.
type conn struct {
	addr   string
	ps     *redis.PubSub
	chans  map[string]*channel
	start  sync.Once // the receive loop starts after the first subscribe
	idle   *time.Timer
	closed bool
	done   chan struct{} // closed with closed
	sent   sentCmds      // commands awaiting replies, to match a refusal to its command
	// turn holds, by channel, the end of the last SUBSCRIBE or
	// UNSUBSCRIBE decided for it (see queueLocked).
	turn map[string]chan struct{}
}

// joinLocked returns the channel's state. A new one is made and
// registered, and the caller then subscribes. While subscriptions cannot
// work, it returns a gone channel at once.
func (h *Hub) joinLocked(name string) (*channel, bool) {
	if c := h.chans[name]; c != nil {
		return c, false
	}
	c := &channel{name: name, settled: make(chan struct{}), lns: make(map[*Listener]struct{})}
	if time.Now().Before(h.offUntil) {
		c.moveLocked(gone)
		return c, false
	}
	if h.chans == nil {
		h.chans = make(map[string]*channel)
		h.conns = make(map[string]*conn)
	}
	h.chans[name] = c
	return c, true
}

// subscribe subscribes c on the PubSub of the server that holds it.
func (h *Hub) subscribe(ctx context.Context, c *channel) {
	sub := h.cfg.Subscriptions
	addr, err := sub.Node(ctx, c.name)
	if err != nil {
		h.fail(ctx, c, err)
		return
	}
	h.mu.Lock()
	if c.phase == gone { // every listener left meanwhile
		h.mu.Unlock()
		return
	}
	sc := h.conns[addr]
	if sc == nil {
		sc = &conn{addr: addr, ps: sub.Open(ctx), chans: make(map[string]*channel), done: make(chan struct{}),
			turn: make(map[string]chan struct{})}
		h.conns[addr] = sc
	}
	if sc.idle != nil {
		sc.idle.Stop()
		sc.idle = nil
	}
	sc.chans[c.name] = c
	c.sc = sc
	wait, end := h.queueLocked(sc, c.name)
	h.mu.Unlock()
	defer end()
	wait()

	if h.Test.Subscribing != nil {
		h.Test.Subscribing(c.name)
	}
	err = sc.sent.send(ctx, sentCmd{kind: subscribeCmd, name: c.name, c: c}, func(ctx context.Context) error {
		if sub.Sharded {
			return sc.ps.SSubscribe(ctx, c.name)
		}
		return sc.ps.Subscribe(ctx, c.name)
	})
	if err != nil {
		h.fail(ctx, c, err)
		h.unsubscribe(sc, c.name)
		return
	}
	// Every listener may leave while the SUBSCRIBE is on its way. It runs
	// in the background (Ready). Their UNSUBSCRIBE waits for this turn to
	// end. So it lands after the SUBSCRIBE. It leaves no channel nobody
	// listens to on the connection.
	sc.start.Do(func() { go h.receive(sc) })
}

// queueLocked puts an operation on channel name of sc in line behind the
// ones decided before it. h.mu must be held. The operation calls wait
// before it sends anything, and end when it is done. So the SUBSCRIBEs
// and UNSUBSCRIBEs of one channel reach Redis in the order the hub
// decided them.
//
// A listener's SUBSCRIBE never goes before the UNSUBSCRIBE of the last
// listener before it. That UNSUBSCRIBE would drop the new listener's
// channel. The listener would read again and resubscribe. That is a
// wasted trip on every back-to-back wait of one job. Each operation is
// bounded by the client's timeouts, so a wait is too.
func (h *Hub) queueLocked(sc *conn, name string) (wait, end func()) {
	prev := sc.turn[name]
	done := make(chan struct{})
	sc.turn[name] = done
	wait = func() {
		if prev != nil {
			<-prev
		}
	}
	end = func() {
		h.mu.Lock()
		if sc.turn[name] == done {
			delete(sc.turn, name)
		}
		h.mu.Unlock()
		close(done)
	}
	return wait, end
}

// leaveLocked returns the function that unsubscribes name on sc in its
// turn (queueLocked). h.mu must be held.
func (h *Hub) leaveLocked(sc *conn, name string) func() {
	wait, end := h.queueLocked(sc, name)
	return func() {
		defer end()
		wait()
		h.unsubscribe(sc, name)
	}
}

// unsubscribe drops a channel from sc, best effort. On a broken
// connection, it only leaves go-redis's list of channels to resubscribe.
// Callers send it in the channel's turn (queueLocked).
func (h *Hub) unsubscribe(sc *conn, name string) {
	if h.Test.Unsubscribing != nil {
		h.Test.Unsubscribing(name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.Timeout)
	defer cancel()
	_ = sc.sent.send(ctx, sentCmd{kind: unsubscribeCmd, name: name}, func(ctx context.Context) error {
		if h.cfg.Subscriptions.Sharded {
			return sc.ps.SUnsubscribe(ctx, name)
		}
		return sc.ps.Unsubscribe(ctx, name)
	})
}

// dropLocked forgets c. Its PubSub is closed Linger after its last
// channel goes.
func (h *Hub) dropLocked(c *channel) {
	c.moveLocked(gone)
	if h.chans[c.name] == c {
		delete(h.chans, c.name)
	}
	sc := c.sc
	if sc == nil || sc.chans[c.name] != c {
		return
	}
	delete(sc.chans, c.name)
	if len(sc.chans) == 0 && sc.idle == nil && !sc.closed {
		sc.idle = time.AfterFunc(Linger, func() { h.closeIdle(sc) })
	}
}

func (h *Hub) closeIdle(sc *conn) {
	h.mu.Lock()
	if len(sc.chans) > 0 || sc.closed {
		h.mu.Unlock()
		return
	}
	h.closeLocked(sc)
	h.mu.Unlock()
	_ = sc.ps.Close()
}

func (h *Hub) closeLocked(sc *conn) {
	sc.closed = true
	close(sc.done)
	if h.conns[sc.addr] == sc {
		delete(h.conns, sc.addr)
	}
}

// reset gives up on sc: a ping went unanswered. Its channels' listeners
// subscribe again, on a new connection.
func (h *Hub) reset(sc *conn, err error) {
	h.mu.Lock()
	if sc.closed {
		h.mu.Unlock()
		return
	}
	h.closeLocked(sc)
	for _, c := range sc.chans {
		c.wakeLocked()
		c.sc = nil
		h.dropLocked(c)
	}
	h.mu.Unlock()
	_ = sc.ps.Close()
	h.warn(context.Background(), err)
}

// fail ends a subscription that could not be made. Its listeners poll.
func (h *Hub) fail(ctx context.Context, c *channel, err error) {
	h.mu.Lock()
	if store.Refused(err) {
		h.offUntil = time.Now().Add(Retry)
	}
	h.dropLocked(c)
	h.mu.Unlock()
	h.warn(ctx, err)
}

// receive reads sc's messages until sc is closed.
func (h *Hub) receive(sc *conn) {
	ctx := context.Background()
	backoff := PollMin
	pinged := false
	every := pingEvery
	if h.Test.PingEvery > 0 {
		every = h.Test.PingEvery
	}
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
				_ = sc.sent.send(ctx, sentCmd{kind: pingCmd}, func(ctx context.Context) error { return sc.ps.Ping(ctx) })
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
			// resubscribe. Until a confirmation, listeners poll.
			pinged = false
			sc.sent.forget()
			h.broke(sc, err)
			select {
			case <-time.After(backoff):
			case <-sc.done:
				return
			}
			backoff = min(2*backoff, PollMax)
			continue
		}
		pinged, backoff = false, PollMin
		switch m := msg.(type) {
		case *redis.Message:
			h.wakeChannel(sc, m.Channel)
			if h.Test.Message != nil {
				h.Test.Message(m.Channel)
			}
		case *redis.Pong:
			sc.sent.answered(pingCmd, "")
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				sc.sent.answered(subscribeCmd, m.Channel)
				h.confirmed(sc, m.Channel)
			case "unsubscribe", "sunsubscribe":
				sc.sent.answered(unsubscribeCmd, m.Channel)
				h.dropped(sc, m.Channel)
			}
		}
	}
}

// confirmed marks a channel live. A resubscription after a break wakes
// its listeners. A change may have been missed meanwhile.
func (h *Hub) confirmed(sc *conn, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := sc.chans[name]
	if c == nil || c.phase == gone {
		return
	}
	again := c.phase == broken
	c.moveLocked(live)
	if again {
		c.wakeLocked()
	}
}

// dropped handles an unsubscribe message. It is the gate's own
// unsubscribe when the channel is no longer in sc. Or Redis dropped a
// live channel: a cluster slot moved away. Its listeners then subscribe
// again.
func (h *Hub) dropped(sc *conn, name string) {
	h.mu.Lock()
	c := sc.chans[name]
	if c == nil || c.phase != live {
		h.mu.Unlock()
		return
	}
	h.dropLocked(c)
	c.wakeLocked()
	leave := h.leaveLocked(sc, name)
	h.mu.Unlock()
	leave()
}

// broke marks every live channel of sc broken after a connection error.
// It wakes their listeners. They read the state and poll until the
// resubscription is confirmed. On a cluster the client's slot map is
// reloaded. The server may be a master that died. go-redis routes the
// resubscription, and the job's scripts, by that map.
func (h *Hub) broke(sc *conn, err error) {
	if r := h.cfg.Subscriptions.Reload; r != nil {
		r(context.Background())
	}
	h.mu.Lock()
	for _, c := range sc.chans {
		if c.phase == live {
			c.moveLocked(broken)
		}
		c.wakeLocked()
	}
	h.mu.Unlock()
	h.warn(context.Background(), err)
}

// refusedOn handles an error reply on sc. The order of replies matches
// it to the command it answers (sentCmds).
//   - A refused UNSUBSCRIBE or PING (an ACL without +unsubscribe or
//     +ping) changes nothing. The connection answered, so it is alive.
//   - A SUBSCRIBE refused or redirected fails its channel. Its listeners
//     poll, then subscribe again.
//   - A reply that matches no command sent fails every channel not live
//     yet. It is go-redis's resubscription after a reconnection, refused.
//
// A refusal no wait fixes (NOPERM, an unknown command) keeps listeners
// polling for Retry. A redirection (MOVED: the slot moved to another
// master) is retried at the next step, once the client's slot map is
// reloaded.
//
// The listeners are not woken. Leaving pending ends a wait in Ready. A
// listener past it polls already, since its channel was not confirmed. So
// it retries at its next poll step, with backoff. A wake would retry at
// once. The client's slot map may still name the old master: a reload
// lags behind a moved slot by 200 ms or more. Meanwhile subscribe, MOVED,
// wake would spin, each turn reading the job again.
func (h *Hub) refusedOn(sc *conn, err error) {
	cmd, sent := sc.sent.refused()
	if sent && cmd.kind != subscribeCmd {
		return
	}
	var drop []func()
	refused := store.Refused(err)
	if r := h.cfg.Subscriptions.Reload; !refused && r != nil {
		r(context.Background())
	}
	h.mu.Lock()
	for name, c := range sc.chans {
		if c.phase != live && (!sent || c == cmd.c) {
			h.dropLocked(c)
			drop = append(drop, h.leaveLocked(sc, name))
		}
	}
	if !sent && len(drop) == 0 {
		// Nothing was pending: not a subscription's refusal.
		h.mu.Unlock()
		return
	}
	if refused {
		h.offUntil = time.Now().Add(Retry)
	}
	h.mu.Unlock()
	for _, leave := range drop {
		leave()
	}
	h.warn(context.Background(), err)
}
