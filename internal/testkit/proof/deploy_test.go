package proof_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// The deployments of docs/operating.md, each started on loopback by a
// redistest helper: Sentinel, an ACL user with exactly the documented
// rules, TLS with client certificates, a full noeviction Redis, and a
// slot migrating under load.

// Sentinel: through a failover client the gate works again shortly after
// SENTINEL FAILOVER, its fences keep increasing, and Check names the real
// master behind the client, not "FailoverClient".
func TestSentinelFailover(t *testing.T) {
	set := redistest.Sentinel(t)
	rdb := set.Client(t)
	g := newGate(t, rdb, gate.Options{Lease: time.Second})
	ctx := context.Background()

	warns, err := g.Check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	master := set.MasterAddr(t)
	for _, w := range warns {
		if w.Addr != master {
			t.Fatalf("Check warns about %q, want the master %s", w.Addr, master)
		}
	}
	// The test servers run noeviction and persist nothing: give both an
	// evicting policy and a save schedule, so Check has one warning whose
	// address we can read.
	for _, addr := range set.DataAddrs() {
		c := redis.NewClient(&redis.Options{Addr: addr})
		err := c.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err()
		if err == nil {
			err = c.ConfigSet(ctx, "save", "3600 1").Err()
		}
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if warns, err = g.Check(ctx); err != nil || len(warns) != 1 || warns[0].Addr != master {
		t.Fatalf("Check: %+v %v, want one warning naming %s", warns, err, master)
	}

	var last int64
	lease := func() (int64, error) {
		var fence int64
		err := g.Do(ctx, "doc", func(_ context.Context, l *gate.Lease) error { fence = l.Fence(); return nil })
		return fence, err
	}
	if last, err = lease(); err != nil {
		t.Fatal(err)
	}
	newMaster := set.Failover(t)
	if newMaster == master {
		t.Fatalf("failover kept %s", master)
	}
	start := time.Now()
	deadline := start.Add(15 * time.Second)
	for {
		f, err := lease()
		if err == nil {
			if f <= last {
				t.Fatalf("fence %d after the failover, not above %d", f, last)
			}
			break
		}
		if !errors.Is(err, gate.ErrUnavailable) && !errors.Is(err, gate.ErrRedisRefused) {
			t.Fatalf("during the failover: %v, want a Redis error", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("gate still failing %v after the failover: %v", time.Since(start), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("gate worked again %v after SENTINEL FAILOVER returned", time.Since(start).Round(time.Millisecond))
	warns, err = g.Check(ctx)
	if err != nil || len(warns) != 1 || warns[0].Addr != newMaster {
		t.Fatalf("Check after the failover: %+v %v, want a warning naming the new master %s", warns, err, newMaster)
	}
}

// An ACL user with exactly the documented rules can do everything the
// gate does: acquire, succeed, fail into a cooldown, be refused (script
// and GET), read status, reset, and with the upstream rules cool, probe and
// reset an upstream and count a permanent wave. Without the upstream rules, a
// gate with an Upstream fails closed with ErrRedisRefused.
func TestACLMinimalRules(t *testing.T) {
	const prefix = "aclgate"
	ctx := context.Background()
	upstream := func(hint time.Duration) classify.Func {
		return func(err error) classify.Verdict {
			if errors.Is(err, errPermanent) {
				return classify.Verdict{Class: classify.ClassPermanent, Reason: "bad_request"}
			}
			return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonRateLimited, ProviderWide: true, RetryAfter: hint}
		}
	}
	t.Run("with upstream rules", func(t *testing.T) {
		s := redistest.ACLServer(t, prefix, redistest.ACLUpstream)
		g := newGate(t, s.Client(t), gate.Options{Prefix: prefix, Upstream: "openai", Cooldown: time.Minute,
			Classify: upstream(100 * time.Millisecond), UpstreamPolicy: gate.UpstreamPolicy{PermanentWave: 2}})
		if err := g.Do(ctx, "a", func(context.Context, *gate.Lease) error { return nil }); err != nil {
			t.Fatalf("success: %v", err)
		}
		if err := g.Do(ctx, "a", func(context.Context, *gate.Lease) error { return errTransient }); !errors.Is(err, gate.ErrCoolingDown) {
			t.Fatalf("rate limit: %v", err)
		}
		if err := g.Do(ctx, "b", func(context.Context, *gate.Lease) error { return nil }); !errors.Is(err, gate.ErrUpstreamCooling) {
			t.Fatalf("upstream: %v", err)
		}
		if _, err := g.Status(ctx, "a"); err != nil {
			t.Fatalf("status: %v", err)
		}
		eventuallyRuns(t, g, "b") // the probe after the upstream's 100 ms
		if err := g.Reset(ctx, "a"); err != nil {
			t.Fatalf("reset: %v", err)
		}
		for _, job := range []string{"p1", "p2", "p3"} {
			_ = g.Do(ctx, job, func(context.Context, *gate.Lease) error { return errPermanent })
		}
		if ups, err := g.Upstreams(ctx); err != nil || ups[0].State != gate.Paused {
			t.Fatalf("after a wave: %+v %v, want paused", ups, err)
		}
		if err := g.ResetUpstreams(ctx); err != nil {
			t.Fatalf("upstream reset: %v", err)
		}
	})
	t.Run("without upstream rules", func(t *testing.T) {
		s := redistest.ACLServer(t, prefix, nil)
		g := newGate(t, s.Client(t), gate.Options{Prefix: prefix, Cooldown: time.Minute})
		if err := g.Do(ctx, "a", func(context.Context, *gate.Lease) error { return errTransient }); !errors.Is(err, gate.ErrCoolingDown) {
			t.Fatalf("no upstream, no upstream rules needed: %v", err)
		}
		// A 5xx counts in the upstream's failure window (ZADD): the job's
		// own cooldown is written, the count is refused, loudly; so is the
		// budget's admission in each acquire (HMGET), which then judges
		// nothing: the breaker alone admits.
		var refused atomic.Int64
		upstreamd := newGate(t, s.Client(t), gate.Options{Prefix: prefix, Upstream: "openai",
			Observer: observerFunc(func(e gate.Event) {
				if e.Kind == gate.EventRedisError && e.Op == "upstream" && errors.Is(e.Err, gate.ErrRedisRefused) {
					refused.Add(1)
				}
			}),
			Classify: func(error) classify.Verdict {
				return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonUpstream5xx}
			},
			Redis: gate.RedisPolicy{FailOpen: true}})
		err := upstreamd.Do(ctx, "c", func(context.Context, *gate.Lease) error { return errTransient })
		var ce *gate.CallError
		if !errors.As(err, &ce) || ce.SettleErr != nil || ce.State != gate.CoolingDown {
			t.Fatalf("a 5xx with an Upstream but without its ACL rules: %v, want the job cooling", err)
		}
		if refused.Load() != 2 {
			t.Fatalf("%d refused upstream commands reported, want 2 (the acquire's admission, the 5xx's count: redis_error events with cause refused)", refused.Load())
		}
		if err := upstreamd.Do(ctx, "c", func(context.Context, *gate.Lease) error { return nil }); !errors.Is(err, gate.ErrCoolingDown) {
			t.Fatalf("retry: %v, want ErrCoolingDown", err)
		}
	})
}

// eventuallyRuns retries job until a call runs.
func eventuallyRuns(t *testing.T, g *gate.Gate, job string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := g.Do(context.Background(), job, func(context.Context, *gate.Lease) error { return nil })
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never ran: %v", job, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TLS with a private CA and client certificates: the gate works through a
// client configured with them (the CLI's --tls-* flags build the same).
func TestTLSClientCertificates(t *testing.T) {
	s := redistest.TLSServer(t)
	g := newGate(t, s.Client(t), gate.Options{})
	if err := g.Do(context.Background(), "a", func(context.Context, *gate.Lease) error { return nil }); err != nil {
		t.Fatal(err)
	}
	plain := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	t.Cleanup(func() { _ = plain.Close() })
	err := newGate(t, plain, gate.Options{}).Do(context.Background(), "a", func(context.Context, *gate.Lease) error { return nil })
	if !errors.Is(err, gate.ErrUnavailable) {
		t.Fatalf("a plain client at the TLS port: %v, want ErrUnavailable", err)
	}
}

// A full noeviction Redis: new jobs fail closed with ErrRedisRefused (not
// ungated, even with FailOpen), a job whose own state refuses the call is
// still told so, reads still work, and the refused acquires write
// nothing; whatever the upstream's budget knows (nothing yet, or a reading
// its provider sent) and whether the caller holds a turn its line gave
// it: an acquire writes nothing before it takes the job, or Redis would
// let the take past maxmemory (a script that wrote once may write past
// it). On one node (one script) and in the cluster form (a client with
// gate.Client's methods only: the job's commands, then the upstream's).
func TestFullRedisFailsClosed(t *testing.T) {
	reading := func(l *gate.Lease, left, limit int64, reset time.Duration) {
		now := time.Now()
		l.ObserveBudget(classify.Budget{At: now,
			Requests: classify.Quota{Reported: true, Remaining: left, Limit: limit, Reset: now.Add(reset)}})
	}
	for _, form := range []string{"one node", "cluster form"} {
		for _, tc := range []struct {
			name string
			warm func(*gate.Lease) // a call that ran before, and what it saw
			turn bool              // the call under test holds a turn in its upstream's line
		}{
			{"no reading", nil, false},
			{"a reading", func(l *gate.Lease) { reading(l, 99, 100, time.Minute) }, false},
			// Two left, one kept in reserve: one call fits; the next
			// waits in line (the next request refills in five minutes),
			// and the first's settle gives it its turn.
			{"a turn in line", func(l *gate.Lease) { reading(l, 2, 3, 5*time.Minute) }, true},
		} {
			t.Run(form+"/"+tc.name, func(t *testing.T) {
				s := redistest.FullServer(t)
				ctx := context.Background()
				rdb := s.Client(t)
				armed, settled := make(chan struct{}), make(chan struct{})
				var changes atomic.Int64 // Redis's write count once full, -1 before
				changes.Store(-1)
				prefix := redistest.UniqueKey(t)
				lock := keyspace.Job(prefix, "a")
				// The acquire of "a" once armed meets a full Redis: the
				// call before it settled, and its turn, if any, given.
				rdb.AddHook(fullBefore{match: func(args []any) bool {
					select {
					case <-armed:
					default:
						return false
					}
					for _, a := range args {
						if a == lock {
							return true
						}
					}
					return false
				}, fill: func() {
					if changes.Load() >= 0 {
						return
					}
					<-settled
					s.Fill(t)
					changes.Store(writes(t, s))
				}})
				var c gate.Client = rdb
				if form == "cluster form" {
					c = &gatetest.Flaky{Client: rdb}
				}
				opts := gate.Options{Prefix: prefix, Lease: time.Minute, Cooldown: time.Hour, Redis: gate.RedisPolicy{FailOpen: true}}
				g := newGate(t, c, opts)
				other := newGate(t, s.Client(t), opts) // another process
				// A job whose own state refuses the call: cooling down.
				if err := other.Do(ctx, "cool", func(context.Context, *gate.Lease) error { return errTransient }); !errors.Is(err, gate.ErrCoolingDown) {
					t.Fatalf("a transient failure: %v, want the job cooling", err)
				}
				var first *gate.Lease
				if tc.warm != nil {
					// A call that ran and left a reading.
					if err := other.Do(ctx, "warm", func(_ context.Context, l *gate.Lease) error { tc.warm(l); return nil }); err != nil {
						t.Fatalf("warm-up: %v", err)
					}
				}
				var got <-chan gatetest.Acquired
				if tc.turn {
					var err error
					if first, err = other.Acquire(ctx, "first"); err != nil {
						t.Fatalf("the one call the budget has room for: %v", err)
					}
					got = gatetest.AcquireWait(ctx, g, "a", 10*time.Minute)
					gatetest.InLine(t, other, "a")
				}
				if _, err := g.Status(ctx, "a"); err != nil {
					t.Fatalf("status before: %v", err)
				}
				close(armed)
				if first != nil {
					if err := first.Succeed(ctx); err != nil { // gives "a" its turn
						t.Fatal(err)
					}
				}
				close(settled)
				var err error
				if got != nil {
					r := <-got
					if r.Lease != nil {
						t.Error("the caller in line was given a lease while Redis refuses writes")
					}
					err = r.Err
				} else {
					err = g.Do(ctx, "a", func(context.Context, *gate.Lease) error {
						t.Error("fn ran while Redis refuses writes")
						return nil
					})
				}
				if !errors.Is(err, gate.ErrRedisRefused) || !redistest.IsOOM(err) {
					t.Fatalf("acquire on a full Redis: %v, want ErrRedisRefused wrapping OOM", err)
				}
				if err := g.Do(ctx, "cool", func(context.Context, *gate.Lease) error {
					t.Error("fn ran for a job cooling down")
					return nil
				}); !errors.Is(err, gate.ErrCoolingDown) {
					t.Fatalf("a job cooling down, on a full Redis: %v, want ErrCoolingDown", err)
				}
				if _, err := g.Status(ctx, "a"); err != nil {
					t.Fatalf("status on a full Redis: %v", err)
				}
				if n := changes.Load(); n < 0 {
					t.Fatal("the acquire was never seen (the test no longer fills Redis before it)")
				} else if now := writes(t, s); now != n {
					t.Fatalf("Redis counted %d writes while full, want none: the refused acquires wrote", now-n)
				}
			})
		}
	}
}

// writes is how many writes Redis counted since its last save (it saves
// nothing here): INFO's rdb_changes_since_last_save.
func writes(t *testing.T, s *redistest.FullSrv) int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	info, err := c.Info(context.Background(), "persistence").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "rdb_changes_since_last_save:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no rdb_changes_since_last_save in INFO persistence: %q", info)
	return 0
}

// fullBefore is a go-redis hook that runs fill before the first command
// (or pipeline holding one) whose arguments match.
type fullBefore struct {
	match func(args []any) bool
	fill  func()
}

func (f fullBefore) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f fullBefore) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.match(cmd.Args()) {
			f.fill()
		}
		return next(ctx, cmd)
	}
}

