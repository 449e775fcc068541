package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// sample is one measurement of one workload at one concurrency.
type sample struct {
	ops       uint64
	opsPerSec float64
	p50, p99  time.Duration
	allocs    float64 // heap allocations per op, whole process
	trips     float64 // Redis round trips per op
	srvUsec   float64 // server time in commands per op, µs (commandstats)
	clientCPU float64 // this process's CPU per op, µs
	serverCPU float64 // redis-server's CPU per op, µs (network included)
}

// measurer runs workloads; hists are reused so a measurement allocates
// nothing of its own inside the window.
type measurer struct {
	admin *redis.Client // uncounted: stats resets and reads
	pid   int           // redis-server's

	hists []hist
	warm  time.Duration
	dur   time.Duration
}

func newMeasurer(srv server, warm, dur time.Duration) *measurer {
	return &measurer{
		admin: redis.NewClient(&redis.Options{Addr: srv.addr, PoolSize: 2}),
		pid:   srv.pid,
		hists: make([]hist, maxConc),
		warm:  warm,
		dur:   dur,
	}
}

// measure warms wl up at conc goroutines (pool connections, script cache)
// and then measures it for m.dur.
func (m *measurer) measure(ctx context.Context, wl *workload, conc int) (sample, error) {
	if wl.start != nil {
		stop, err := wl.start(ctx)
		if err != nil {
			return sample{}, fmt.Errorf("%s: start: %w", wl.name, err)
		}
		defer stop()
	}
	if _, _, err := m.run(ctx, wl.op, conc, m.warm, false); err != nil {
		return sample{}, fmt.Errorf("%s: warm-up: %w", wl.name, err)
	}
	// conc connections open: on a loaded machine the warm-up may never
	// have had conc commands in flight at once, and a connection opened
	// while measuring sends its handshake through the trip counter (a
	// CI run counted 2.004 trips per gate success at c=64).
	if wl.rdb != nil {
		if err := warmPool(ctx, wl.rdb, conc); err != nil {
			return sample{}, fmt.Errorf("%s: warm-up: %w", wl.name, err)
		}
	}
	if err := m.admin.ConfigResetStat(ctx).Err(); err != nil {
		return sample{}, err
	}
	for i := range conc {
		m.hists[i].reset()
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	trips0 := wl.rt.n.Load()
	self := os.Getpid()
	client0, server0 := cpuTime(self), cpuTime(m.pid)
	ops, elapsed, err := m.run(ctx, wl.op, conc, m.dur, true)
	client, server := cpuTime(self)-client0, cpuTime(m.pid)-server0
	trips := wl.rt.n.Load() - trips0
	runtime.ReadMemStats(&after)
	if err != nil {
		return sample{}, fmt.Errorf("%s at %d: %w", wl.name, conc, err)
	}
	if ops == 0 {
		return sample{}, fmt.Errorf("%s at %d: no operation completed", wl.name, conc)
	}
	var h hist
	for i := range conc {
		h.merge(&m.hists[i])
	}
	usec, err := serverUsec(ctx, m.admin, wl.srvCmds)
	if err != nil {
		return sample{}, err
	}
	return sample{
		ops:       ops,
		opsPerSec: float64(ops) / elapsed.Seconds(),
		p50:       h.quantile(0.50),
		p99:       h.quantile(0.99),
		allocs:    float64(after.Mallocs-before.Mallocs) / float64(ops),
		trips:     float64(trips) / float64(ops),
		srvUsec:   usec / float64(ops),
		clientCPU: us(client) / float64(ops),
		serverCPU: us(server) / float64(ops),
	}, nil
}

// run calls op from conc goroutines until d has passed; the window ends
// when the last operation started in it has returned.
func (m *measurer) run(ctx context.Context, op opFunc, conc int, d time.Duration, record bool) (uint64, time.Duration, error) {
	var (
		stop   atomic.Bool
		total  atomic.Uint64
		wg     sync.WaitGroup
		errMu  sync.Mutex
		runErr error
	)
	start := time.Now()
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := &m.hists[w]
			var n uint64
			// A warm-up op runs at least once per goroutine: on a loaded
			// machine a goroutine can start after the warm-up window, and
			// its first op (a fresh connection, a script's EVALSHA answered
			// NOSCRIPT) would then be measured.
			for !stop.Load() || (!record && n == 0) {
				t0 := time.Now()
				if err := op(ctx, w); err != nil {
					errMu.Lock()
					runErr = errors.Join(runErr, err)
					errMu.Unlock()
					stop.Store(true)
					break
				}
				if record {
					h.add(time.Since(t0))
				}
				n++
			}
			total.Add(n)
		}()
	}
	time.Sleep(d) // the measurement window itself
	stop.Store(true)
	wg.Wait()
	return total.Load(), time.Since(start), runErr
}
