package hub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/testkit/faultproxy"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// newHub is a hub over rdb that counts its warnings.
func newHub(t *testing.T, rdb store.Client) (*Hub, *atomic.Int32) {
	t.Helper()
	warned := new(atomic.Int32)
	h := New(Config{Subscriptions: store.New(rdb, store.Config{Lease: time.Minute}).Subscriptions(), Timeout: time.Second,
		Warn: func(context.Context, error) { warned.Add(1) }})
	return h, warned
}

// woken reports whether ln is woken within d.
func woken(ln *Listener, d time.Duration) bool {
	select {
	case <-ln.Wake():
		return true
	case <-time.After(d):
		return false
	}
}

// A listener whose channel Redis confirmed is woken by a message on it,
// and by a settle in this process (Local); a message on another channel
// does not wake it.
func TestListenerWokenByItsChannel(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			h, warned := newHub(t, tg.Client)
			ch, other := redistest.UniqueKey(t)+":{a}", redistest.UniqueKey(t)+":{b}"
			ln := h.Listen(ch)
			if !ln.Ready(ctx, 5*time.Second) {
				t.Fatal("Ready: false, want the channel confirmed")
			}
			publish := "publish"
			if h.cfg.Subscriptions.Sharded {
				publish = "spublish"
			}
			send := func(channel string) {
				if err := tg.Client.Process(ctx, redis.NewIntCmd(ctx, publish, channel, "x")); err != nil {
					t.Fatal(err)
				}
			}
			send(other)
			if woken(ln, 100*time.Millisecond) {
				t.Fatal("woken by another channel's message")
			}
			send(ch)
			if !woken(ln, 5*time.Second) {
				t.Fatal("not woken by its channel's message")
			}
			h.Local(ch)
			if !woken(ln, time.Second) {
				t.Fatal("not woken by Local")
			}
			ln.Close()
			if n := h.Listeners(); n != 0 {
				t.Fatalf("%d listeners after Close, want 0", n)
			}
			if n := warned.Load(); n != 0 {
				t.Fatalf("%d warnings, want none", n)
			}
		})
	}
}

// A client that cannot subscribe: Ready reports false at once (the caller
// polls), and the hub warns once however often it is asked.
func TestCannotSubscribePollsAndWarnsOnce(t *testing.T) {
	var warned atomic.Int32
	var cause error
	h := New(Config{Timeout: time.Second, Warn: func(_ context.Context, err error) { warned.Add(1); cause = err }})
	for range 3 {
		ln := h.Listen("job")
		start := time.Now()
		if ln.Ready(context.Background(), 5*time.Second) {
			t.Fatal("Ready: true without a way to subscribe")
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("Ready took %v, want at once", took)
		}
		ln.Close()
	}
	if n := warned.Load(); n != 1 || !errors.Is(cause, errNoSubscribe) {
		t.Fatalf("%d warnings (%v), want one saying the client cannot subscribe", n, cause)
	}
}

// A channel leaves pending once, closing its settled signal; only a live
// channel pushes, and a broken one confirmed again is live.
func TestChannelPhases(t *testing.T) {
	c := &channel{settled: make(chan struct{})}
	select {
	case <-c.settled:
		t.Fatal("settled while pending")
	default:
	}
	c.moveLocked(live)
	select {
	case <-c.settled:
	default:
		t.Fatal("not settled once live")
	}
	c.moveLocked(broken) // must not close settled again (it would panic)
	c.moveLocked(live)
	c.moveLocked(gone)
	if c.phase != gone {
		t.Fatalf("phase %v, want gone", c.phase)
	}
}

