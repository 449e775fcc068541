package gate_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A success whose lease ended in Redis before its settle came (a Redis
// paused past the lease) is not paid for twice. Here the job's key holds,
// when the settle comes, a running value of another token: what an
// acquire leaves that Redis served after its caller gave up (sent into
// the pause, run on resume). The run that succeeded holds the job done
// in-process and does not give up its write to that value: once it is
// gone (given back, or its lease ended) the done mark is written, and
// another process is refused too.
func TestSuccessAfterItsLeaseEndedIsHeldAndWritten(t *testing.T) {
	for name, start := range pausedTargets {
		t.Run(name, func(t *testing.T) {
			addr := start(t)
			ctx := context.Background()
			direct := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { _ = direct.Close() })
			var marks doneMarks
			own := redis.NewClient(&redis.Options{Addr: addr})
			own.AddHook(&marks)
			t.Cleanup(func() { _ = own.Close() })
			opts := gate.Options{Lease: time.Minute, Retention: gate.Retention{Done: time.Hour}, Prefix: redistest.UniqueKey(t)}
			ran := newGate(t, own, opts)
			other := newGate(t, direct, opts)
			key := keyspace.Job(opts.Prefix, "job")

			err := ran.Do(ctx, "job", func(context.Context, *gate.Lease) error {
				return direct.Set(ctx, key, "r:0123456789abcdef0123456789abcdef", time.Minute).Err()
			})
			if !errors.Is(err, gate.ErrNotOwned) {
				t.Fatalf("Do: %v, want ErrNotOwned: the lease ended before the settle", err)
			}
			if b := blocked(t, ran, "job"); !errors.Is(b, gate.ErrDone) {
				t.Fatalf("the same process, again: %v, want ErrDone", b)
			}
			// The write is tried again against the running value, and
			// kept for when it is gone.
			deadline := time.Now().Add(3 * time.Second)
			for marks.n.Load() < 3 {
				if time.Now().After(deadline) {
					t.Fatalf("%d writes of the done mark, want the settle's and two more", marks.n.Load())
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := direct.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			if b := blocked(t, ran, "job"); !errors.Is(b, gate.ErrDone) {
				t.Fatalf("the same process, the running value gone: %v, want ErrDone", b)
			}
			waitState(t, redistest.Target{}, other, "job", gate.Done, 3*time.Second)
			if b := blocked(t, other, "job"); !errors.Is(b, gate.ErrDone) {
				t.Fatalf("another process: %v, want ErrDone", b)
			}
		})
	}
}

// A run that renewed its lease is alive: a newer owner whose outcome
// rules. The success that finds it is not held in-process nor written
// over it once it is gone (a fencing store may have refused the older
// run's result in favour of the newer one's); only its token in the done
// key refuses the job, for a few seconds.
func TestSuccessAfterItsLeaseEndedLeavesARenewedRun(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	ctx := context.Background()
	opts := gate.Options{Lease: time.Minute, Retention: gate.Retention{Done: time.Hour}, Prefix: redistest.UniqueKey(t)}
	ran := newGate(t, rdb, opts)
	key := keyspace.Job(opts.Prefix, "job")
	err := ran.Do(ctx, "job", func(_ context.Context, l *gate.Lease) error {
		renewed := "r:0123456789abcdef0123456789abcdef:" + strconv.FormatInt(l.Fence()+1, 10) + ":0"
		return rdb.Set(ctx, key, renewed, time.Minute).Err()
	})
	if !errors.Is(err, gate.ErrNotOwned) {
		t.Fatalf("Do: %v, want ErrNotOwned", err)
	}
	if b := blocked(t, ran, "job"); b.State != gate.Running {
		t.Fatalf("the same process, again: %v, want the newer run's refusal (ErrInFlight)", b)
	}
	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	m.FastForward(10*time.Second + time.Millisecond) // store.SuccessMemory
	again := false
	if err := ran.Do(ctx, "job", func(context.Context, *gate.Lease) error { again = true; return nil }); err != nil || !again {
		t.Fatalf("the newer run gone: ran %v, %v; want the job run (Redis rules)", again, err)
	}
}

// An acquire that finds a job free while its done key holds a success's
// token (written beside the settle, which found the lease ended) refuses
// it as done: the run that succeeded has not written its done mark yet.
// A Reset forgets that success. The guarantee holds from a DoneTTL of
// 10 s (docs/guarantees.md), the least included.
func TestAcquireRefusesAFreeJobWhoseSuccessIsUnwritten(t *testing.T) {
	for name, start := range pausedTargets {
		t.Run(name, func(t *testing.T) {
			for _, doneTTL := range []time.Duration{10 * time.Second, time.Hour} {
				t.Run("DoneTTL="+doneTTL.String(), func(t *testing.T) {
					acquireRefusesAFreeJobWhoseSuccessIsUnwritten(t, start(t), doneTTL)
				})
			}
		})
	}
}

func acquireRefusesAFreeJobWhoseSuccessIsUnwritten(t *testing.T, addr string, doneTTL time.Duration) {
	ctx := context.Background()
	direct := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = direct.Close() })
	f := &gatetest.Flaky{Client: direct}
	opts := gate.Options{Lease: time.Minute, Retention: gate.Retention{Done: doneTTL}, Prefix: redistest.UniqueKey(t)}
	ran := newGate(t, f, opts)
	other := newGate(t, direct, opts)
	key := keyspace.Job(opts.Prefix, "job")

	_ = ran.Do(ctx, "job", func(context.Context, *gate.Lease) error {
		return direct.Set(ctx, key, "r:0123456789abcdef0123456789abcdef", time.Minute).Err()
	})
	// The run that succeeded cannot write again, and the running
	// value that refused its settle goes.
	f.Down.Store(true)
	if err := direct.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if b := blocked(t, other, "job"); !errors.Is(b, gate.ErrDone) {
		t.Fatalf("another process: %v, want ErrDone", b)
	}
	if n, err := direct.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Fatalf("the refused acquire left the job's key (%d, %v), want it given back", n, err)
	}
	if err := other.Reset(ctx, "job"); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	ran2 := false
	if err := other.Do(ctx, "job", func(context.Context, *gate.Lease) error { ran2 = true; return nil }); err != nil || !ran2 {
		t.Fatalf("after a Reset: ran %v, %v; want the job run", ran2, err)
	}
}

