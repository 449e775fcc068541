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
	"github.com/retrygate/retrygate/internal/redistest"
)

// A lease much longer than any test: a waiter that returns early was woken
// by the settle, not by the lease's end.
const longLease = time.Minute

// waitUntil polls cond until it holds, failing t after within.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// subscribers returns how many connections subscribe to channel on the
// server that holds it (SHARDNUMSUB on that cluster master).
func subscribers(t *testing.T, tg redistest.Target, channel string) int64 {
	t.Helper()
	ctx := context.Background()
	if cc, ok := tg.Client.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, channel)
		if err != nil {
			t.Fatal(err)
		}
		return m.PubSubShardNumSub(ctx, channel).Val()[channel]
	}
	return tg.Client.PubSubNumSub(ctx, channel).Val()[channel]
}

// waitInBackground starts g.AcquireWait(job, budget) and waits until its
// subscription is confirmed (within); it returns the wait's error and the count
// of reads it made after a confirmed subscription.
func waitInBackground(t *testing.T, g *gate.Gate, job string, budget, within time.Duration) (<-chan error, *atomic.Int32) {
	t.Helper()
	subscribed := new(atomic.Int32)
	t.Cleanup(setWaitHooks(nil, func(string) { subscribed.Add(1) }))
	done := make(chan error, 1)
	spawn(t, func(ctx context.Context) {
		_, err := g.AcquireWait(ctx, job, budget)
		done <- err
	})
	waitUntil(t, within, "waiter subscribed", func() bool { return subscribed.Load() >= 1 })
	return done, subscribed
}

// wantDone fails t unless the waiter's wait ends in ErrDone within.
func wantDone(t *testing.T, done <-chan error, within time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, gate.ErrDone) {
			t.Fatalf("AcquireWait: %v, want ErrDone", err)
		}
	case <-time.After(within):
		t.Fatalf("waiter not answered within %v", within)
	}
}

// polled reports whether rec saw the WarnWaitPolling warning.
func polled(rec *recorder) bool { return pollWarnings(rec.drain()) > 0 }

// runningElsewhere acquires "job" on a gate of its own over rdb and returns
// that lease and a gate with o's options (Prefix and Lease set) sharing its
// keys: the waiter. The lease is released at the test's end.
func runningElsewhere(t *testing.T, rdb gate.Client, o gate.Options) (*gate.Lease, *gate.Gate) {
	t.Helper()
	o.Prefix, o.Lease = redistest.UniqueKey(t), longLease
	owner, err := newGate(t, rdb, gate.Options{Prefix: o.Prefix, Lease: longLease}).Acquire(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Release(context.Background()) })
	return owner, newGate(t, rdb, o)
}

// countSubscribed installs a subscribed hook that counts the reads made
// after a confirmed subscription, per job.
func countSubscribed(t *testing.T) func(job string) int64 {
	t.Helper()
	var mu sync.Mutex
	n := map[string]int64{}
	t.Cleanup(setWaitHooks(nil, func(job string) {
		mu.Lock()
		n[job]++
		mu.Unlock()
	}))
	return func(job string) int64 {
		mu.Lock()
		defer mu.Unlock()
		return n[job]
	}
}

