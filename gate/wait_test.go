package gate_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// runningElsewhere acquires "job" on a gate of its own over rdb and returns
// that lease and a gate with o's options (Prefix and Lease set) sharing its
// keys: the waiter. The lease is released at the test's end.
func runningElsewhere(t *testing.T, rdb gate.Client, o gate.Options) (*gate.Lease, *gate.Gate) {
	t.Helper()
	o.Prefix, o.Lease = redistest.UniqueKey(t), longLease
	g := newGate(t, rdb, gate.Options{Prefix: o.Prefix, Lease: longLease})
	knownUpstream(t, g) // the job's next run while it runs: not one at a time
	owner, err := g.Acquire(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Release(context.Background()) })
	return owner, newGate(t, rdb, o)
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
					Retention: gate.Retention{Done: time.Minute}, Cooldown: 30 * time.Second,
					Backoff: gate.Backoff{Jitter: -1}})
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
// job again, however short Retention.Done is (0 here: the success releases the
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
			fresh := newGate(t, tg.Client, gate.Options{Prefix: gatetest.Prefix(g2)})
			if err := fresh.Do(ctx, "job", okFn); err != nil {
				t.Fatalf("a new call after the success (Retention.Done 0): %v, want it to run", err)
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
				owner := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: longLease, Retention: gate.Retention{Done: time.Minute}})
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
			// "At once" is that no wait began, which the refused hook
			// sees; a bound on the elapsed time would fail on a loaded
			// machine.
			var waited atomic.Bool
			restore := setWaitHooks(func(string) { waited.Store(true) }, nil)
			_, err := g2.AcquireWait(ctx, "job", 0)
			restore()
			if !errors.Is(err, gate.ErrInFlight) || waited.Load() {
				t.Fatalf("no budget: %v (a wait began: %v), want ErrInFlight at once", err, waited.Load())
			}
			const budget = 150 * time.Millisecond
			start := time.Now()
			_, err = g2.AcquireWait(ctx, "job", budget)
			took := time.Since(start)
			d, _ := gate.RetryAfter(err)
			if !errors.Is(err, gate.ErrInFlight) || d < time.Second || d > 2*time.Second {
				t.Fatalf("budget ended: %v (retry after %v), want ErrInFlight with a young call's wait (a second)", err, d)
			}
			if took < budget || took > budget+2*time.Second {
				t.Fatalf("returned after %v, want about the %v budget", took, budget)
			}
			waitUntil(t, 5*time.Second, "no listener left", func() bool { return gate.Listeners(g2) == 0 })
		})
	}
}

// TestAcquireWaitContextCancelled: a waiter whose caller gives up returns
// the context's error at once and leaves no listener or subscription
// behind.
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
			// The caller is answered when ctx ends; the wait's steps, on
			// their own, let go of their listener as they see it.
			waitUntil(t, 5*time.Second, "no listener left", func() bool { return gate.Listeners(g2) == 0 })
			if tg.Name != "miniredis" {
				lock := keyspace.Job(gatetest.Prefix(g2), "job")
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
// (a fault proxy resets them, and refuses new ones) while the job runs:
// the gate warns that its waiter polls. The job settles while the
// subscription is down, and once Redis is in reach again the waiter is
// answered at once, from the resubscription or its poll. (With new
// connections let through, go-redis resubscribed before the settle on an
// idle machine and the waiter had no cause to poll: the warning came or
// not by timing.)
func TestAcquireWaitSubscriptionDropped(t *testing.T) {
	srv := redistest.Server(t)
	p, viaProxy := proxied(t, srv)
	direct := srv.Client(t)
	prefix := redistest.UniqueKey(t)
	rec := newRecorder()
	owner := newGate(t, direct, gate.Options{Prefix: prefix, Lease: longLease, Retention: gate.Retention{Done: time.Minute}})
	waiter := newGate(t, viaProxy, gate.Options{Prefix: prefix, Lease: longLease, Observer: rec})
	ctx := context.Background()
	l, err := owner.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	done, _ := waitInBackground(t, waiter, "job", 20*time.Second, 5*time.Second)
	p.Refuse(true)
	p.ResetAll()
	warned := false
	waitUntil(t, 5*time.Second, "an EventWarning with WarnWaitPolling after the subscription broke", func() bool {
		warned = warned || polled(rec)
		return warned
	})
	if err := l.Succeed(ctx); err != nil {
		t.Fatal(err)
	}
	p.Refuse(false)
	wantDone(t, done, 5*time.Second)
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
	owner := newGate(t, limited, gate.Options{Prefix: prefix, Lease: longLease, Retention: gate.Retention{Done: time.Minute}})
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
	opts := gate.Options{Prefix: prefix, Lease: longLease, Retention: gate.Retention{Done: time.Minute}}
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
	waiter := newGate(t, down, gate.Options{Prefix: prefix, Lease: longLease, Redis: gate.RedisPolicy{FailOpen: true}})
	ctx := context.Background()
	downOnceWaiting(t, owner, down)
	// Far above the first acquire's round trip on a busy machine: a wait
	// whose first read answers past its deadline is told that read.
	const budget = time.Second
	start := time.Now()
	got, err := waiter.AcquireWait(ctx, "job", budget)
	if got != nil || !errors.Is(err, gate.ErrUnavailable) {
		t.Fatalf("AcquireWait: lease %v, %v; want no lease and ErrUnavailable", got, err)
	}
	if took := time.Since(start); took < budget || took > budget+2*time.Second {
		t.Fatalf("returned after %v, want the %v budget", took, budget)
	}
}

// A wait whose Redis goes out of reach answers ErrUnavailable at its
// deadline also when the read sent last is still out then (Redis slow to
// say it is unreachable, or a machine too busy to answer within the
// wait's slack): a read before it found Redis unreachable, and the
// refusal read before that ("running") is stale.
func TestAcquireWaitRedisDownAtTheDeadline(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	prefix := redistest.UniqueKey(t)
	owner := newGate(t, rdb, gate.Options{Prefix: prefix, Lease: longLease})
	down := &flaky{Client: rdb, Late: 200 * time.Millisecond}
	waiter := newGate(t, down, gate.Options{Prefix: prefix, Lease: longLease})
	ctx := context.Background()
	downOnceWaiting(t, owner, down)
	got, err := waiter.AcquireWait(ctx, "job", time.Second)
	if got != nil || !errors.Is(err, gate.ErrUnavailable) {
		t.Fatalf("AcquireWait: lease %v, %v; want no lease and ErrUnavailable", got, err)
	}
}

// downOnceWaiting has owner hold "job" until the test ends, and takes
// Redis out of reach (down) once a waiter starts waiting for it.
func downOnceWaiting(t *testing.T, owner *gate.Gate, down *flaky) {
	t.Helper()
	ctx := context.Background()
	l, err := owner.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(ctx) })
	t.Cleanup(setWaitHooks(func(string) { down.Down.Store(true) }, nil))
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
	owner := newGate(t, s.Client(t), gate.Options{Prefix: prefix, Lease: longLease, Retention: gate.Retention{Done: time.Minute}})
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
			knownUpstream(t, first) // the lost run's call stays reserved: not one at a time
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