// pausedTargets start miniredis and a real redis-server (skipped where
// missing), and return its address.
var pausedTargets = map[string]func(t *testing.T) string{
	"miniredis": func(t *testing.T) string { m, _ := redistest.Miniredis(t); return m.Addr() },
	"redis":     func(t *testing.T) string { return redistest.Server(t).Addr() },
}

// doneMarks counts the writes of a done mark (Trip.MarkDone) sent.
type doneMarks struct{ n atomic.Int64 }

func (*doneMarks) DialHook(next redis.DialHook) redis.DialHook { return next }

func (d *doneMarks) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (d *doneMarks) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if args := c.Args(); len(args) > 1 && c.Name() == "set" {
				if k, ok := args[1].(string); ok && strings.HasSuffix(k, ":done") {
					d.n.Add(1)
				}
			}
		}
		return next(ctx, cmds)
	}
}

// While Redis does not answer (paused, or the network swallows what is
// sent), the done mark of an unwritten success is sent again as soon as a
// write times out, not after a backoff grown meanwhile: a write is in
// flight when Redis answers again, and reaches it before the acquires
// other processes send after.
func TestUnwrittenSuccessIsRewrittenWithoutAWaitWhileRedisHangs(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	ctx := context.Background()
	f := &gatetest.Flaky{Client: rdb}
	c := &pipelines{Client: f}
	const timeout = 40 * time.Millisecond
	opts := gate.Options{Lease: time.Minute, Retention: gate.Retention{Done: time.Hour}, Redis: gate.RedisPolicy{Timeout: timeout}, Prefix: redistest.UniqueKey(t)}
	ran := newGate(t, c, opts)
	other := newGate(t, rdb, opts)
	err := ran.Do(ctx, "job", func(context.Context, *gate.Lease) error {
		f.Down.Store(true) // the settle fails at once
		return nil
	})
	if err != nil {
		t.Fatalf("Do: %v, want nil", err)
	}
	f.Hang.Store(true) // every write now waits for its timeout
	f.Down.Store(false)
	// 12 writes take 12 timeouts, about 0.5 s, sent one after another;
	// with a backoff doubling from 100 ms to 1 s between them, 9 s.
	from := c.n.Load()
	deadline := time.Now().Add(4 * time.Second)
	for c.n.Load()-from < 12 {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes while Redis hung for 4 s, want 12: one after another", c.n.Load()-from)
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.Hang.Store(false)
	waitState(t, redistest.Target{}, other, "job", gate.Done, 3*time.Second)
}

// pipelines counts the round trips of more than one command sent.
type pipelines struct {
	gate.Client
	n atomic.Int64
}

func (p *pipelines) Pipeline() redis.Pipeliner {
	p.n.Add(1)
	return p.Client.Pipeline()
}

// A failure whose lease ended in Redis before it settled, its key gone
// (the process stalled past the lease), is still recorded: dropping it
// would make the next call a free retry. But not when a newer run took
// the job and succeeded meanwhile: that success stands, and the job stays
// free for the next call. A success before the failed run does not stop
// its failure being recorded.
func TestFailureAfterItsLeaseEndedNeverUndoesANewerSuccess(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := gate.Options{Lease: time.Minute, Cooldown: time.Hour, Prefix: redistest.UniqueKey(t)}
			ran := newGate(t, tg.Client, opts)
			other := newGate(t, tg.Client, opts)
			expire := func(job string) {
				t.Helper()
				if err := tg.Client.Del(ctx, keyspace.Job(opts.Prefix, job)).Err(); err != nil {
					t.Fatal(err)
				}
			}

			// A success first, then a run whose lease ends before it fails.
			var ce *gate.CallError
			for job, failure := range map[string]struct {
				err  error
				want gate.State
			}{
				"transient": {errOverloaded, gate.CoolingDown},
				"permanent": {classify.Permanent(errBoom), gate.Failed},
			} {
				if err := ran.Do(ctx, job, okFn); err != nil {
					t.Fatal(err)
				}
				err := ran.Do(ctx, job, func(context.Context, *gate.Lease) error {
					expire(job)
					return failure.err
				})
				if !errors.As(err, &ce) || ce.SettleErr != nil || ce.State != failure.want {
					t.Fatalf("a %s failure whose key was gone: %v, want %v written", job, err, failure.want)
				}
				if st := mustStatus(t, other, job); st.State != failure.want {
					t.Fatalf("another process reads %v, want %v", st.State, failure.want)
				}
			}

			err := ran.Do(ctx, "job", func(context.Context, *gate.Lease) error {
				expire("job")
				if err := other.Do(ctx, "job", okFn); err != nil {
					t.Errorf("the newer run: %v, want it to run: the lease ended", err)
				}
				return errOverloaded
			})
			if !errors.As(err, &ce) || ce.SettleErr == nil || !errors.Is(ce.SettleErr, gate.ErrNotOwned) {
				t.Fatalf("a failure after a newer run's success: %v, want not written (ErrNotOwned)", err)
			}
			if st := mustStatus(t, other, "job"); st.State != gate.Ready {
				t.Fatalf("after the newer success the job is %v, want ready", st.State)
			}
			again := false
			if err := other.Do(ctx, "job", func(context.Context, *gate.Lease) error { again = true; return nil }); err != nil || !again {
				t.Fatalf("the next call: ran %v, %v; want it run", again, err)
			}
		})
	}
}