// TestAcquireWaitOneCall: waiters in 4 gates (4 processes, each with its
// own subscription) wait for a running job and all get the outcome of its
// one call, long before its lease could end: Done after a success, the
// cooldown's true time left after a failure.
func TestAcquireWaitOneCall(t *testing.T) {
	reads := countSubscribed(t)
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			var gates [4]*gate.Gate
			for i := range gates {
				gates[i] = newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: longLease,
					DoneTTL: time.Minute, Cooldown: 30 * time.Second, Jitter: -1})
			}
			const perGate = 5
			for _, outcome := range []string{"success", "failure"} {
				t.Run(outcome, func(t *testing.T) {
					job := tg.Name + "-doc-" + outcome
					ctx := context.Background()
					owner, err := gates[0].Acquire(ctx, job)
					if err != nil {
						t.Fatal(err)
					}
					errs := make(chan error, 4*perGate)
					for _, g := range gates {
						for i := 0; i < perGate; i++ {
							go func() {
								l, err := g.AcquireWait(ctx, job, 20*time.Second)
								if l != nil {
									_ = l.Release(ctx)
									err = errors.New("a waiter ran the job")
								}
								errs <- err
							}()
						}
					}
					waitUntil(t, 10*time.Second, "every waiter subscribed", func() bool { return reads(job) >= 4*perGate })
					lock := keyspace.Job(prefix, job)
					if tg.Name != "miniredis" {
						// One subscription per gate, however many wait in it.
						if exp, got := int64(4), subscribers(t, tg, lock); exp != got {
							t.Fatalf("subscribers of %s: exp %d, got %d", lock, exp, got)
						}
					}
					start := time.Now()
					if outcome == "success" {
						err = owner.Succeed(ctx)
					} else {
						err = owner.Fail(ctx, errBoom)
					}
					if err != nil {
						t.Fatal(err)
					}
					for i := 0; i < 4*perGate; i++ {
						err := <-errs
						switch outcome {
						case "success":
							if !errors.Is(err, gate.ErrDone) {
								t.Fatalf("waiter %d: %v, want ErrDone", i, err)
							}
						default:
							d, ok := gate.RetryAfter(err)
							if !errors.Is(err, gate.ErrCoolingDown) || !ok || d <= 25*time.Second || d > 30*time.Second {
								t.Fatalf("waiter %d: %v (retry after %v), want ErrCoolingDown with the cooldown's time left", i, err, d)
							}
						}
					}
					if took := time.Since(start); took > 5*time.Second {
						t.Fatalf("waiters answered %v after the settle", took)
					}
					for _, g := range gates {
						if n := gate.Listeners(g); n != 0 {
							t.Fatalf("%d listeners left after the wait", n)
						}
					}
					if tg.Name != "miniredis" {
						waitUntil(t, 5*time.Second, "unsubscribed", func() bool { return subscribers(t, tg, lock) == 0 })
					}
				})
			}
		})
	}
}

// TestAcquireWaitRunsFreedJob: a waiter runs the job once the running
// lease is released without an outcome (Release: the call did not reach
// the model): the wait is for the job, not for a refusal.
func TestAcquireWaitRunsFreedJob(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			owner, g2 := runningElsewhere(t, tg.Client, gate.Options{Wait: 20 * time.Second})
			ctx := context.Background()
			go func() {
				time.Sleep(20 * time.Millisecond)
				_ = owner.Release(ctx)
			}()
			ran := false
			start := time.Now()
			// Options.Wait applies to Do.
			if err := g2.Do(ctx, "job", func(ctx context.Context, l *gate.Lease) error {
				ran = l.Fence() > owner.Fence()
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !ran || time.Since(start) > 5*time.Second {
				t.Fatalf("ran %v after %v, want the waiter to run the freed job with a newer fence", ran, time.Since(start))
			}
		})
	}
}

// A waiter woken by the success of the run it waited for never runs the
// job again, however short DoneTTL is (0 here: the success releases the
// job at once): it gets ErrDone, the first call's result. A caller that
// did not wait for that run still runs the job.
func TestAcquireWaitNeverRunsASucceededJobTwice(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			owner, g2 := runningElsewhere(t, tg.Client, gate.Options{Wait: 20 * time.Second})
			ctx := context.Background()
			go func() {
				time.Sleep(20 * time.Millisecond)
				_ = owner.Succeed(ctx)
			}()
			start := time.Now()
			err := g2.Do(ctx, "job", func(ctx context.Context, l *gate.Lease) error {
				t.Error("a waiter ran the job its wait saw succeed")
				return nil
			})
			if !errors.Is(err, gate.ErrDone) || time.Since(start) > 5*time.Second {
				t.Fatalf("waiter: %v after %v, want ErrDone", err, time.Since(start))
			}
			fresh := newGate(t, tg.Client, gate.Options{Prefix: g2.Options().Prefix})
			if err := fresh.Do(ctx, "job", okFn); err != nil {
				t.Fatalf("a new call after the success (DoneTTL 0): %v, want it to run", err)
			}
		})
	}
}

// TestAcquireWaitSubscribeReadRace settles the job in the two windows a
// waiter has between its first refusal and its wait: before its
// subscription is confirmed, and between the confirmation and its read.
// Either settle publishes while nobody of this gate listens yet, so only
// reading again after subscribing sees it; a waiter that missed it would
// sleep until its budget ends.
func TestAcquireWaitSubscribeReadRace(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		for _, window := range []string{"before-subscribe", "before-read"} {
			t.Run(tg.Name+"/"+window, func(t *testing.T) {
				prefix := redistest.UniqueKey(t)
				owner := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: longLease, DoneTTL: time.Minute})
				waiter := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: longLease})
				ctx := context.Background()
				l, err := owner.Acquire(ctx, "job")
				if err != nil {
					t.Fatal(err)
				}
				var once sync.Once
				settle := func(string) { once.Do(func() { _ = l.Succeed(ctx) }) }
				if window == "before-subscribe" {
					t.Cleanup(setWaitHooks(settle, nil))
				} else {
					t.Cleanup(setWaitHooks(nil, settle))
				}
				start := time.Now()
				_, err = waiter.AcquireWait(ctx, "job", 10*time.Second)
				if !errors.Is(err, gate.ErrDone) {
					t.Fatalf("AcquireWait: %v, want ErrDone", err)
				}
				if took := time.Since(start); took > 2*time.Second {
					t.Fatalf("the settle was seen after %v: missed", took)
				}
			})
		}
	}
}