// Listeners of one channel share its subscription: closing one keeps it
// for the other, closing the last unsubscribes, and a later listener
// subscribes again and is woken.
func TestListenersShareASubscription(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	ctx := context.Background()
	h, _ := newHub(t, rdb)
	subs := func(ch string) int64 { return rdb.PubSubNumSub(ctx, ch).Val()[ch] }
	waitSubs := func(ch string, want int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for subs(ch) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d subscriptions to %s, want %d", subs(ch), ch, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	a, b := h.Listen("job"), h.Listen("job")
	if !a.Ready(ctx, 5*time.Second) || !b.Ready(ctx, 5*time.Second) {
		t.Fatal("Ready: false")
	}
	waitSubs("job", 1)
	a.Close()
	rdb.Publish(ctx, "job", "x")
	if !woken(b, 5*time.Second) {
		t.Fatal("the remaining listener was not woken after the other closed")
	}
	if n := subs("job"); n != 1 {
		t.Fatalf("%d subscriptions with one listener left, want 1", n)
	}
	b.Close()
	waitSubs("job", 0)
	c := h.Listen("job")
	defer c.Close()
	if !c.Ready(ctx, 5*time.Second) {
		t.Fatal("Ready after the channel was dropped: false")
	}
	rdb.Publish(ctx, "job", "x")
	if !woken(c, 5*time.Second) {
		t.Fatal("a listener of a channel subscribed again was not woken")
	}
}

// connOf returns the hub's connection for addr ("" on one node), nil when
// it has none open.
func connOf(h *Hub, addr string) *conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns[addr]
}