// A run frozen past its lease (no renewal reaches Redis) whose failure
// comes long after a newer success, or after an operator's reset, writes
// nothing: the fence turns the stale outcome away however late it comes,
// not only while the done key remembers the success (SuccessMemory). A
// late failure with nothing newer since is still written while the done
// key would have told. So is one after a newer run took the job, when
// that run's lease ended in Redis too: like a crashed holder's, it holds
// nothing there, and Status shows the older run's fence below the newer
// lease's (TestSoak's chaos does this; its invariant 4 allows it), until
// the newer run's success outdates it.
func TestLateFailureNeverUndoesANewerOutcome(t *testing.T) {
	ctx := context.Background()
	const lease = 2 * time.Second
	var newer *gate.Lease
	for _, tc := range []struct {
		name    string
		since   func(t *testing.T, m *miniredis.Miniredis, other *gate.Gate, job string)
		written bool
	}{
		{"a newer success, a minute before", func(t *testing.T, m *miniredis.Miniredis, other *gate.Gate, job string) {
			if err := other.Do(ctx, job, okFn); err != nil {
				t.Fatalf("the newer run: %v, want it run: the lease ended", err)
			}
			redistest.Advance(m, time.Minute)
		}, false},
		{"a reset", func(t *testing.T, m *miniredis.Miniredis, other *gate.Gate, job string) {
			if err := other.Reset(ctx, job); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a reset, a minute before", func(t *testing.T, m *miniredis.Miniredis, other *gate.Gate, job string) {
			if err := other.Reset(ctx, job); err != nil {
				t.Fatal(err)
			}
			redistest.Advance(m, time.Minute)
		}, false},
		{"nothing, a minute later", func(t *testing.T, m *miniredis.Miniredis, other *gate.Gate, job string) {
			redistest.Advance(m, time.Minute)
		}, false},
		{"nothing, at once", func(*testing.T, *miniredis.Miniredis, *gate.Gate, string) {}, true},
		{"a newer run whose lease ended too", func(t *testing.T, m *miniredis.Miniredis, other *gate.Gate, job string) {
			var err error
			if newer, err = other.Acquire(ctx, job); err != nil {
				t.Fatalf("the newer run: %v, want it to take the job: the lease ended", err)
			}
			redistest.Advance(m, lease+time.Millisecond)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newer = nil
			m, rdb := redistest.Miniredis(t)
			redistest.Advance(m, 0)
			frozen := &gatetest.Flaky{Client: rdb}
			opts := gate.Options{Lease: lease, Cooldown: time.Hour, Prefix: redistest.UniqueKey(t)}
			ran := newGate(t, frozen, opts)
			other := newGate(t, rdb, opts)
			err := ran.Do(ctx, "job", func(context.Context, *gate.Lease) error {
				frozen.Down.Store(true) // frozen: no renewal reaches Redis
				redistest.Advance(m, lease+time.Millisecond)
				tc.since(t, m, other, "job")
				frozen.Down.Store(false) // woken: its failure goes out
				return errOverloaded
			})
			var ce *gate.CallError
			if !errors.As(err, &ce) || (ce.SettleErr == nil) != tc.written {
				t.Fatalf("the frozen run's failure: %v, want written %v", err, tc.written)
			}
			exp := gate.Ready
			if tc.written {
				exp = gate.CoolingDown
			}
			st := mustStatus(t, other, "job")
			if st.State != exp {
				t.Fatalf("after the frozen run's failure the job is %v, want %v", st.State, exp)
			}
			if newer != nil {
				if st.Fence != ce.Fence || st.Fence >= newer.Fence() {
					t.Errorf("Status fence %d, want the frozen run's %d, below the newer lease's %d", st.Fence, ce.Fence, newer.Fence())
				}
				// Its success is newer than the frozen run's failure: written
				// over it, it frees the job (no Retention.Done).
				if err := newer.Succeed(ctx); err != nil {
					t.Fatalf("the newer run's success after the older failure: %v, want written", err)
				}
				if st := mustStatus(t, other, "job"); st.State != gate.Ready {
					t.Fatalf("after the newer run's success the job is %v, want ready: the success freed it", st.State)
				}
			}
		})
	}
}

