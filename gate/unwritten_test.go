package gate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/faultproxy"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A success whose settle Redis does not take is never paid for twice: the
// process that ran it refuses the job as Done for Retention.Done, warns, and
// writes the Done mark once Redis is back, even after the lease expired
// meanwhile, so that another process is refused too.
func TestUnwrittenSuccessIsHeldAndWrittenLater(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			const lease = 100 * time.Millisecond
			f := &gatetest.Flaky{Client: tg.Client}
			rec := newRecorder()
			opts := gate.Options{Lease: lease, Retention: gate.Retention{Done: time.Hour}, Prefix: redistest.UniqueKey(t), Observer: rec}
			ran := newGate(t, f, opts)
			opts.Observer = nil
			other := newGate(t, tg.Client, opts)

			err := ran.Do(ctx, "job", func(context.Context, *gate.Lease) error {
				f.Down.Store(true) // Redis goes away before the settle
				return nil
			})
			if err != nil {
				t.Fatalf("Do: %v, want nil: the call succeeded", err)
			}
			if b := blocked(t, ran, "job"); b.State != gate.Done || !errors.Is(b, gate.ErrDone) {
				t.Fatalf("the same process, again: %v, want ErrDone", b)
			}
			warned := false
			for _, e := range rec.drain() {
				warned = warned || (e.Kind == gate.EventWarning && e.Reason == gate.WarnSettleUnwritten && e.State == gate.Done)
			}
			if !warned {
				t.Fatal("no settle_unwritten warning with State Done")
			}
			// Past the lease: the running lock is gone from Redis.
			waitState(t, tg, other, "job", gate.Ready, lease)

			f.Down.Store(false)
			waitState(t, tg, other, "job", gate.Done, 3*time.Second)
			if b := blocked(t, other, "job"); !errors.Is(b, gate.ErrDone) {
				t.Fatalf("another process: %v, want ErrDone", b)
			}
			// The rewrite reports it once Redis's answer reached it, which
			// may be a moment after another process read the mark.
			settled := false
			waitUntil(t, 3*time.Second, "a settled event once the done mark was written", func() bool {
				for _, e := range rec.drain() {
					settled = settled || (e.Kind == gate.EventSettled && e.State == gate.Done && e.Err == nil)
				}
				return settled
			})
		})
	}
}

// The late write never overwrites a newer owner: a run that took the job
// after the lease expired keeps it, and the process that kept it Done
// follows Redis again.
func TestUnwrittenSuccessLeavesANewerOwner(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	ctx := context.Background()
	f := &gatetest.Flaky{Client: rdb}
	opts := gate.Options{Lease: time.Minute, Retention: gate.Retention{Done: time.Hour}, Cooldown: time.Hour, Prefix: redistest.UniqueKey(t), Backoff: gate.Backoff{Jitter: -1}}
	ran := newGate(t, f, opts)
	other := newGate(t, rdb, opts)
	knownUpstream(t, other) // a settle lost keeps its call reserved: not one at a time
	_ = ran.Do(ctx, "job", func(context.Context, *gate.Lease) error {
		f.Down.Store(true)
		return nil
	})
	if err := rdb.Del(ctx, keyspace.Job(opts.Prefix, "job")).Err(); err != nil {
		t.Fatal(err)
	}
	// Another process runs the job and fails: its cooldown is the newer value.
	if err := failWith(t, other, "job", errTransient); err == nil {
		t.Fatal("the other run's failure was not reported")
	}
	f.Down.Store(false)
	deadline := time.Now().Add(3 * time.Second)
	for {
		b := blocked(t, ran, "job")
		if b.State == gate.CoolingDown {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process that kept the job Done: %v, want the newer owner's cooldown", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := mustStatus(t, other, "job"); st.State != gate.CoolingDown {
		t.Fatalf("Status: %v, want the newer owner's cooldown kept", st.State)
	}
}

// The same through a real TCP fault: Redis black-holed past the lease
// while the success settles. Do returns nil, the process refuses the job
// as Done, and once the network heals the mark is in Redis.
func TestUnwrittenSuccessThroughFaultProxy(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Server(t)
	p := faultproxy.New(t, srv.Addr())
	through := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ReadTimeout: 100 * time.Millisecond,
		WriteTimeout: 100 * time.Millisecond, DialTimeout: 100 * time.Millisecond, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = through.Close() })
	ctx := context.Background()
	const lease = 150 * time.Millisecond
	opts := gate.Options{Lease: lease, Retention: gate.Retention{Done: time.Hour}, Prefix: redistest.UniqueKey(t), Redis: gate.RedisPolicy{Timeout: 200 * time.Millisecond}}
	ran := newGate(t, through, opts)
	other := newGate(t, srv.Client(t), opts)

	err := ran.Do(ctx, "job", func(context.Context, *gate.Lease) error {
		p.Blackhole(true)
		return nil
	})
	if err != nil {
		t.Fatalf("Do: %v, want nil: the call succeeded", err)
	}
	if b := blocked(t, ran, "job"); !errors.Is(b, gate.ErrDone) {
		t.Fatalf("the same process, again: %v, want ErrDone", b)
	}
	waitState(t, redistest.Target{}, other, "job", gate.Ready, lease)
	p.Blackhole(false)
	waitState(t, redistest.Target{}, other, "job", gate.Done, 3*time.Second)
	if b := blocked(t, ran, "job"); !errors.Is(b, gate.ErrDone) {
		t.Fatalf("the same process, healed: %v, want ErrDone", b)
	}
}