// The connection of a channel nobody listens to any more stays open for
// Linger, so a listener that comes back in time reuses it, and is closed
// after Linger once idle.
func TestIdleConnectionClosesAfterLinger(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	ctx := context.Background()
	h, _ := newHub(t, rdb)
	a := h.Listen("job")
	if !a.Ready(ctx, 5*time.Second) {
		t.Fatal("Ready: false")
	}
	sc := connOf(h, "")
	if sc == nil {
		t.Fatal("no connection after Ready")
	}
	a.Close()
	// The UNSUBSCRIBE goes in the background: one landing after b's
	// SUBSCRIBE would drop b's channel (b would read again, correctly).
	deadline := time.Now().Add(5 * time.Second)
	for rdb.PubSubNumSub(ctx, "job").Val()["job"] != 0 {
		if time.Now().After(deadline) {
			t.Fatal("still subscribed after the last listener closed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	b := h.Listen("job")
	if !b.Ready(ctx, 5*time.Second) {
		t.Fatal("Ready within Linger: false")
	}
	if got := connOf(h, ""); got != sc {
		t.Fatal("a listener back within Linger dialed a new connection, want the idle one reused")
	}
	b.Close()
	select {
	case <-sc.done:
	case <-time.After(Linger + 5*time.Second):
		t.Fatalf("the idle connection is still open %v after its last listener left, want closed after Linger (%v)", Linger+5*time.Second, Linger)
	}
	if got := connOf(h, ""); got != nil {
		t.Fatal("the closed connection is still the hub's")
	}
	if n := rdb.PubSubNumSub(ctx, "job").Val()["job"]; n != 0 {
		t.Fatalf("%d subscriptions after the idle close, want 0", n)
	}
}

// A subscription silent for the ping interval is pinged; answered, it is
// kept without a warning. On a path that drops packets the ping goes
// unanswered: the connection is given up with a warning and its listeners
// are woken, and their next Ready subscribes again on a new connection.
func TestSilentSubscriptionIsPingedThenGivenUp(t *testing.T) {
	m, _ := redistest.Miniredis(t)
	p := faultproxy.New(t, m.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	h, warned := newHub(t, rdb)
	// A ping answered later than this is given up: long enough that a
	// loaded machine's scheduling delay is not taken for a silent path.
	const ping = 500 * time.Millisecond
	h.Test.PingEvery = ping
	ln := h.Listen("job")
	defer ln.Close()
	if !ln.Ready(ctx, 5*time.Second) {
		t.Fatal("Ready: false")
	}
	sc := connOf(h, "")

	// Idle but healthy for several ping intervals: kept, no warning.
	time.Sleep(5 * ping)
	if n := warned.Load(); n != 0 || connOf(h, "") != sc {
		t.Fatalf("an idle, healthy subscription: %d warnings, connection kept %v; want kept, no warning", n, connOf(h, "") == sc)
	}
	select {
	case <-ln.Wake():
		t.Fatal("woken while the subscription was healthy and nothing changed")
	default:
	}

	p.Blackhole(true)
	if !woken(ln, 5*time.Second) {
		t.Fatal("not woken after the silent subscription was given up")
	}
	select {
	case <-sc.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the silent connection was not closed")
	}
	// The warning follows the close.
	deadline := time.Now().Add(5 * time.Second)
	for warned.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := warned.Load(); n != 1 {
		t.Fatalf("%d warnings after the connection was given up, want 1", n)
	}
	p.Blackhole(false)
	p.ResetAll()
	if !ln.Ready(ctx, 5*time.Second) {
		t.Fatal("Ready after the connection was given up: false, want subscribed again")
	}
	if got := connOf(h, ""); got == nil || got == sc {
		t.Fatal("subscribed again on the given-up connection, want a new one")
	}
}

// A subscription Redis refuses (an ACL without the channel: NOPERM) ends
// the wait for confirmation at once with a warning naming the refusal;
// for Retry after it, listeners poll without sending SUBSCRIBE again.
func TestRefusedSubscriptionPollsWithoutRetrying(t *testing.T) {
	prefix := redistest.UniqueKey(t)
	srv := redistest.ACLServer(t, prefix, redistest.ACLPubSub) // no channel pattern
	var warned atomic.Int32
	var cause atomic.Value
	h := New(Config{Subscriptions: store.New(srv.Client(t), store.Config{Lease: time.Minute}).Subscriptions(), Timeout: time.Second,
		Warn: func(_ context.Context, err error) { warned.Add(1); cause.Store(err) }})
	var sent atomic.Int32
	h.Test.Subscribing = func(string) { sent.Add(1) }
	ctx := context.Background()
	ln := h.Listen(prefix + ":job")
	start := time.Now()
	if ln.Ready(ctx, 5*time.Second) {
		t.Fatal("Ready: true for a channel the ACL refuses")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Ready took %v, want the refusal to end the wait", took)
	}
	ln.Close()
	deadline := time.Now().Add(5 * time.Second)
	for warned.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err, _ := cause.Load().(error); warned.Load() != 1 || !store.Refused(err) {
		t.Fatalf("%d warnings (%v), want one with the refusal", warned.Load(), err)
	}
	for range 3 {
		ln := h.Listen(prefix + ":other")
		if ln.Ready(ctx, 5*time.Second) {
			t.Fatal("Ready: true while subscriptions are refused")
		}
		ln.Close()
	}
	if n := sent.Load(); n != 1 {
		t.Fatalf("%d SUBSCRIBEs sent, want only the refused one within Retry", n)
	}
}

// A subscription that could not be made for a reason that passes (the
// server for the channel could not be found) fails that wait with a
// warning; the next listener subscribes again.
func TestFailedSubscriptionIsTriedAgain(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	sub := store.New(rdb, store.Config{Lease: time.Minute}).Subscriptions()
	var calls atomic.Int32
	node := sub.Node
	sub.Node = func(ctx context.Context, channel string) (string, error) {
		if calls.Add(1) == 1 {
			return "", errors.New("dial tcp: connection refused")
		}
		return node(ctx, channel)
	}
	var warned atomic.Int32
	h := New(Config{Subscriptions: sub, Timeout: time.Second, Warn: func(context.Context, error) { warned.Add(1) }})
	ctx := context.Background()
	ln := h.Listen("job")
	if ln.Ready(ctx, 5*time.Second) {
		t.Fatal("Ready: true when the subscription failed")
	}
	ln.Close()
	deadline := time.Now().Add(5 * time.Second) // the warning follows the wake
	for warned.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := warned.Load(); n != 1 {
		t.Fatalf("%d warnings, want 1", n)
	}
	ln = h.Listen("job")
	defer ln.Close()
	if !ln.Ready(ctx, 5*time.Second) {
		t.Fatal("Ready after a failure that passes: false, want subscribed again")
	}
}

// A connection that breaks (reset by the network) wakes its listeners,
// which poll (Ready false) until go-redis has reconnected and Redis has
// confirmed the channel again; then changes are pushed again.
func TestBrokenConnectionWakesAndResubscribes(t *testing.T) {
	m, _ := redistest.Miniredis(t)
	p := faultproxy.New(t, m.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	h, warned := newHub(t, rdb)
	ln := h.Listen("job")
	defer ln.Close()
	if !ln.Ready(ctx, 5*time.Second) {
		t.Fatal("Ready: false")
	}
	p.ResetAll()
	if !woken(ln, 5*time.Second) {
		t.Fatal("not woken when the connection broke")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !ln.Ready(ctx, 100*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not confirmed again after the connection broke")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if warned.Load() == 0 {
		t.Fatal("no warning when the connection broke")
	}
	for len(ln.Wake()) > 0 {
		<-ln.Wake()
	}
	m.Publish("job", "x")
	if !woken(ln, 5*time.Second) {
		t.Fatal("not woken by a message after the resubscription")
	}
}

// An error reply that refuses no subscription (an ACL that allows the
// channel but not PING) shows the connection alive: the live channel is
// kept, nothing is warned, and later listeners still subscribe.
func TestRefusedPingKeepsTheSubscription(t *testing.T) {
	prefix := redistest.UniqueKey(t)
	srv := redistest.ACLServer(t, prefix, append([]string{"&" + prefix + ":*"}, redistest.ACLPubSub...)) // no +ping
	var warned atomic.Int32
	rdb := srv.Client(t)
	h := New(Config{Subscriptions: store.New(rdb, store.Config{Lease: time.Minute}).Subscriptions(), Timeout: time.Second,
		Warn: func(context.Context, error) { warned.Add(1) }})
	const ping = 500 * time.Millisecond // see TestSilentSubscriptionIsPingedThenGivenUp
	h.Test.PingEvery = ping
	ctx := context.Background()
	ln := h.Listen(prefix + ":job")
	defer ln.Close()
	if !ln.Ready(ctx, 5*time.Second) {
		t.Fatal("Ready: false")
	}
	sc := connOf(h, "")
	time.Sleep(5 * ping) // several pings, each refused
	if n := warned.Load(); n != 0 || connOf(h, "") != sc {
		t.Fatalf("after refused pings: %d warnings, connection kept %v; want kept, no warning", n, connOf(h, "") == sc)
	}
	// Later listeners subscribe: the hub does not poll for Retry (a refused
	// PING beside a pending SUBSCRIBE: TestRefusalOfAnotherCommandKeepsAPendingSubscription).
	h.mu.Lock()
	off := h.offUntil
	h.mu.Unlock()
	if !off.IsZero() {
		t.Fatalf("listeners poll until %v after refused pings, want them to subscribe", off)
	}
	if err := rdb.Publish(ctx, prefix+":job", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if !woken(ln, 5*time.Second) {
		t.Fatal("not woken by a message after refused pings")
	}
}

// refusalsOf counts the commands Redis refused the ACL user, by name, from
// ACL LOG (one entry per command and user, its count growing).
func refusalsOf(admin *redis.Client, command string) (int64, error) {
	entries, err := admin.Do(context.Background(), "acl", "log").Slice()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range entries {
		fields := map[string]any{}
		switch e := e.(type) {
		case map[any]any: // RESP3
			for k, v := range e {
				fields[k.(string)] = v
			}
		case []any: // RESP2: key, value, ...
			for i := 0; i+1 < len(e); i += 2 {
				fields[e[i].(string)] = e[i+1]
			}
		}
		if fields["reason"] == "command" && fields["object"] == command {
			c, _ := fields["count"].(int64)
			n += c
		}
	}
	return n, nil
}

// A refusal is matched to the command it answers, by the order of
// replies: with the documented pub/sub rules (ACLPubSub: no +unsubscribe,
// no +ping), a refused UNSUBSCRIBE or PING answered while another
// channel's SUBSCRIBE is pending does not fail that subscription, warns
// nothing, and does not make later listeners poll.
func TestRefusalOfAnotherCommandKeepsAPendingSubscription(t *testing.T) {
	for _, command := range []string{"unsubscribe", "ping"} {
		t.Run(command, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			srv := redistest.ACLServer(t, prefix, append([]string{"&" + prefix + ":*"}, redistest.ACLPubSub...))
			admin := srv.AdminClient(t)
			var warned atomic.Int32
			h := New(Config{Subscriptions: store.New(srv.Client(t), store.Config{Lease: time.Minute}).Subscriptions(), Timeout: time.Second,
				Warn: func(context.Context, error) { warned.Add(1) }})
			if command == "ping" {
				h.Test.PingEvery = 300 * time.Millisecond // unanswered for as long again: given up
			}
			ctx := context.Background()
			first, second := prefix+":first", prefix+":second"
			a := h.Listen(first)
			// Just before the second channel's SUBSCRIBE is sent (the
			// channel pending on the connection), make Redis refuse the
			// other command, and send the SUBSCRIBE only once it has: the
			// refusal's reply comes while the channel is pending.
			h.Test.Subscribing = func(channel string) {
				if channel != second {
					return
				}
				before, err := refusalsOf(admin, command)
				if command == "unsubscribe" {
					a.Close() // the first channel's last listener: UNSUBSCRIBE
				}
				for deadline := time.Now().Add(5 * time.Second); err == nil; time.Sleep(5 * time.Millisecond) {
					var n int64
					if n, err = refusalsOf(admin, command); n > before {
						return
					}
					if time.Now().After(deadline) {
						err = errors.New("none within 5s")
					}
				}
				if !errors.Is(err, redis.ErrClosed) { // closed: the test has ended
					t.Errorf("waiting for Redis to refuse a %s: %v", command, err)
				}
			}
			if !a.Ready(ctx, 5*time.Second) {
				t.Fatal("Ready: false for an allowed channel")
			}
			b := h.Listen(second)
			defer b.Close()
			if !b.Ready(ctx, 5*time.Second) {
				t.Fatalf("Ready: false, want the pending SUBSCRIBE confirmed (the refused %s was taken for its refusal)", command)
			}
			h.mu.Lock()
			off := h.offUntil
			h.mu.Unlock()
			if !off.IsZero() || warned.Load() != 0 {
				t.Fatalf("after a refused %s: listeners poll until %v, %d warnings; want them to subscribe, no warning", command, off, warned.Load())
			}
			if err := srv.Client(t).Publish(ctx, second, "x").Err(); err != nil {
				t.Fatal(err)
			}
			if !woken(b, 5*time.Second) {
				t.Fatal("not woken by a message on the confirmed channel")
			}
		})
	}
}

// An operator revokes the channel permission: Redis closes the user's
// subscribed connection, go-redis reconnects and subscribes again on its
// own, and Redis refuses that. The refusal, of a command the hub did not
// send, fails the channel with a warning: its listeners poll, and for
// Retry no listener sends a SUBSCRIBE Redis would refuse.
func TestRevokedChannelPermissionPolls(t *testing.T) {
	prefix := redistest.UniqueKey(t)
	srv := redistest.ACLServer(t, prefix, append([]string{"&" + prefix + ":*"}, redistest.ACLPubSub...))
	var warned atomic.Int32
	h := New(Config{Subscriptions: store.New(srv.Client(t), store.Config{Lease: time.Minute}).Subscriptions(), Timeout: time.Second,
		Warn: func(context.Context, error) { warned.Add(1) }})
	var sent atomic.Int32
	h.Test.Subscribing = func(string) { sent.Add(1) }
	ctx := context.Background()
	ln := h.Listen(prefix + ":job")
	defer ln.Close()
	if !ln.Ready(ctx, 5*time.Second) {
		t.Fatal("Ready: false for an allowed channel")
	}
	if err := srv.AdminClient(t).Do(ctx, "acl", "setuser", srv.User, "resetchannels").Err(); err != nil {
		t.Fatal(err)
	}
	if !woken(ln, 5*time.Second) {
		t.Fatal("not woken when Redis closed the subscription")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.mu.Lock()
		off := h.offUntil
		h.mu.Unlock()
		if !off.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("listeners do not poll after the resubscription was refused")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if ln.Ready(ctx, time.Second) {
		t.Fatal("Ready: true for a channel the ACL no longer allows")
	}
	other := h.Listen(prefix + ":other")
	defer other.Close()
	if other.Ready(ctx, time.Second) {
		t.Fatal("Ready: true while subscriptions are refused")
	}
	if n := sent.Load(); n != 1 {
		t.Fatalf("%d SUBSCRIBEs sent, want only the first: none within Retry of the refusal", n)
	}
	if warned.Load() == 0 {
		t.Fatal("no warning")
	}
}

// A listener that subscribes a channel again while the UNSUBSCRIBE of its
// last listener is still on its way keeps its subscription: its
// SUBSCRIBE waits for that UNSUBSCRIBE, so Redis never gets them in the
// other order (which would drop the new listener's channel, and make it
// read again and resubscribe: a wasted trip on every back-to-back wait of
// one job). Here the UNSUBSCRIBE is held until the new listener is
// confirmed, or a second.
func TestResubscribeWaitsForTheUnsubscribe(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			h, _ := newHub(t, tg.Client)
			ch := redistest.UniqueKey(t) + ":{a}"
			a := h.Listen(ch)
			if !a.Ready(ctx, 5*time.Second) {
				t.Fatal("first listener: Ready false")
			}
			bReady := make(chan struct{})
			h.Test.Unsubscribing = func(string) {
				select {
				case <-bReady:
				case <-time.After(time.Second):
				}
			}
			a.Close()
			b := h.Listen(ch)
			defer b.Close()
			if !b.Ready(ctx, 5*time.Second) {
				t.Fatal("second listener: Ready false")
			}
			close(bReady)
			leaving := func() bool {
				h.mu.Lock()
				defer h.mu.Unlock()
				for _, sc := range h.conns {
					if len(sc.turn) > 0 {
						return true
					}
				}
				return false
			}
			for deadline := time.Now().Add(5 * time.Second); leaving(); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the UNSUBSCRIBE was never sent")
				}
			}
			publish(t, h, tg.Client, ch)
			if !woken(b, 5*time.Second) {
				t.Fatal("second listener never woken")
			}
			h.mu.Lock()
			c := h.chans[ch]
			live := c != nil && c.phase == live
			h.mu.Unlock()
			if !live {
				t.Fatal("the second listener's channel was dropped: the first listener's UNSUBSCRIBE reached Redis after its SUBSCRIBE")
			}
			if !b.Ready(ctx, 5*time.Second) {
				t.Fatal("second listener: Ready false after the message")
			}
		})
	}
}

// A message read before a new listener's subscription is confirmed was
// published under the last listener's subscription, before the new one:
// it does not wake the new listener, whose first read (after the
// confirmation) sees what it announced. Woken, a waiter would read twice
// for nothing.
func TestMessageBeforeConfirmationWakesNobody(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			h, _ := newHub(t, tg.Client)
			ch := redistest.UniqueKey(t) + ":{a}"
			release, got := make(chan struct{}), make(chan struct{})
			h.Test.Unsubscribing = func(string) { <-release }
			var once sync.Once
			h.Test.Message = func(name string) {
				if name == ch {
					once.Do(func() { close(got) })
				}
			}
			a := h.Listen(ch)
			if !a.Ready(ctx, 5*time.Second) {
				t.Fatal("first listener: Ready false")
			}
			a.Close() // its UNSUBSCRIBE is held: the channel stays subscribed
			b := h.Listen(ch)
			defer b.Close()
			ready := make(chan bool, 1)
			go func() { ready <- b.Ready(ctx, 10*time.Second) }()
			waitFor(t, "the second listener's channel", func() bool {
				h.mu.Lock()
				defer h.mu.Unlock()
				c := h.chans[ch]
				return c != nil && c.phase == pending
			})
			publish(t, h, tg.Client, ch)
			select {
			case <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("the message never came on the first listener's subscription")
			}
			close(release)
			if !<-ready {
				t.Fatal("second listener: Ready false")
			}
			select {
			case <-b.Wake():
				t.Fatal("woken by a message published before its subscription")
			default:
			}
		})
	}
}

