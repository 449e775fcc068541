package gate_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/faultproxy"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/redistest"
)

// proxied returns a fault proxy in front of srv and a client through it.
func proxied(t *testing.T, srv *redistest.Srv) (*faultproxy.Proxy, *redis.Client) {
	t.Helper()
	p := faultproxy.New(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return p, c
}

// subscribeVia is a client that runs scripts and reads on one connection
// pool and subscribes through another (here: a fault proxy), so a test can
// silence the subscription alone.
type subscribeVia struct {
	*redis.Client
	sub *redis.Client
}

func (c subscribeVia) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	return c.sub.Subscribe(ctx, channels...)
}

// TestAcquireWaitSilentSubscription: the subscription's connection goes
// silent (a path that drops packets: no reset, no error) and the settle's
// message is lost with it. A subscription silent for pingEvery is pinged;
// unanswered for as long again it is given up with a warning, and the
// waiter subscribes and reads again: it gets the settle's outcome, not the
// lease's end. A healthy subscription that is merely idle answers its ping
// and is kept. (pingEvery is 30 s; the test shortens it for this gate.)
func TestAcquireWaitSilentSubscription(t *testing.T) {
	srv := redistest.Server(t)
	p, viaProxy := proxied(t, srv)
	direct := srv.Client(t)
	prefix := redistest.UniqueKey(t)
	rec := newRecorder()
	owner := newGate(t, direct, gate.Options{Prefix: prefix, Lease: longLease, DoneTTL: time.Minute})
	waiter := newGate(t, subscribeVia{Client: direct, sub: viaProxy}, gate.Options{Prefix: prefix, Lease: longLease, Observer: rec, Timeout: 500 * time.Millisecond})
	const ping = 100 * time.Millisecond
	gate.SetPingEvery(waiter, ping)
	ctx := context.Background()
	l, err := owner.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	done, _ := waitInBackground(t, waiter, "job", 30*time.Second, 5*time.Second)

	// Idle but healthy for several ping intervals: kept, no warning.
	lock := keyspace.Job(prefix, "job")
	time.Sleep(5 * ping)
	if n, warned := direct.PubSubNumSub(ctx, lock).Val()[lock], polled(rec); n != 1 || warned {
		t.Fatalf("an idle, healthy subscription: %d subscribers, warned %v; want it kept, no warning", n, warned)
	}
	if accepted := p.Accepted(); accepted != 1 {
		t.Fatalf("%d connections through the proxy, want the one subscription", accepted)
	}

	p.Blackhole(true)
	if err := l.Succeed(ctx); err != nil {
		t.Fatal(err)
	}
	// The message is lost, and the lease has a minute left: only giving the
	// silent subscription up (after 2 × ping) answers the waiter in time.
	// Its new subscription goes the same silent way; the waiter reads
	// after waiting Options.Timeout for its confirmation.
	wantDone(t, done, 5*time.Second)
	if !polled(rec) {
		t.Fatal("no WarnWaitPolling after the subscription was given up")
	}
}