// Tests of the bounded, pub/sub-woken wait (AcquireWait, Watch) written
// for the mutants of notify.go (now gate/internal/hub), watch.go and
// wait.go (docs/contributing/mutants.md): what a wait costs (pushed, not
// polled; polled with backoff where it cannot subscribe), that its
// subscription and connection go away with the last waiter, and what a
// watcher is told.

// connCount counts the connections a client opened and has not closed.
type connCount struct{ live, dials atomic.Int64 }

type countedConn struct {
	net.Conn
	c    *connCount
	once sync.Once
}

func (cc *countedConn) Close() error {
	cc.once.Do(func() { cc.c.live.Add(-1) })
	return cc.Conn.Close()
}

// ownClient returns a new client to tg's backend (closed at cleanup), its
// commands counted in rt and its connections in cc (either may be nil).
func ownClient(t *testing.T, tg redistest.Target, rt *roundTrips, cc *connCount) redis.UniversalClient {
	t.Helper()
	wrap := func(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
		if cc == nil {
			return dial
		}
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			cc.dials.Add(1)
			cc.live.Add(1)
			return &countedConn{Conn: conn, c: cc}, nil
		}
	}
	var d net.Dialer
	var c redis.UniversalClient
	switch tc := tg.Client.(type) {
	case *redis.Client:
		c = redis.NewClient(&redis.Options{Addr: tc.Options().Addr, Dialer: wrap(d.DialContext)})
	case *redis.ClusterClient:
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: tc.Options().Addrs, Dialer: wrap(d.DialContext)})
	default:
		t.Fatalf("target %s: client %T", tg.Name, tg.Client)
	}
	if rt != nil {
		hook(redistest.Target{Client: c}, rt)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// spawn runs fn in a goroutine whose context ends when t does, and waits
// for it then: a failed test leaves no waiter running into the next one.
func spawn(t *testing.T, fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		fn(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// pollWarnings counts the WarnWaitPolling warnings among evs.
func pollWarnings(evs []gate.Event) int {
	n := 0
	for _, e := range evs {
		if e.Kind == gate.EventWarning && e.Reason == gate.WarnWaitPolling {
			n++
		}
	}
	return n
}

// noStatus fails t if ch delivers anything within d.
func noStatus(t *testing.T, ch <-chan gate.Status, d time.Duration, why string) {
	t.Helper()
	select {
	case st, ok := <-ch:
		t.Fatalf("%s: got status %+v (channel open %v), want none", why, st, ok)
	case <-time.After(d):
	}
}

// waitPushed runs one AcquireWait on job in waiter while owner's lease l
// runs, settles l after the waiter has been subscribed for a while, and
// returns how many reads the waiter made (reads counts them per job).
func waitPushed(t *testing.T, waiter *gate.Gate, l *gate.Lease, job string, reads func(string) int64) int64 {
	t.Helper()
	ctx := context.Background()
	before := reads(job)
	done := make(chan error, 1)
	spawn(t, func(ctx context.Context) {
		_, err := waiter.AcquireWait(ctx, job, 20*time.Second)
		done <- err
	})
	waitUntil(t, 5*time.Second, "waiter subscribed", func() bool { return reads(job) > before })
	// A poll would read several times meanwhile (10, 20, 40... ms).
	time.Sleep(300 * time.Millisecond)
	if err := l.Succeed(ctx); err != nil {
		t.Fatal(err)
	}
	wantDone(t, done, 5*time.Second)
	return reads(job) - before
}

// TestAcquireWaitPushedEveryTime: a gate's waits are woken by the settle's
// message, not by polling: two reads (after subscribing, after the
// message), no warning. The same holds for the next wait on the same job
// in the same gate, while its connection is kept, and for a wait after
// the idle connection was closed (single-node targets: the connections
// are counted there), which dials it again.
func TestAcquireWaitPushedEveryTime(t *testing.T) {
	reads := countSubscribed(t)
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			ctx := context.Background()
			var conns connCount
			rec := newRecorder()
			owner := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: longLease, Retention: gate.Retention{Done: time.Minute}})
			waiter := newGate(t, ownClient(t, tg, nil, &conns), gate.Options{Prefix: prefix, Lease: longLease, Observer: rec})
			job := tg.Name + "-pushed"
			if _, err := waiter.Status(ctx, job); err != nil { // the client's pool connection
				t.Fatal(err)
			}
			idle := conns.live.Load()
			round := func(what string) {
				t.Helper()
				if err := owner.Reset(ctx, job); err != nil { // the last round's Done mark
					t.Fatal(err)
				}
				l, err := owner.Acquire(ctx, job)
				if err != nil {
					t.Fatal(err)
				}
				if n := waitPushed(t, waiter, l, job, reads); n != 2 {
					t.Fatalf("%s: %d reads, want 2 (after subscribing, after the settle's message): polled", what, n)
				}
				if n := pollWarnings(rec.drain()); n != 0 {
					t.Fatalf("%s: %d WarnWaitPolling warnings, want none", what, n)
				}
			}
			round("first wait")
			dials := conns.dials.Load()
			round("second wait on the same job")
			if tg.IsCluster {
				return
			}
			if d := conns.dials.Load() - dials; d != 0 {
				t.Fatalf("a wait right after another dialled %d connections, want the kept one reused", d)
			}
			// The idle subscription connection is closed a few seconds
			// after the last wait.
			waitUntil(t, 10*time.Second, "the idle subscription connection closed", func() bool { return conns.live.Load() == idle })
			dials = conns.dials.Load()
			round("wait after the idle connection was closed")
			if d := conns.dials.Load() - dials; d != 1 {
				t.Fatalf("the wait after the close dialled %d connections, want 1 (its subscription)", d)
			}
		})
	}
}

