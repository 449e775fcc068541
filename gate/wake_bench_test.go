package gate_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// BenchmarkWakeUp measures how long after a settle waiters learn the
// outcome: 100 waiters in 4 gates (each with its own client, as 4
// processes), on a real redis-server over loopback. One op is one job:
// all waiters subscribed, then the running lease (a fifth gate) succeeds;
// the latency of a waiter runs from the start of the settle until its
// AcquireWait returns ErrDone.
func BenchmarkWakeUp(b *testing.B) {
	const gates, perGate = 4, 25
	srv := redistest.Server(b)
	prefix := redistest.UniqueKey(b)
	opts := gate.Options{Prefix: prefix, Lease: time.Minute, Retention: gate.Retention{Done: time.Minute}}
	owner, _ := gate.New(srv.Client(b), opts)
	var gs [gates]*gate.Gate
	for i := range gs {
		gs[i], _ = gate.New(srv.Client(b), opts)
	}
	var mu sync.Mutex
	ready := map[string]int{}
	for _, g := range gs {
		gate.SetWaitHooks(g, nil, func(job string) {
			mu.Lock()
			ready[job]++
			mu.Unlock()
		})
	}
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N*gates*perGate)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		job := "job-" + strconv.Itoa(i)
		l, err := owner.Acquire(ctx, job)
		if err != nil {
			b.Fatal(err)
		}
		var start atomic.Int64 // unix ns; read by waiters woken over the network
		var wg sync.WaitGroup
		got := make(chan time.Duration, gates*perGate)
		for _, g := range gs {
			for j := 0; j < perGate; j++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := g.AcquireWait(ctx, job, 10*time.Second)
					d := time.Duration(time.Now().UnixNano() - start.Load())
					if !errors.Is(err, gate.ErrDone) {
						b.Error(err)
					}
					got <- d
				}()
			}
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Microsecond) {
			mu.Lock()
			n := ready[job]
			mu.Unlock()
			if n >= gates*perGate {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("waiters not subscribed within 10s")
			}
		}
		start.Store(time.Now().UnixNano())
		if err := l.Succeed(ctx); err != nil {
			b.Fatal(err)
		}
		wg.Wait()
		close(got)
		for d := range got {
			lat = append(lat, d)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(q(1), "max-ms")
}