// A holder dies before its upstream's first reading (calls go one at a
// time, and its call is that one): its reservation lapses with its
// lease, and a caller waiting for the upstream, for another job, runs
// then: the giver looks again when the soonest reservation lapses. It
// is given the turn, and the turn's own reservation is the one
// call its acquire takes over, not a call in flight that refuses it
// (before the fix, the turn holder was refused "retry in 200ms" by its
// own turn, joined again and was given another, until its 10 s ran out).
func TestADeadHoldersReservationLapsesForTheLine(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			const lease = time.Second
			dead := &flaky{Client: tg.Client}
			holder := newGate(t, dead, gate.Options{Prefix: prefix, Lease: lease})
			waiter := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: lease})
			// The giver's look each second would find the lapse too: the
			// line is woken by the lapse itself (line_give.lua's wait).
			gate.SetGiveCheck(waiter, time.Hour)
			ctx := context.Background()
			if _, err := holder.Acquire(ctx, "held"); err != nil {
				t.Fatal(err)
			}
			dead.Down.Store(true) // neither renews nor settles
			if b := blocked(t, waiter, "other"); !errors.Is(b, gate.ErrUpstreamCooling) {
				t.Fatalf("another job while the holder's call is the one call: %v, want ErrUpstreamCooling (one at a time before a reading)", b)
			}
			start := time.Now()
			l, err := waiter.AcquireWait(ctx, "other", 10*time.Second)
			if err != nil {
				t.Fatalf("AcquireWait after %v: %v, want the call once the dead holder's reservation lapsed (%v)", time.Since(start), err, lease)
			}
			defer l.Release(ctx)
			// About one lease; the bound is far from the 10 s a waiter
			// refused by its own turn waits out.
			if took := time.Since(start); took > lease+4*time.Second {
				t.Fatalf("ran %v after the wait began, want about the lease's %v", took, lease)
			}
		})
	}
}
