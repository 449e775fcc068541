package gate_test

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// holdFirst counts the pipelines sent and holds the first one sent after
// it is armed until released.
type holdFirst struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
	trips   atomic.Int64
}

func (h *holdFirst) DialHook(next redis.DialHook) redis.DialHook { return next }

// A round trip is one command or one pipeline (an acquire is one script
// with its upstream, a pipeline without).
func (h *holdFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trip()
		return next(ctx, cmd)
	}
}
func (h *holdFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trip()
		return next(ctx, cmds)
	}
}

func (h *holdFirst) trip() {
	h.trips.Add(1)
	if h.armed.CompareAndSwap(true, false) {
		close(h.entered)
		<-h.release
	}
}

// flightWaiters counts the goroutines waiting for another call's acquire
// of the same job in this process.
func flightWaiters() int {
	buf := make([]byte, 1<<22)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "gate.(*flight).wait(")
}

// Calls merged behind an acquire in flight that Redis refuses get its
// refusal without asking Redis themselves: one round trip for them all.
func TestMergedCallsShareTheRefusalsRoundTrip(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	h := &holdFirst{entered: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(h)
	g := newGate(t, rdb, gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{Jitter: -1}})
	if err := failWith(t, g, "job", errBoom); !errors.Is(err, gate.ErrCoolingDown) {
		t.Fatal(err)
	}
	const followers = 8
	errs := make(chan error, followers+1)
	var wg sync.WaitGroup
	do := func() {
		defer wg.Done()
		errs <- g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error {
			t.Error("fn ran during the cooldown")
			return nil
		})
	}
	h.armed.Store(true)
	wg.Add(1)
	go do()
	<-h.entered // the leader's acquire is in flight, held
	sent := h.trips.Load()
	for range followers {
		wg.Add(1)
		go do()
	}
	waitUntil(t, 5*time.Second, "every follower waits for the leader's acquire", func() bool { return flightWaiters() == followers })
	close(h.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, gate.ErrCoolingDown) {
			t.Fatalf("merged call: %v, want the leader's ErrCoolingDown", err)
		}
	}
	if extra := h.trips.Load() - sent; extra != 0 {
		t.Fatalf("the merged calls made %d round trips of their own, want none", extra)
	}
}

// A duplicate refused in-process while this process runs the job says how
// many attempts failed before the running one, as a refusal read from
// Redis says it.
func TestInFlightRefusalCountsPastAttempts(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	ctx := context.Background()
	opts := gate.Options{Prefix: redistest.UniqueKey(t), Cooldown: time.Second, Backoff: gate.Backoff{Jitter: -1}}
	g := newGate(t, rdb, opts)
	if err := failWith(t, g, "job", errBoom); !errors.Is(err, gate.ErrCoolingDown) {
		t.Fatal(err)
	}
	redistest.Advance(m, 2*time.Second)
	l, err := g.Acquire(ctx, "job") // attempt 2
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	for name, gg := range map[string]*gate.Gate{"in-process": g, "from Redis": newGate(t, rdb, opts)} {
		_, err := gg.Acquire(ctx, "job")
		var b *gate.BlockedError
		if !errors.As(err, &b) || !errors.Is(err, gate.ErrInFlight) || b.Attempts != 1 {
			t.Errorf("%s: %v (%+v), want ErrInFlight with the 1 attempt that failed before", name, err, b)
		}
	}
}

// panicOnce is an Observer that panics at the first event of its kind.
type panicOnce struct {
	kind     gate.EventKind
	panicked atomic.Bool
}

func (o *panicOnce) Observe(_ context.Context, e gate.Event) {
	if e.Kind == o.kind && o.panicked.CompareAndSwap(false, true) {
		panic("observer")
	}
}

// An acquire that panics (here its Observer, told Redis is out of reach)
// still ends its record of the job in flight: the job's next call in
// this process asks Redis itself, instead of following an acquire that
// never answers until its context ends.
func TestAPanickingAcquireLeavesNothingInFlight(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: deadAddr(t), DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	obs := &panicOnce{kind: gate.EventRedisError}
	g := newGate(t, rdb, gate.Options{Observer: obs})
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Fatal("the first Acquire did not panic")
			}
		}()
		_, _ = g.Acquire(context.Background(), "job")
	}()
	// Far past the dial timeout: a call that follows the panicked
	// acquire waits this long and ends with the context's error.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := g.Acquire(ctx, "job"); !errors.Is(err, gate.ErrUnavailable) {
		t.Fatalf("second Acquire: %v, want ErrUnavailable", err)
	}
}

// An Observer that panics on EventAcquired unwinds past the only holder
// of the lease the acquire took: the panic reaches the caller, and the job
// is given back (Ready), not held for a lease by a
// call that never runs.
func TestAPanickingObserverGivesTheJobBack(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := gate.Options{Prefix: redistest.UniqueKey(t), Lease: 3 * time.Second}
			obsOpts := opts
			obsOpts.Observer = &panicOnce{kind: gate.EventAcquired}
			g := newGate(t, tg.Client, obsOpts)
			func() {
				defer func() {
					if r := recover(); r != "observer" {
						t.Fatalf("Acquire with an Observer that panics on EventAcquired: recovered %v, want the Observer's panic", r)
					}
				}()
				l, err := g.Acquire(ctx, "job")
				t.Fatalf("Acquire returned %v, %v past a panicking Observer", l, err)
			}()
			st, err := newGate(t, tg.Client, opts).Status(ctx, "job")
			if err != nil || st.State != gate.Ready {
				t.Fatalf("after the Observer panicked: %+v (%v), want the job given back (Ready)", st, err)
			}
			l, err := g.Acquire(ctx, "job")
			if err != nil {
				t.Fatalf("the job's next call: %v, want it to run", err)
			}
			_ = l.Release(ctx)
		})
	}
}

// deadAddr is an address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