// TestAcquireWaitBudget: a waiter whose budget ends first gets ErrInFlight
// with the lease's true time left, after about its budget; with no budget
// a running job is refused at once, as without waits.
func TestAcquireWaitBudget(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			_, g2 := runningElsewhere(t, tg.Client, gate.Options{})
			ctx := context.Background()
			start := time.Now()
			_, err := g2.AcquireWait(ctx, "job", 0)
			if !errors.Is(err, gate.ErrInFlight) || time.Since(start) > time.Second {
				t.Fatalf("no budget: %v after %v, want ErrInFlight at once", err, time.Since(start))
			}
			const budget = 150 * time.Millisecond
			start = time.Now()
			_, err = g2.AcquireWait(ctx, "job", budget)
			took := time.Since(start)
			d, _ := gate.RetryAfter(err)
			if !errors.Is(err, gate.ErrInFlight) || d <= 50*time.Second || d > longLease {
				t.Fatalf("budget ended: %v (retry after %v), want ErrInFlight with the lease's time left", err, d)
			}
			if took < budget || took > budget+2*time.Second {
				t.Fatalf("returned after %v, want about the %v budget", took, budget)
			}
			if n := gate.Listeners(g2); n != 0 {
				t.Fatalf("%d listeners left", n)
			}
		})
	}
}

// TestAcquireWaitContextCancelled: a waiter whose caller gives up returns
// the context's error at once and leaves no subscription behind.
func TestAcquireWaitContextCancelled(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			_, g2 := runningElsewhere(t, tg.Client, gate.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(setWaitHooks(nil, func(string) { cancel() }))
			start := time.Now()
			_, err := g2.AcquireWait(ctx, "job", 20*time.Second)
			if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
				t.Fatalf("AcquireWait: %v after %v, want context.Canceled at once", err, time.Since(start))
			}
			if n := gate.Listeners(g2); n != 0 {
				t.Fatalf("%d listeners left", n)
			}
			if tg.Name != "miniredis" {
				lock := keyspace.Job(g2.Options().Prefix, "job")
				waitUntil(t, 5*time.Second, "unsubscribed", func() bool { return subscribers(t, tg, lock) == 0 })
			}
		})
	}
}

// TestAcquireWaitLeaseLost: the running lease's process dies (its Redis
// connection is gone, so it neither renews nor settles) and its lock
// expires, which publishes nothing: the waiter reads again when the lease
// ends and runs the job.
func TestAcquireWaitLeaseLost(t *testing.T) {
	for _, tg := range redistest.RealTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			const lease = 200 * time.Millisecond
			dead := &flaky{Client: tg.Client}
			g1 := newGate(t, dead, gate.Options{Prefix: prefix, Lease: lease})
			g2 := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: lease})
			ctx := context.Background()
			owner, err := g1.Acquire(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			dead.Down.Store(true)
			start := time.Now()
			l, err := g2.AcquireWait(ctx, "job", 10*time.Second)
			if err != nil {
				t.Fatalf("AcquireWait: %v, want the job once the dead lease expired", err)
			}
			defer l.Release(ctx)
			if took := time.Since(start); took > lease+2*time.Second {
				t.Fatalf("ran %v after the wait began, want about the lease's %v", took, lease)
			}
			if l.Fence() <= owner.Fence() {
				t.Fatalf("fence %d not above the lost lease's %d", l.Fence(), owner.Fence())
			}
		})
	}
}

// TestAcquireWaitSubscriptionDropped: Redis drops the waiter's connections
// (a fault proxy resets them) while the job runs, and the job settles while
// the subscription is down: the waiter is still answered at once, from the
// resubscription or its poll, and the gate warns that it polled.
func TestAcquireWaitSubscriptionDropped(t *testing.T) {
	srv := redistest.Server(t)
	p, viaProxy := proxied(t, srv)
	direct := srv.Client(t)
	prefix := redistest.UniqueKey(t)
	rec := newRecorder()
	owner := newGate(t, direct, gate.Options{Prefix: prefix, Lease: longLease, DoneTTL: time.Minute})
	waiter := newGate(t, viaProxy, gate.Options{Prefix: prefix, Lease: longLease, Observer: rec})
	ctx := context.Background()
	l, err := owner.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	done, _ := waitInBackground(t, waiter, "job", 20*time.Second, 5*time.Second)
	p.ResetAll()
	if err := l.Succeed(ctx); err != nil {
		t.Fatal(err)
	}
	wantDone(t, done, 5*time.Second)
	if !polled(rec) {
		t.Fatal("no EventWarning with WarnWaitPolling after the subscription broke")
	}
}