// TestAcquireWaitSharedSubscription: two waiters of a job in one gate
// share one subscription. When one gives up the other is still woken by
// the settle, and when the last one returns the channel is unsubscribed.
func TestAcquireWaitSharedSubscription(t *testing.T) {
	reads := countSubscribed(t)
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			owner := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: longLease, Retention: gate.Retention{Done: time.Minute}})
			waiter := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: longLease})
			job := tg.Name + "-shared"
			lock := keyspace.Job(prefix, job)
			ctx := context.Background()
			l, err := owner.Acquire(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			quitting, quit := context.WithCancel(ctx)
			t.Cleanup(quit)
			gaveUp, stayed := make(chan error, 1), make(chan error, 1)
			spawn(t, func(context.Context) {
				_, err := waiter.AcquireWait(quitting, job, 20*time.Second)
				gaveUp <- err
			})
			spawn(t, func(ctx context.Context) {
				_, err := waiter.AcquireWait(ctx, job, 20*time.Second)
				stayed <- err
			})
			waitUntil(t, 5*time.Second, "both waiters subscribed", func() bool { return reads(job) >= 2 })
			if n := subscribers(t, tg, lock); n != 1 {
				t.Fatalf("%d subscriptions for two waiters in one gate, want 1", n)
			}
			quit()
			if err := <-gaveUp; !errors.Is(err, context.Canceled) {
				t.Fatalf("the waiter that gave up: %v", err)
			}
			if err := l.Succeed(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-stayed:
				if !errors.Is(err, gate.ErrDone) {
					t.Fatalf("the waiter that stayed: %v, want ErrDone", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter that stayed was not woken by the settle")
			}
			waitUntil(t, 5*time.Second, "no listener left", func() bool { return gate.Listeners(waiter) == 0 })
			// Within a second: after pubsubLinger (5 s) the idle connection
			// closes, which would unsubscribe it without an UNSUBSCRIBE.
			waitUntil(t, time.Second, "unsubscribed after the last waiter", func() bool { return subscribers(t, tg, lock) == 0 })
		})
	}
}

// TestAcquireWaitWithoutBudgetCostsAnAcquire: AcquireWait with no budget,
// and Acquire (Options.Wait 0), refuse a running job in one round trip,
// as a plain acquire does, and subscribe to nothing.
func TestAcquireWaitWithoutBudgetCostsAnAcquire(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			ctx := context.Background()
			var rt roundTrips
			owner := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: longLease, UpstreamPolicy: gate.UpstreamPolicy{Off: true}})
			g := newGate(t, ownClient(t, tg, &rt, nil), gate.Options{Prefix: prefix, Lease: longLease, UpstreamPolicy: gate.UpstreamPolicy{Off: true}})
			job := tg.Name + "-nowait"
			lock := keyspace.Job(prefix, job)
			l, err := owner.Acquire(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(ctx)
			if _, err := g.Acquire(ctx, job); !errors.Is(err, gate.ErrInFlight) { // loads the script
				t.Fatalf("Acquire: %v", err)
			}
			for _, wait := range []time.Duration{0, -time.Second} {
				start := rt.n.Load()
				if _, err := g.AcquireWait(ctx, job, wait); !errors.Is(err, gate.ErrInFlight) {
					t.Fatalf("AcquireWait(%v): %v, want ErrInFlight", wait, err)
				}
				if n := rt.n.Load() - start; n != 1 {
					t.Fatalf("AcquireWait(%v) of a running job: %d round trips, want 1", wait, n)
				}
			}
			if n := subscribers(t, tg, lock); n != 0 {
				t.Fatalf("%d subscriptions after calls that do not wait", n)
			}
		})
	}
}