func (f fullBefore) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if f.match(c.Args()) {
				f.fill()
				break
			}
		}
		return next(ctx, cmds)
	}
}

// A slot migrating under load (redis-cli --cluster reshard's steps, slow):
// calls on jobs of the moving slot never overlap and fail closed at worst;
// a cooldown moved with the slot keeps its time left; WaitReplicas follows
// the slot to its new master at once.
func TestSlotMigrationUnderLoad(t *testing.T) {
	cl := redistest.Cluster(t, 3, 1)
	rdb := cl.Client(t)
	prefix := redistest.UniqueKey(t)
	g := newGate(t, rdb, gate.Options{Prefix: prefix, Cooldown: time.Hour, Lease: time.Second, Backoff: gate.Backoff{Jitter: -1}})
	// WaitReplicas pins a connection to the slot's master: on a client of
	// its own, which learns its slot map before the migration and sees no
	// traffic during it.
	waiting := newGate(t, cl.Client(t), gate.Options{Prefix: prefix, Redis: gate.RedisPolicy{WaitReplicas: 1, WaitTimeout: time.Second}})
	ctx := context.Background()
	const job = "moving"
	lock := prefix + ":{" + job + "}:lock"
	if err := waiting.Do(ctx, job, func(context.Context, *gate.Lease) error { return nil }); err != nil {
		t.Fatalf("WaitReplicas before the migration: %v", err)
	}

	if err := g.Do(ctx, "cool", func(context.Context, *gate.Lease) error { return errTransient }); !errors.Is(err, gate.ErrCoolingDown) {
		t.Fatal(err)
	}
	// Load: workers hammer the job while its slot moves.
	var (
		running, overlaps atomic.Int64
		other             sync.Map
		stop              = make(chan struct{})
		wg                sync.WaitGroup
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := g.Do(ctx, job, func(context.Context, *gate.Lease) error {
					if running.Add(1) > 1 {
						overlaps.Add(1)
					}
					time.Sleep(2 * time.Millisecond)
					running.Add(-1)
					return nil
				})
				if err != nil && !errors.Is(err, gate.ErrInFlight) {
					msg := err.Error()
					if i := strings.Index(msg, ": "); i > 0 {
						msg = msg[:i]
					}
					other.Store(msg, err)
				}
			}
		}()
	}
	m := cl.StartMigration(t, lock)
	time.Sleep(50 * time.Millisecond)
	m.MoveKeys(t, 1)
	time.Sleep(50 * time.Millisecond)
	m.Finish(t)
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping calls while the slot moved", n)
	}
	other.Range(func(k, v any) bool {
		if err := v.(error); !errors.Is(err, gate.ErrUnavailable) {
			t.Errorf("during the migration: %v, want at worst ErrUnavailable (fail closed)", err)
		}
		return true
	})
	// WaitReplicas on the moved slot works at once: the pinned connection
	// follows the MOVED to the new master.
	if err := waiting.Do(ctx, job, func(context.Context, *gate.Lease) error { return nil }); err != nil {
		t.Fatalf("WaitReplicas after the slot moved: %v", err)
	}
	// A cooldown moved with its slot keeps its time left.
	coolLock := prefix + ":{cool}:lock"
	cl.MigrateSlot(t, coolLock, 0)
	st, err := g.Status(ctx, "cool")
	if err != nil || st.State != gate.CoolingDown || st.RetryAfter < time.Hour-time.Minute {
		t.Fatalf("cooldown after its slot moved: %+v %v", st, err)
	}
}