// TestAcquireWaitWithoutChannelPermission: a Redis user without channel
// permission (Redis 7 creates users with resetchannels) can neither
// publish nor subscribe. Its settles still write (the publish is
// pcall'ed), and its waiters poll, with a warning, and still see the
// outcome.
func TestAcquireWaitWithoutChannelPermission(t *testing.T) {
	srv := redistest.Server(t)
	admin := srv.Client(t)
	ctx := context.Background()
	user := "nochannels"
	if err := admin.Do(ctx, "ACL", "SETUSER", user, "on", ">secret-pw", "~*", "+@all", "resetchannels").Err(); err != nil {
		t.Fatal(err)
	}
	limited := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: user, Password: "secret-pw"})
	t.Cleanup(func() { _ = limited.Close() })
	if err := limited.Publish(ctx, "x", "y").Err(); err == nil {
		t.Fatal("the limited user may publish: the test proves nothing")
	}
	prefix := redistest.UniqueKey(t)
	rec := newRecorder()
	owner := newGate(t, limited, gate.Options{Prefix: prefix, Lease: longLease, DoneTTL: time.Minute})
	waiter := newGate(t, limited, gate.Options{Prefix: prefix, Lease: longLease, Observer: rec})
	l, err := owner.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		if err := l.Succeed(ctx); err != nil {
			t.Errorf("settle without channel permission: %v", err)
		}
	}()
	start := time.Now()
	_, err = waiter.AcquireWait(ctx, "job", 20*time.Second)
	if !errors.Is(err, gate.ErrDone) || time.Since(start) > 5*time.Second {
		t.Fatalf("AcquireWait: %v after %v, want ErrDone by polling", err, time.Since(start))
	}
	if !polled(rec) {
		t.Fatal("no WarnWaitPolling warning")
	}
}

// TestAcquireWaitAcrossFailover: the master holding the job's slot dies
// while a waiter waits, and its replica takes over. The waiter's shard
// subscription breaks with the connection; it polls meanwhile, subscribes
// again on the new master, and gets the outcome of the settle that
// follows, long before the lease ends.
func TestAcquireWaitAcrossFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 6-node cluster")
	}
	cl := redistest.Cluster(t, 3, 1)
	prefix := redistest.UniqueKey(t)
	opts := gate.Options{Prefix: prefix, Lease: longLease, DoneTTL: time.Minute}
	ownerClient := cl.Client(t)
	owner := newGate(t, ownerClient, opts)
	rec := newRecorder()
	wopts := opts
	wopts.Observer = rec
	waiter := newGate(t, cl.Client(t), wopts)
	ctx := context.Background()
	l, err := owner.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	done, _ := waitInBackground(t, waiter, "job", 60*time.Second, 10*time.Second)

	lock := keyspace.Job(prefix, "job")
	m, err := cl.Client(t).MasterForKey(ctx, lock)
	if err != nil {
		t.Fatal(err)
	}
	// The lock must be on the replica before its master dies.
	if n, err := m.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n < 1 {
		t.Fatalf("WAIT: %d %v", n, err)
	}
	cl.Server(m.Options().Addr).Kill()
	newMaster := cl.Failover(t, m.Options().Addr, true)
	// The waiter's subscription follows the slot to its new master.
	nm := redis.NewClient(&redis.Options{Addr: newMaster})
	t.Cleanup(func() { _ = nm.Close() })
	waitUntil(t, 20*time.Second, "subscribed on the new master", func() bool {
		return nm.PubSubShardNumSub(ctx, lock).Val()[lock] == 1
	})
	// The owner's client learns the new master (go-redis would by itself,
	// within its state's 10 s lifetime).
	ownerClient.ReloadState(ctx)
	waitUntil(t, 20*time.Second, "owner routes to the new master", func() bool {
		m, err := ownerClient.MasterForKey(ctx, lock)
		return err == nil && m.Options().Addr == newMaster
	})
	start := time.Now()
	if err := l.Succeed(ctx); err != nil {
		t.Fatalf("settle after the failover: %v", err)
	}
	wantDone(t, done, 10*time.Second)
	if took := time.Since(start); took > time.Second {
		t.Errorf("waiter answered %v after the settle: the resubscription should push it", took)
	}
	if !polled(rec) {
		t.Error("no WarnWaitPolling while the subscription was down")
	}
}