// TestAcquireWaitPollsWithBackoffWithoutSubscribe: a client that cannot
// subscribe (a wrapper without Subscribe) makes waits poll, 10 ms doubling
// (so a few reads in half a second, not a busy loop), and the gate warns
// once, not at every wait. The polls still see the settle.
func TestAcquireWaitPollsWithBackoffWithoutSubscribe(t *testing.T) {
	reads := countSubscribed(t)
	_, rdb := redistest.Miniredis(t)
	prefix := redistest.UniqueKey(t)
	rec := newRecorder()
	owner := newGate(t, rdb, gate.Options{Prefix: prefix, Lease: longLease, Retention: gate.Retention{Done: time.Minute}})
	waiter := newGate(t, &flaky{Client: rdb}, gate.Options{Prefix: prefix, Lease: longLease, Observer: rec})
	ctx := context.Background()
	l, err := owner.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	const budget = 500 * time.Millisecond
	start := time.Now()
	_, err = waiter.AcquireWait(ctx, "job", budget)
	took := time.Since(start)
	if !errors.Is(err, gate.ErrInFlight) || took < budget {
		t.Fatalf("AcquireWait: %v after %v, want ErrInFlight after the %v budget", err, took, budget)
	}
	// 0, 10, 30, 70, 150, 310 ms and the budget's end: 7 reads.
	if n := reads("job"); n < 4 || n > 12 {
		t.Fatalf("%d reads in %v of polling, want about 7 (10 ms doubling)", n, took)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = l.Succeed(ctx)
	}()
	if _, err := waiter.AcquireWait(ctx, "job", 10*time.Second); !errors.Is(err, gate.ErrDone) {
		t.Fatalf("AcquireWait: %v, want ErrDone by polling", err)
	}
	if n := pollWarnings(rec.drain()); n != 1 {
		t.Fatalf("%d WarnWaitPolling warnings for two waits, want 1", n)
	}
}

// TestWatchQuietWhileNothingChanges: a subscribed watcher reads nothing and
// sends nothing while its job does not change: a free job, and a running
// one whose lease ends long after the test.
func TestWatchQuietWhileNothingChanges(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var rt roundTrips
			owner := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: longLease})
			g := newGate(t, ownClient(t, tg, &rt, nil), gate.Options{Prefix: prefix, Lease: longLease})
			l, err := owner.Acquire(ctx, "running")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(context.Background())
			for _, job := range []struct {
				name string
				want gate.State
			}{{"free", gate.Ready}, {"running", gate.Running}} {
				ch, err := g.Watch(ctx, job.name)
				if err != nil {
					t.Fatal(err)
				}
				if st := <-ch; st.State != job.want {
					t.Fatalf("%s: first status %v, want %v", job.name, st.State, job.want)
				}
				start := rt.n.Load()
				noStatus(t, ch, 300*time.Millisecond, job.name+" unchanged")
				if n := rt.n.Load() - start; n != 0 {
					t.Fatalf("%s: the watcher made %d round trips in 300ms while nothing changed, want 0", job.name, n)
				}
			}
		})
	}
}

// TestWatchSeesExpiries: the end of a cooldown publishes nothing; a
// watcher reads again when the TTL it read ends and reports the job
// ready.
func TestWatchSeesExpiries(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			pass(tg, 0) // miniredis's clock still: it moves only by pass
			cooldown := watchedCooldown(tg)
			g := newGate(t, tg.Client, gate.Options{Prefix: prefix, Cooldown: cooldown, Backoff: gate.Backoff{Jitter: -1}})
			// Another gate fails the job: the watcher has one wake-up, the
			// settle's message (a settle in its own gate wakes it twice, and
			// the second read could come after the cooldown's end).
			other := newGate(t, tg.Client, gate.Options{Prefix: prefix, Cooldown: cooldown, Backoff: gate.Backoff{Jitter: -1}})
			ch := watching(t, g, "job")
			nextState(t, ch, gate.Ready, 10*time.Second)
			if err := failWith(t, other, "job", errBoom); !errors.Is(err, gate.ErrCoolingDown) {
				t.Fatal(err)
			}
			st := nextState(t, ch, gate.CoolingDown, 10*time.Second)
			if tg.FastForward != nil { // a real server's cooldown ends by itself
				tg.FastForward(st.RetryAfter)
			}
			if st := nextState(t, ch, gate.Ready, 10*time.Second); st.Attempts != 1 {
				t.Fatalf("after the cooldown: %+v, want Ready with the attempt counted", st)
			}
		})
	}
}