// While Redis refuses the write at once (not a timeout), the done mark of
// an unwritten success is sent again after a backoff that doubles, not at
// once: a few writes a second, not a loop against a server that refuses.
// (A write that times out is sent again at once: leaseended_test.go.)
func TestUnwrittenSuccessBacksOffWhileRedisRefuses(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	ctx := context.Background()
	f := &gatetest.Flaky{Client: rdb}
	c := &pipelines{Client: f}
	opts := gate.Options{Lease: time.Minute, Retention: gate.Retention{Done: time.Hour}, Prefix: redistest.UniqueKey(t)}
	ran := newGate(t, c, opts)
	other := newGate(t, rdb, opts)
	if err := ran.Do(ctx, "job", func(context.Context, *gate.Lease) error {
		f.Down.Store(true) // the settle, and each write after it, fails at once
		return nil
	}); err != nil {
		t.Fatalf("Do: %v, want nil", err)
	}
	start, from := time.Now(), c.n.Load()
	waitUntil(t, 5*time.Second, "three writes", func() bool { return c.n.Load()-from >= 3 })
	// Sent after 50 ms, then 100 more, then 200 more.
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("three writes within %v while Redis refused them, want a backoff between them (350 ms)", d)
	}
	f.Down.Store(false)
	waitState(t, redistest.Target{}, other, "job", gate.Done, 3*time.Second)
}

// Close is a process's last chance to write the successes Redis refused:
// called while Redis refuses writes, it returns ctx's error when ctx ends
// first (those successes would run again), and once Redis is back it
// returns when they are written, so no other process pays for them twice.
func TestCloseWritesWhatTheGateKeeps(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			f := &gatetest.Flaky{Client: tg.Client}
			opts := gate.Options{Lease: time.Second, Retention: gate.Retention{Done: time.Hour}, Prefix: redistest.UniqueKey(t)}
			ran := newGate(t, f, opts)
			other := newGate(t, tg.Client, opts)
			knownUpstream(t, other) // a settle refused keeps its call reserved: not one at a time
			if err := ran.Close(ctx); err != nil {
				t.Fatalf("Close with nothing kept: %v", err)
			}
			for _, job := range []string{"a", "b"} {
				f.Down.Store(false)
				if err := ran.Do(ctx, job, func(context.Context, *gate.Lease) error {
					f.Down.Store(true) // Redis refuses the settle
					return nil
				}); err != nil {
					t.Fatalf("Do %s: %v, want nil: the call succeeded", job, err)
				}
			}

			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			if err := ran.Close(short); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Close while Redis refuses writes: %v, want the context's error", err)
			}

			closed := make(chan error, 1)
			go func() { closed <- ran.Close(ctx) }()
			select {
			case err := <-closed:
				t.Fatalf("Close returned %v while the successes were unwritten", err)
			case <-time.After(50 * time.Millisecond):
			}
			f.Down.Store(false) // Redis is back
			select {
			case err := <-closed:
				if err != nil {
					t.Fatalf("Close once Redis is back: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not return once Redis was back")
			}
			// The process is gone; another one is refused each job as done.
			for _, job := range []string{"a", "b"} {
				if b := blocked(t, other, job); !errors.Is(b, gate.ErrDone) {
					t.Fatalf("another process, job %s after Close: %v, want ErrDone", job, b)
				}
			}
		})
	}
}