// TestAcquireWaitRedisDown: once a waiter has seen the job running, Redis
// going out of reach does not end its wait early, and FailOpen does not
// make it run the job blind: at the end of its budget it gets
// ErrUnavailable. (The client cannot subscribe either: it polls.)
func TestAcquireWaitRedisDown(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	prefix := redistest.UniqueKey(t)
	owner := newGate(t, rdb, gate.Options{Prefix: prefix, Lease: longLease})
	down := &flaky{Client: rdb}
	waiter := newGate(t, down, gate.Options{Prefix: prefix, Lease: longLease, FailOpen: true})
	ctx := context.Background()
	l, err := owner.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	t.Cleanup(setWaitHooks(func(string) { down.Down.Store(true) }, nil))
	const budget = 200 * time.Millisecond
	start := time.Now()
	got, err := waiter.AcquireWait(ctx, "job", budget)
	if got != nil || !errors.Is(err, gate.ErrUnavailable) {
		t.Fatalf("AcquireWait: lease %v, %v; want no lease and ErrUnavailable", got, err)
	}
	if took := time.Since(start); took < budget || took > budget+2*time.Second {
		t.Fatalf("returned after %v, want the %v budget", took, budget)
	}
}

// TestAcquireWaitDocumentedACL: a user with exactly the rules
// docs/operating.md lists, pub/sub's included, has its waits pushed: no
// polling, no warning.
func TestAcquireWaitDocumentedACL(t *testing.T) {
	prefix := "aclwait"
	wake := []string{"&" + prefix + ":*", "+publish", "+subscribe", "+unsubscribe",
		"+spublish", "+ssubscribe", "+sunsubscribe", "+ping"}
	s := redistest.ACLServer(t, prefix, wake)
	rec := newRecorder()
	owner := newGate(t, s.Client(t), gate.Options{Prefix: prefix, Lease: longLease, DoneTTL: time.Minute})
	waiter := newGate(t, s.Client(t), gate.Options{Prefix: prefix, Lease: longLease, Observer: rec})
	ctx := context.Background()
	l, err := owner.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	done, subscribed := waitInBackground(t, waiter, "job", 20*time.Second, 5*time.Second)
	// A poll would read several times meanwhile (10, 20, 40... ms).
	time.Sleep(300 * time.Millisecond)
	if err := l.Succeed(ctx); err != nil {
		t.Fatal(err)
	}
	wantDone(t, done, 5*time.Second)
	for _, e := range rec.drain() {
		if e.Kind == gate.EventWarning {
			t.Fatalf("warning %s: %v", e.Reason, e.Err)
		}
	}
	if n := subscribed.Load(); n != 2 {
		t.Fatalf("%d reads, want 2 (after subscribing, after the settle's message): polled", n)
	}
}

// TestAcquireWaitFollowsATakeover: the run a waiter waits for loses its
// lock (deleted here, as an expiry would) and another run takes the job
// over; the waiter then waits for that run, whose success is the waiter's
// ErrDone: the job does not run a third time.
func TestAcquireWaitFollowsATakeover(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			o := gate.Options{Prefix: redistest.UniqueKey(t), Lease: time.Second}
			first, second, waiter := newGate(t, tg.Client, o), newGate(t, tg.Client, o), newGate(t, tg.Client, o)
			if _, err := first.Acquire(ctx, "job"); err != nil {
				t.Fatal(err)
			}
			var took *gate.Lease
			reads := 0
			t.Cleanup(setWaitHooks(func(string) {
				// After the waiter saw the first run: its lock is lost
				// and a second run takes the job.
				if err := tg.Client.Process(ctx, redis.NewIntCmd(ctx, "del", keyspace.Job(o.Prefix, "job"))); err != nil {
					t.Error(err)
				}
				var err error
				if took, err = second.Acquire(ctx, "job"); err != nil {
					t.Errorf("takeover: %v", err)
				}
			}, func(string) {
				// The waiter's second read comes after it saw the second
				// run (its first read): that run succeeds just before it.
				if reads++; reads == 2 && took != nil {
					if err := took.Succeed(ctx); err != nil {
						t.Errorf("the second run's success: %v", err)
					}
				}
			}))
			l, err := waiter.AcquireWait(ctx, "job", 10*time.Second)
			if l != nil {
				_ = l.Release(ctx)
			}
			if !errors.Is(err, gate.ErrDone) {
				t.Fatalf("waiter after the takeover's success: %v (lease %v), want ErrDone", err, l != nil)
			}
		})
	}
}