// TestWatchSeesTheUpstream: a watcher of a job in an upstream is told when
// another process's failure cools the upstream (pushed on the upstream's
// channel), and again when the upstream's cooldown ends (nothing is
// published: it reads when the nearest TTL it read ends, here the
// upstream's, not the job's long done mark).
func TestWatchSeesTheUpstream(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			g := upstreamGate(t, tg, prefix, gate.Options{Retention: gate.Retention{Done: time.Hour}})
			other := upstreamGate(t, tg, prefix, gate.Options{Retention: gate.Retention{Done: time.Hour}})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if err := g.Do(ctx, "watched", func(context.Context, *gate.Lease) error { return nil }); err != nil {
				t.Fatal(err)
			}
			ch, err := g.Watch(ctx, "watched")
			if err != nil {
				t.Fatal(err)
			}
			if st := <-ch; st.State != gate.Done || st.Upstream.State != gate.Ready {
				t.Fatalf("first status %+v, want Done, upstream ready", st)
			}
			_ = failWith(t, other, "other", errRateLimited)
			var st gate.Status
			select {
			case st = <-ch:
			case <-time.After(2 * time.Second):
				t.Fatal("the upstream's cooldown was not reported")
			}
			if st.State != gate.Done || st.Upstream.State != gate.CoolingDown || st.Upstream.RetryAfter <= 0 {
				t.Fatalf("status %+v, want Done with the upstream cooling", st)
			}
			pass(tg, st.Upstream.RetryAfter)
			select {
			case st = <-ch:
				if st.State != gate.Done || st.Upstream.State == gate.CoolingDown {
					t.Fatalf("status %+v, want Done with the upstream's cooldown over", st)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("the end of the upstream's cooldown was not reported")
			}
		})
	}
}

// TestWatchPollsWithoutSubscribe: a watcher whose client cannot subscribe
// polls with backoff: it sees another process's change, reads a few times
// in half a second, not in a busy loop, sends nothing while nothing
// changes, and survives a Redis outage (failed reads are retried).
func TestWatchPollsWithoutSubscribe(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	prefix := redistest.UniqueKey(t)
	var rt roundTrips
	counted := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr})
	counted.AddHook(&rt)
	t.Cleanup(func() { _ = counted.Close() })
	down := &flaky{Client: counted}
	rec := newRecorder()
	g := newGate(t, down, gate.Options{Prefix: prefix, Cooldown: time.Hour, Observer: rec})
	other := newGate(t, rdb, gate.Options{Prefix: prefix, Cooldown: time.Hour})
	ch := watching(t, g, "job")
	if st := <-ch; st.State != gate.Ready {
		t.Fatalf("first status %+v", st)
	}
	start := rt.n.Load()
	noStatus(t, ch, 500*time.Millisecond, "polling an unchanged job")
	// 10, 30, 70, 150, 310 ms: 5 reads.
	if n := rt.n.Load() - start; n < 3 || n > 12 {
		t.Fatalf("%d reads in 500ms of polling, want about 5 (10 ms doubling)", n)
	}
	if n := pollWarnings(rec.drain()); n != 1 {
		t.Fatalf("%d WarnWaitPolling warnings, want 1", n)
	}
	if err := failWith(t, other, "job", errBoom); !errors.Is(err, gate.ErrCoolingDown) {
		t.Fatal(err)
	}
	nextState(t, ch, gate.CoolingDown, 3*time.Second)

	// Redis out of reach for longer than a poll step (at most a second),
	// so reads fail: the watch goes on.
	down.Down.Store(true)
	time.Sleep(1500 * time.Millisecond)
	down.Down.Store(false)
	if err := other.Reset(context.Background(), "job"); err != nil {
		t.Fatal(err)
	}
	nextState(t, ch, gate.Ready, 3*time.Second)
}