// waitFor polls cond until it holds, failing after five seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
	}
}

// publish sends a message on channel, as a settle's script does
// (SPUBLISH on a cluster).
func publish(t *testing.T, h *Hub, rdb store.Client, channel string) {
	t.Helper()
	cmd := "publish"
	if h.cfg.Subscriptions.Sharded {
		cmd = "spublish"
	}
	ctx := context.Background()
	if err := rdb.Process(ctx, redis.NewIntCmd(ctx, cmd, channel, "x")); err != nil {
		t.Fatal(err)
	}
}

// A connection kept busy by one channel serves many others, one job's
// each, that come and go: once each is unsubscribed the hub keeps nothing
// of it (no channel, no turn record), or a long-lived process would grow
// with every job it ever waited for.
func TestGoneChannelsLeaveNothingBehind(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			h, _ := newHub(t, tg.Client)
			base := redistest.UniqueKey(t)
			keep := h.Listen(base + ":{a}")
			defer keep.Close()
			if !keep.Ready(ctx, 5*time.Second) {
				t.Fatal("keeper: Ready false")
			}
			for i := range 5 {
				ln := h.Listen(fmt.Sprintf("%s:%d:{a}", base, i))
				if !ln.Ready(ctx, 5*time.Second) {
					t.Fatalf("listener %d: Ready false", i)
				}
				ln.Close()
			}
			waitFor(t, "every gone channel forgotten", func() bool {
				h.mu.Lock()
				defer h.mu.Unlock()
				turns := 0
				for _, sc := range h.conns {
					turns += len(sc.turn)
				}
				return len(h.chans) == 1 && turns == 0
			})
		})
	}
}