// WaitReplicas under Sentinel: before a failover every acquire waits for
// the replica; right after it the new master has no replica until the old
// one is demoted and resynchronised, so acquires fail closed
// (ErrUnavailable) meanwhile; if the old master is gone for good they fail
// closed until a replica is added, while a gate without WaitReplicas works.
func TestWaitReplicasAcrossSentinelFailover(t *testing.T) {
	set := redistest.Sentinel(t)
	rdb := set.Client(t)
	waiting := newGate(t, rdb, gate.Options{Redis: gate.RedisPolicy{WaitReplicas: 1, WaitTimeout: 200 * time.Millisecond}})
	plain := newGate(t, rdb, gate.Options{})
	ctx := context.Background()
	ok := func(context.Context, *gate.Lease) error { return nil }
	eventually(t, 10*time.Second, "the replica acknowledges", func() bool { return waiting.Do(ctx, "a", ok) == nil })

	old := set.MasterAddr(t)
	set.Failover(t)
	set.Server(old).Kill() // the old master never comes back as a replica
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		err := waiting.Do(ctx, "a", func(context.Context, *gate.Lease) error {
			t.Error("fn ran without a replica acknowledging the lock")
			return nil
		})
		if !errors.Is(err, gate.ErrUnavailable) {
			t.Fatalf("WaitReplicas with no replica left: %v, want ErrUnavailable", err)
		}
	}
	eventually(t, 10*time.Second, "the gate without WaitReplicas works", func() bool { return plain.Do(ctx, "b", ok) == nil })
}

// observerFunc adapts a function to gate.Observer.
type observerFunc func(gate.Event)

func (f observerFunc) Observe(_ context.Context, e gate.Event) { f(e) }