// TestAcquireWaitRefusedSubscriptionWarnsOnce: Redis refuses the
// subscription (a user without channel permission). The wait polls and
// sees the settle, the gate warns once, and it does not try to subscribe
// again for a while: later waits poll at once, without a new refusal or
// warning.
func TestAcquireWaitRefusedSubscriptionWarnsOnce(t *testing.T) {
	reads := countSubscribed(t)
	prefix := "aclrefused"
	// docs/operating.md's pub/sub commands without its channel rule
	// (&<prefix>:*): every SUBSCRIBE (and PUBLISH, which the settle
	// scripts pcall) is refused with NOPERM; UNSUBSCRIBE is not.
	s := redistest.ACLServer(t, prefix, append([]string{"+unsubscribe", "+sunsubscribe", "+ping"}, redistest.ACLPubSub...))
	rec := newRecorder()
	owner := newGate(t, s.Client(t), gate.Options{Prefix: prefix, Lease: longLease, Retention: gate.Retention{Done: time.Minute}})
	waiter := newGate(t, s.Client(t), gate.Options{Prefix: prefix, Lease: longLease, Observer: rec})
	ctx := context.Background()
	for i, job := range []string{"a", "b"} {
		l, err := owner.Acquire(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		spawn(t, func(ctx context.Context) {
			_, err := waiter.AcquireWait(ctx, job, 20*time.Second)
			done <- err
		})
		// Half a second of polling: 0, 10, 30, 70, 150, 310 ms...
		waitUntil(t, 5*time.Second, "waiter polled", func() bool { return reads(job) >= 5 })
		if err := l.Succeed(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, gate.ErrDone) {
				t.Fatalf("wait %d: %v, want ErrDone", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("wait %d not answered by polling", i)
		}
		if n := pollWarnings(rec.drain()); n != 1-i {
			t.Fatalf("wait %d: %d WarnWaitPolling warnings, want %d (one for the refusal, none while the gate polls)", i, n, 1-i)
		}
	}
}

// TestAcquireWaitPushedWithoutUnsubscribe: a user that may subscribe but
// not unsubscribe (nor PING) still has its waits pushed, wait after wait:
// the refused UNSUBSCRIBE of a finished wait is no subscription refused.
func TestAcquireWaitPushedWithoutUnsubscribe(t *testing.T) {
	reads := countSubscribed(t)
	prefix := "aclnounsub"
	s := redistest.ACLServer(t, prefix, append([]string{"&" + prefix + ":*"}, redistest.ACLPubSub...))
	rec := newRecorder()
	owner := newGate(t, s.Client(t), gate.Options{Prefix: prefix, Lease: longLease, Retention: gate.Retention{Done: time.Minute}})
	waiter := newGate(t, s.Client(t), gate.Options{Prefix: prefix, Lease: longLease, Observer: rec})
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if err := owner.Reset(ctx, "job"); err != nil {
			t.Fatal(err)
		}
		l, err := owner.Acquire(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		if n := waitPushed(t, waiter, l, "job", reads); n != 2 {
			t.Fatalf("wait %d: %d reads, want 2 (pushed)", i, n)
		}
		// The finished wait's UNSUBSCRIBE is refused meanwhile.
		time.Sleep(50 * time.Millisecond)
	}
	for _, e := range rec.drain() {
		if e.Kind == gate.EventWarning {
			t.Fatalf("warning %s: %v", e.Reason, e.Err)
		}
	}
}

// TestWatchStateReadInItsLastMillisecond: a watcher may read a cooldown
// in its last millisecond (here woken then by a bare message on the job's
// channel; in use by an upstream change, a local settle or a resubscription).
// It must still report the cooldown's end, which publishes nothing.
// (miniredis: its clock stands still between Advances, so the read lands
// in the last millisecond for sure.)
func TestWatchStateReadInItsLastMillisecond(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	// Stop miniredis's clock before the cooldown is written: left running,
	// the time a loaded machine takes between the watcher's read and the
	// Advance below can exceed the cooldown's last 1.5 ms.
	redistest.Advance(m, 0)
	prefix := redistest.UniqueKey(t)
	opts := gate.Options{Prefix: prefix, Cooldown: 100 * time.Millisecond, Backoff: gate.Backoff{Jitter: -1}, UpstreamPolicy: gate.UpstreamPolicy{Off: true}}
	var rt answered
	counted := redis.NewClient(&redis.Options{Addr: m.Addr()})
	counted.AddHook(&rt)
	t.Cleanup(func() { _ = counted.Close() })
	g := newGate(t, counted, opts)
	other := newGate(t, rdb, opts)
	ch := watching(t, g, "job")
	ctx := context.Background()
	nextState(t, ch, gate.Ready, time.Second)
	if err := failWith(t, other, "job", errBoom); !errors.Is(err, gate.ErrCoolingDown) {
		t.Fatal(err)
	}
	st := nextState(t, ch, gate.CoolingDown, 2*time.Second)
	redistest.Advance(m, st.RetryAfter-1500*time.Microsecond)
	lock := keyspace.Job(prefix, "job")
	if st := mustStatus(t, other, "job"); st.State != gate.CoolingDown || st.RetryAfter > 2*time.Millisecond {
		t.Fatalf("status %+v, want cooling in its last milliseconds", st)
	}
	read := rt.n.Load()
	if err := rdb.Publish(ctx, lock, "wake").Err(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the watcher read the cooldown with no time left", func() bool { return rt.n.Load() > read })
	redistest.Advance(m, 2*time.Millisecond)
	if st := nextState(t, ch, gate.Ready, 3*time.Second); st.Attempts != 1 {
		t.Fatalf("after the cooldown: %+v", st)
	}
}

// spin runs for ARGV[1] microseconds: Redis answers BUSY meanwhile.
const spinScript = `local s = redis.call('TIME')
local start = s[1] * 1000000 + s[2]
while true do
  local n = redis.call('TIME')
  if n[1] * 1000000 + n[2] - start > tonumber(ARGV[1]) then return 1 end
end`

// TestAcquireWaitSubscribeWhileRedisIsBusy: Redis answers BUSY (a long
// script) to the waiter's SUBSCRIBE. That is no refusal: the waiter polls
// meanwhile, with a warning, subscribes again once Redis answers, and the
// settle then wakes it.
func TestAcquireWaitSubscribeWhileRedisIsBusy(t *testing.T) {
	srv := redistest.Server(t, redistest.WithArgs("--busy-reply-threshold", "20"))
	admin, probe := srv.Client(t), srv.Client(t)
	prefix := redistest.UniqueKey(t)
	rec := newRecorder()
	owner := newGate(t, srv.Client(t), gate.Options{Prefix: prefix, Lease: longLease, Retention: gate.Retention{Done: time.Minute}})
	waiter := newGate(t, srv.Client(t), gate.Options{Prefix: prefix, Lease: longLease, Observer: rec})
	ctx := context.Background()
	l, err := owner.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	busy := make(chan error, 1)
	var once sync.Once
	t.Cleanup(setWaitHooks(func(string) {
		once.Do(func() {
			// Busy for 1.5 s: a loaded machine may not schedule the probe
			// below within a shorter window (a CI run at a load of 17
			// missed a 300 ms one).
			go func() { busy <- admin.Eval(ctx, spinScript, nil, 1500000).Err() }()
			waitUntil(t, 5*time.Second, "Redis busy", func() bool {
				err := probe.Ping(ctx).Err()
				return err != nil && strings.HasPrefix(err.Error(), "BUSY")
			})
		})
	}, nil))
	done := make(chan error, 1)
	spawn(t, func(ctx context.Context) {
		_, err := waiter.AcquireWait(ctx, "job", 20*time.Second)
		done <- err
	})
	if err := <-busy; err != nil {
		t.Fatalf("spin: %v", err)
	}
	lock := keyspace.Job(prefix, "job")
	waitUntil(t, 5*time.Second, "subscribed again once Redis answers", func() bool { return probe.PubSubNumSub(ctx, lock).Val()[lock] == 1 })
	if err := l.Succeed(ctx); err != nil {
		t.Fatal(err)
	}
	wantDone(t, done, 5*time.Second)
	// Each poll step's subscription was refused; one warning says so.
	if n := pollWarnings(rec.drain()); n != 1 {
		t.Fatalf("%d WarnWaitPolling warnings while Redis refused the subscription, want 1", n)
	}
}

// TestAcquireWaitReadsOnceWhenTheLeaseEnds: a lease that expires without a
// settle publishes nothing; the waiter reads again once the time left it
// read has passed, not before: two reads in all (after subscribing, at
// the lease's end), and it runs the job. Real servers only: miniredis's
// clock stands still between Advances.
func TestAcquireWaitReadsOnceWhenTheLeaseEnds(t *testing.T) {
	reads := countSubscribed(t)
	for _, tg := range redistest.RealTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			// Long enough that a loaded machine cannot let it pass before
			// the waiter's first read (a job found free is no wait).
			const lease = time.Second
			dead := &flaky{Client: tg.Client}
			g1 := newGate(t, dead, gate.Options{Prefix: prefix, Lease: lease})
			g2 := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: lease})
			ctx := context.Background()
			job := tg.Name + "-lost"
			if _, err := g1.Acquire(ctx, job); err != nil {
				t.Fatal(err)
			}
			dead.Down.Store(true) // its owner neither renews nor settles
			l, err := g2.AcquireWait(ctx, job, 10*time.Second)
			if err != nil {
				t.Fatalf("AcquireWait: %v, want the job once the lease expired", err)
			}
			defer l.Release(ctx)
			if n := reads(job); n != 2 {
				t.Fatalf("%d reads, want 2: after subscribing, and once the lease's time left had passed", n)
			}
		})
	}
}

