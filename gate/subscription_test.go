package gate_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

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
	owner := newGate(t, direct, gate.Options{Prefix: prefix, Lease: longLease, Retention: gate.Retention{Done: time.Minute}})
	waiter := newGate(t, subscribeVia{Client: direct, sub: viaProxy}, gate.Options{Prefix: prefix, Lease: longLease, Observer: rec, Redis: gate.RedisPolicy{Timeout: 500 * time.Millisecond}})
	// A ping answered later than this is given up: long enough that a
	// loaded machine's scheduling delay is not taken for a silent path.
	const ping = 500 * time.Millisecond
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
	// after waiting Options.Redis.Timeout for its confirmation.
	wantDone(t, done, 10*time.Second)
	if !polled(rec) {
		t.Fatal("no WarnWaitPolling after the subscription was given up")
	}
}

// shardSubs returns how many connections subscribe to channel on the
// server at addr (SHARDNUMSUB, which counts that server's subscribers
// only, whoever owns the slot).
func shardSubs(t *testing.T, addr, channel string) int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	n, err := c.PubSubShardNumSub(context.Background(), channel).Result()
	if err != nil {
		t.Fatalf("SHARDNUMSUB on %s: %v", addr, err)
	}
	return n[channel]
}

// TestWaitAcrossSlotMigration: the slot of a running job moves to another
// master (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE)
// while a waiter waits (30 s budget, a lease of a minute) and a Watch is
// open in another process. Redis 7 drops the shard subscription on the old
// master (an sunsubscribe the gate did not ask for) and publishes the
// slot's messages on the new one. The gate subscribes again through the
// slot's new owner and reads again, so the settle that follows (a success,
// a transient failure, a reset) reaches the waiter and the watcher within
// moments, not when the budget or the lease ends. Last, a job whose key
// moved while nothing waited gets its subscription on the new master.
func TestWaitAcrossSlotMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	cl := redistest.Cluster(t, 3, 0)
	prefix := redistest.UniqueKey(t)
	opts := gate.Options{Prefix: prefix, Lease: longLease, Retention: gate.Retention{Done: time.Minute}, Cooldown: time.Hour, Backoff: gate.Backoff{Jitter: -1}}
	// Each gate on a client of its own, which learns the slot map before
	// the migration and is left to find out about it.
	owner := newGate(t, cl.Client(t), opts)
	waiter := newGate(t, cl.Client(t), opts)
	// The watch is in the waiter's gate: it shares the wait's subscription.
	ctx := context.Background()
	const budget = 30 * time.Second
	// prompt bounds each answer after the settle: far inside the budget
	// and the lease, which a waiter that missed the move would sleep out.
	const prompt = 5 * time.Second
	var reads func(string) int64

	type outcome struct {
		l   *gate.Lease
		err error
	}
	for _, tc := range []struct {
		name string
		// mid: settle mid-migration, the job's keys on the target and the
		// slot not handed over yet; else once the slot has moved.
		mid    bool
		settle func(l *gate.Lease) error
		check  func(t *testing.T, o outcome)
		// watched: what the watch may report after the settle.
		watched func(before, st gate.Status) bool
		// then: more, with the watch still open.
		then func(t *testing.T, job, lock string, watch <-chan gate.Status)
	}{
		{name: "succeed",
			settle: func(l *gate.Lease) error { return l.Succeed(ctx) },
			check: func(t *testing.T, o outcome) {
				if o.l != nil || !errors.Is(o.err, gate.ErrDone) {
					t.Fatalf("AcquireWait: lease %v, %v; want ErrDone", o.l, o.err)
				}
			},
			watched: func(_, st gate.Status) bool { return st.State == gate.Done }},
		{name: "fail",
			settle: func(l *gate.Lease) error { return l.Fail(ctx, errBoom) },
			check: func(t *testing.T, o outcome) {
				ra, _ := gate.RetryAfter(o.err)
				if o.l != nil || !errors.Is(o.err, gate.ErrCoolingDown) || ra < 50*time.Minute {
					t.Fatalf("AcquireWait: lease %v, %v (retry after %v); want ErrCoolingDown for about an hour", o.l, o.err, ra)
				}
			},
			watched: func(_, st gate.Status) bool { return st.State == gate.CoolingDown && st.Attempts == 1 },
			// The slot moves once more under the open watch, and a reset
			// (Reset refuses a running job) shows at once.
			then: func(t *testing.T, job, lock string, watch <-chan gate.Status) {
				cl.MigrateSlot(t, lock, 0)
				if err := owner.Reset(ctx, job); err != nil {
					t.Fatal(err)
				}
				if st := nextState(t, watch, gate.Ready, prompt); st.Attempts != 0 {
					t.Fatalf("watch after the reset: %+v", st)
				}
			}},
		// The release's message goes to the target, where nobody listens
		// yet; the waiter learns when the slot is handed over and the
		// source drops its subscription.
		{name: "release-mid", mid: true,
			settle: func(l *gate.Lease) error { return l.Release(ctx) },
			check: func(t *testing.T, o outcome) {
				if o.err != nil || o.l == nil || !o.l.Gated() {
					t.Fatalf("AcquireWait after a release: lease %v, %v; want the freed job's lease", o.l, o.err)
				}
				if err := o.l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			},
			// The watch reads the job free, or the waiter's lease if that
			// came first (an acquire is not announced).
			watched: func(before, st gate.Status) bool {
				return st.State == gate.Ready || st.State == gate.Running && st.Fence != before.Fence
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads = countSubscribed(t)
			job := "moving-" + tc.name
			lock := keyspace.Job(prefix, job)
			l, err := owner.Acquire(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			watch, err := waiter.Watch(wctx, job)
			if err != nil {
				t.Fatal(err)
			}
			before := nextState(t, watch, gate.Running, prompt)
			done := make(chan outcome, 1)
			go func() {
				l, err := waiter.AcquireWait(ctx, job, budget)
				done <- outcome{l, err}
			}()
			waitUntil(t, prompt, "waiter subscribed", func() bool { return reads(job) >= 1 })
			from := cl.SlotOwner(t, lock)
			if n := shardSubs(t, from, lock); n != 1 {
				t.Fatalf("%d subscriptions to %s on its master before the move, want the gate's one", n, lock)
			}

			m := cl.StartMigration(t, lock)
			if moved := m.MoveKeys(t, 100); moved == 0 {
				t.Fatalf("no key of %s to migrate", job)
			}
			var start time.Time
			settle := func() {
				start = time.Now()
				if err := tc.settle(l); err != nil {
					t.Fatalf("settle: %v", err)
				}
			}
			if tc.mid {
				settle()
			}
			m.Finish(t)
			if !tc.mid {
				settle()
			}
			select {
			case o := <-done:
				tc.check(t, o)
			case <-time.After(prompt):
				t.Fatalf("waiter not answered within %v of the settle (budget %v): it missed the slot's move", prompt, budget)
			}
			select {
			case st, ok := <-watch:
				if !ok || !tc.watched(before, st) {
					t.Fatalf("watch after the settle: %+v (open %v)", st, ok)
				}
			case <-time.After(prompt - time.Since(start)):
				t.Fatalf("watch silent for %v after the settle: it missed the slot's move", prompt)
			}
			// The subscription followed the slot: one on the new master
			// (the watch's, now alone), none left on the old.
			waitUntil(t, prompt, "subscription on the new master", func() bool {
				return shardSubs(t, m.To.Addr, lock) == 1 && shardSubs(t, m.From.Addr, lock) == 0
			})
			if tc.then != nil {
				tc.then(t, job, lock, watch)
			}
			cancel()
			waitUntil(t, prompt, "watch closed", func() bool {
				for range watch {
				}
				return gate.Listeners(waiter) == 0
			})
		})
	}

	// The key moves while nothing waits; the waiter's client still has the
	// old slot map. A wait that starts then subscribes on the new master.
	t.Run("idle", func(t *testing.T) {
		reads = countSubscribed(t)
		const job = "moved-before"
		lock := keyspace.Job(prefix, job)
		cl.MigrateSlot(t, lock, 0)
		to := cl.SlotOwner(t, lock)
		l, err := owner.Acquire(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := waiter.AcquireWait(ctx, job, budget)
			done <- err
		}()
		waitUntil(t, prompt, "subscription on the new master", func() bool {
			return reads(job) >= 1 && shardSubs(t, to, lock) == 1
		})
		if err := l.Succeed(ctx); err != nil {
			t.Fatal(err)
		}
		wantDone(t, done, prompt)
	})
	// The slot map of the waiter's client lags behind the move (gossip
	// has not reached the node it asks, or its reload is in its cooldown):
	// each subscription it sends to the old master is answered MOVED. The
	// waiter and the watch poll meanwhile, with backoff, and do not spin
	// on the refusal; once the map follows they subscribe on the new master
	// and are pushed the settle.
	t.Run("lagging-map", func(t *testing.T) {
		reads = countSubscribed(t)
		var frozen atomic.Pointer[[]redis.ClusterSlot]
		lagging := redis.NewClusterClient(&redis.ClusterOptions{
			ClusterSlots: func(ctx context.Context) ([]redis.ClusterSlot, error) {
				if s := frozen.Load(); s != nil {
					return *s, nil
				}
				return liveSlots(ctx, cl)
			}})
		t.Cleanup(func() { _ = lagging.Close() })
		var rt roundTrips
		lagging.AddHook(&rt)
		lg := newGate(t, lagging, opts)
		const job = "lagging"
		lock := keyspace.Job(prefix, job)
		l, err := owner.Acquire(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		watch := watching(t, lg, job)
		nextState(t, watch, gate.Running, prompt)
		done := make(chan error, 1)
		go func() {
			_, err := lg.AcquireWait(ctx, job, budget)
			done <- err
		}()
		waitUntil(t, prompt, "waiter subscribed", func() bool { return reads(job) >= 1 })
		old, err := liveSlots(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		frozen.Store(&old)
		m := cl.StartMigration(t, lock)
		m.MoveKeys(t, 100)
		m.Finish(t)
		// The map lags for lag: count what the waiter and the watch send.
		// Polling with backoff (10 ms doubling) reads a few times; a
		// retry at each refusal would send hundreds of reads.
		const lag = 300 * time.Millisecond
		n0 := rt.n.Load()
		time.Sleep(lag)
		if n := rt.n.Load() - n0; n > 60 {
			t.Fatalf("%d round trips in the %v the slot map lagged: waits spin on MOVED instead of polling", n, lag)
		}
		frozen.Store(nil)
		waitUntil(t, prompt, "subscription on the new master", func() bool {
			return shardSubs(t, m.To.Addr, lock) == 1 && shardSubs(t, m.From.Addr, lock) == 0
		})
		if err := l.Succeed(ctx); err != nil {
			t.Fatal(err)
		}
		wantDone(t, done, prompt)
		nextState(t, watch, gate.Done, prompt)
	})
}

// liveSlots reads the cluster's slot map from its first node that answers.
func liveSlots(ctx context.Context, cl *redistest.ClusterSrv) ([]redis.ClusterSlot, error) {
	var err error
	for _, addr := range cl.Addrs() {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		var s []redis.ClusterSlot
		s, err = c.ClusterSlots(ctx).Result()
		_ = c.Close()
		if err == nil {
			return s, nil
		}
	}
	return nil, err
}

// TestAcquireFollowsASKDuringMigration: the job's slot is migrating and
// its key is not on the source yet, which answers the acquire sent to it
// (through that master's client, for TIME) with ASK. The acquire is sent
// once more through the cluster client, which follows the ASK to the
// target: the job runs, once, and settles there.
func TestAcquireFollowsASKDuringMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	cl := redistest.Cluster(t, 3, 0)
	prefix := redistest.UniqueKey(t)
	g := newGate(t, cl.Client(t), gate.Options{Prefix: prefix})
	m := cl.StartMigration(t, keyspace.Job(prefix, "job"))
	defer m.Finish(t)
	ctx := context.Background()
	runs := 0
	if err := g.Do(ctx, "job", func(context.Context, *gate.Lease) error { runs++; return nil }); err != nil || runs != 1 {
		t.Fatalf("Do while the job's slot migrates: %v after %d runs, want it run once", err, runs)
	}
}

// TestAcquireWaitLeavesWhileItsSubscribeIsOnItsWay: subscribing runs in
// the background, so a waiter can give up while its SUBSCRIBE is still on
// its way. Its UNSUBSCRIBE must not overtake that SUBSCRIBE (which would
// then land on a channel nobody listens to, and the subscription
// connection would carry it, and every settle's message for that job, for
// as long as it lives): it waits its turn, and the channel ends
// unsubscribed. The hook holds the SUBSCRIBE after the waiter gave up.
func TestAcquireWaitLeavesWhileItsSubscribeIsOnItsWay(t *testing.T) {
	srv := redistest.Server(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	prefix := redistest.UniqueKey(t)
	owner, err := newGate(t, rdb, gate.Options{Prefix: prefix, Lease: longLease}).Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Release(context.Background()) })
	waiter := newGate(t, rdb, gate.Options{Prefix: prefix, Lease: longLease})
	lock := keyspace.Job(prefix, "job") // the channel is the lock key

	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	gate.SetSubscribeHook(waiter, func(channel string) {
		if channel != lock {
			return
		}
		once.Do(func() { close(arrived) })
		<-release
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})

	before := calls(t, rdb, "unsubscribe")
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := waiter.AcquireWait(wctx, "job", time.Minute)
		done <- err
	}()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter's subscribe never started")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("AcquireWait after its caller gave up: %v, want context.Canceled", err)
	}
	// Nothing overtakes the held SUBSCRIBE.
	unsubscribed, subscribed := calls(t, rdb, "unsubscribe"), calls(t, rdb, "subscribe")
	if unsubscribed != before {
		t.Fatalf("an UNSUBSCRIBE reached Redis while the waiter's SUBSCRIBE was held")
	}
	close(release)
	waitUntil(t, 5*time.Second, "the SUBSCRIBE, then the UNSUBSCRIBE, reach Redis", func() bool {
		return calls(t, rdb, "subscribe") > subscribed && calls(t, rdb, "unsubscribe") > unsubscribed
	})
	// Undone well inside the idle connection's linger (5 s), which would
	// otherwise drop it with the connection.
	waitUntil(t, time.Second, "the channel nobody listens to unsubscribed", func() bool {
		return rdb.PubSubNumSub(ctx, lock).Val()[lock] == 0
	})
}