// TestWatchReadsOnceWhenTheCooldownEnds: a watcher reads again when the
// cooldown it read has ended, not before: one read between the cooldown
// and the ready status. With an upstream too: the status then holds the
// upstream's wait, 0 while it is ready, which must not hide the job's.
// Real servers only (miniredis's clock stands still).
func TestWatchReadsOnceWhenTheCooldownEnds(t *testing.T) {
	for _, tg := range redistest.RealTargets(t) {
		for _, upstream := range []string{"", "up"} {
			t.Run(tg.Name+"/upstream="+upstream, func(t *testing.T) {
				prefix := redistest.UniqueKey(t)
				opts := gate.Options{Prefix: prefix, Upstream: upstream, Cooldown: watchedCooldown(tg), Backoff: gate.Backoff{Jitter: -1},
					UpstreamPolicy: gate.UpstreamPolicy{Off: upstream == ""}}
				var rt roundTrips
				g := newGate(t, ownClient(t, tg, &rt, nil), opts)
				other := newGate(t, tg.Client, opts)
				ch := watching(t, g, "job")
				nextState(t, ch, gate.Ready, 10*time.Second)
				if err := failWith(t, other, "job", errBoom); !errors.Is(err, gate.ErrCoolingDown) {
					t.Fatal(err)
				}
				nextState(t, ch, gate.CoolingDown, 10*time.Second)
				start := rt.n.Load()
				nextState(t, ch, gate.Ready, opts.Cooldown+10*time.Second)
				if n := rt.n.Load() - start; n != 1 {
					t.Fatalf("%d reads from the cooldown to its end, want 1", n)
				}
			})
		}
	}
}

// TestWatchPollingQuietWithAnUpstream: a polling watcher of a job on a gate
// with an upstream sends nothing while neither the job nor the upstream
// changes (an upstream read the same way twice is no change).
func TestWatchPollingQuietWithAnUpstream(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, &flaky{Client: rdb}, gate.Options{Prefix: redistest.UniqueKey(t), Upstream: "up"})
	ch := watching(t, g, "job")
	if st := <-ch; st.State != gate.Ready || len(st.Upstreams) != 1 {
		t.Fatalf("first status %+v, want ready with one upstream", st)
	}
	noStatus(t, ch, 300*time.Millisecond, "polling an unchanged job and upstream")
}

func TestWaitReplicas(t *testing.T) {
	primary := redistest.Server(t)
	replica := redistest.Server(t, redistest.WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(primary.Port())))
	rdb := primary.Client(t)
	ctx := context.Background()
	waitReplicaOnline(t, rdb, replica)

	t.Run("acknowledged", func(t *testing.T) {
		// WAIT returns as soon as the replica acknowledges, so a long
		// WaitTimeout costs nothing here; a short one (it was 1 s) failed
		// the acquire whenever load kept the replica from answering in time.
		g := newGate(t, rdb, gate.Options{Redis: gate.RedisPolicy{WaitReplicas: 1, WaitTimeout: 30 * time.Second}})
		var lock string
		err := g.Do(ctx, "job", func(ctx context.Context, l *gate.Lease) error {
			lock = keyspace.Job(gatetest.Prefix(g), "job")
			// The replica has the lock before fn starts.
			if v := replica.Client(t).Get(ctx, lock).Val(); v == "" {
				t.Error("lock not on the replica when fn started")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("not enough replicas fails closed", func(t *testing.T) {
		const wait = 50 * time.Millisecond
		g := newGate(t, rdb, gate.Options{Redis: gate.RedisPolicy{WaitReplicas: 2, WaitTimeout: wait}})
		ran := false
		start := time.Now()
		err := g.Do(ctx, "job", func(context.Context, *gate.Lease) error { ran = true; return nil })
		if !errors.Is(err, gate.ErrUnavailable) || ran {
			t.Fatalf("Do: %v (ran %v), want ErrUnavailable", err, ran)
		}
		if took := time.Since(start); took < wait || took > wait+time.Second {
			t.Fatalf("took %v, want about WaitTimeout", took)
		}
		// The acquire was undone: the job is free, not held for a lease.
		if exp, got := gate.Ready, mustStatus(t, g, "job").State; exp != got {
			t.Fatalf("state after a refused acquire: exp %v, got %v", exp, got)
		}
	})
	t.Run("needs a client WAIT can pin", func(t *testing.T) {
		_, err := gate.New(&flaky{Client: rdb}, gate.Options{Redis: gate.RedisPolicy{WaitReplicas: 1}})
		if !errors.Is(err, gate.ErrInvalidOptions) {
			t.Fatalf("New with a wrapper: %v", err)
		}
	})
}

// waitReplicaOnline waits until the primary counts the replica online
// (the replica's own "link up" comes first; WAIT counts the primary's view).
func waitReplicaOnline(t testing.TB, rdb *redis.Client, replica *redistest.Srv) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info := rdb.Info(ctx, "replication").Val()
		if strings.Contains(info, "state=online") && rdb.Wait(ctx, 1, 100*time.Millisecond).Val() >= 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s not online at the primary:\n%s", replica.Addr(), info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func BenchmarkWaitReplicas(b *testing.B) {
	primary := redistest.Server(b)
	replica := redistest.Server(b, redistest.WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(primary.Port())))
	ctx := context.Background()
	rdb := primary.Client(b)
	waitReplicaOnline(b, rdb, replica)
	ok := func(context.Context, *gate.Lease) error { return nil }
	for _, n := range []int{0, 1} {
		b.Run("replicas="+strconv.Itoa(n), func(b *testing.B) {
			g, _ := gate.New(rdb, gate.Options{Prefix: "bw" + strconv.Itoa(n), Redis: gate.RedisPolicy{WaitReplicas: n, WaitTimeout: time.Second}})
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := g.Do(ctx, "job", ok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A wait that ends before the running lease does answers at its
// deadline with ErrInFlight, without one more read then: only the run's
// settle could tell more, and its message wakes the wait.
func TestAcquireWaitEndsAtTheDeadlineWithoutAnotherRead(t *testing.T) {
	reads := countSubscribed(t)
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			_, g2 := runningElsewhere(t, tg.Client, gate.Options{})
			before := reads("job")
			_, err := g2.AcquireWait(context.Background(), "job", 300*time.Millisecond)
			var b *gate.BlockedError
			if !errors.Is(err, gate.ErrInFlight) || !errors.As(err, &b) || b.RetryAfter <= 0 {
				t.Fatalf("AcquireWait: %v, want ErrInFlight with a wait", err)
			}
			if exp, got := int64(1), reads("job")-before; exp != got {
				t.Fatalf("reads after the subscription: exp %d (the first), got %d", exp, got)
			}
		})
	}
}

// A waiter whose read, when the running lease ended, Redis answers only
// after its deadline is answered at the deadline (ErrInFlight); the job
// that read took afterwards is given back, not held for a lease by
// nobody.
func TestAcquireWaitGivesBackWhatItTookPastTheDeadline(t *testing.T) {
	for _, tg := range redistest.RealTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			dead := &flaky{Client: tg.Client}
			holder := newGate(t, dead, gate.Options{Prefix: prefix, Lease: 300 * time.Millisecond})
			slow := tg.OwnClient(t)
			key := keyspace.Job(prefix, "job")
			var armed atomic.Bool
			h := stallOn(t, slow, func(args []any) bool {
				if !armed.Load() || strings.Contains(strings.ToLower(fmt.Sprint(args[0])), "subscribe") {
					return false
				}
				for _, a := range args {
					if a == key {
						return true
					}
				}
				return false
			})
			waiter := newGate(t, slow, gate.Options{Prefix: prefix, Lease: longLease})
			knownUpstream(t, waiter) // the job's next run: not one at a time
			ctx := context.Background()
			if _, err := holder.Acquire(ctx, "job"); err != nil {
				t.Fatal(err)
			}
			dead.Down.Store(true)
			t.Cleanup(setWaitHooks(func(string) { armed.Store(true) }, nil))
			const wait = time.Second
			start := time.Now()
			_, err := waiter.AcquireWait(ctx, "job", wait)
			past := time.Since(start) - wait
			if h.stalled.Load() == 0 {
				t.Fatalf("no read was stalled: the test proves nothing (%v)", err)
			}
			if !errors.Is(err, gate.ErrInFlight) {
				t.Fatalf("AcquireWait: %v, want ErrInFlight at the deadline", err)
			}
			if past > 2*time.Second { // far from the 10 s it was stalled
				t.Fatalf("answered %v after the deadline, want at it", past)
			}
			h.free()
			waitUntil(t, 10*time.Second, "the stalled read answered", func() bool { return h.sent.Load() > 0 })
			waitUntil(t, 10*time.Second, "the job given back", func() bool {
				st, err := waiter.Status(ctx, "job")
				return err == nil && st.State != gate.Running
			})
		})
	}
}
