package gate

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/keyspace"
)

// How long a running job will take, for the refusal of a duplicate: the
// lease's time left says when a crashed run is taken over, not when a live
// one ends (a 60 s lease for a 5 s call). The durations of the gate's last
// calls are shared in Redis (keyspace.Calls): a renewal sends the ones
// this Gate settled since its last and reads the gate's back, in its own
// round trip, and records the estimate in the job's value, so a process
// refused by the running value, even one that never ran a call, reads it
// in its acquire's reply. A settle, the success path, sends nothing more.
const (
	// callSamples is how many recent call durations a Gate keeps.
	callSamples = 64
	// minCallSamples is how many it needs before it trusts them.
	minCallSamples = 8
	// callQuantile is the share of calls that end within the estimate.
	callQuantile = 0.9
	// minRunningWait is the shortest wait a running job's refusal gives.
	minRunningWait = time.Second
)

// callTimes holds a Gate's recent call durations (fn's, from acquire to
// settle), as a ring.
type callTimes struct {
	mu   sync.Mutex
	ring [callSamples]time.Duration
	n    int // samples recorded, ever
	// unsent are the durations this Gate settled and has not sent to
	// Redis yet, oldest first; at most callSamples.
	unsent []time.Duration
}

func (c *callTimes) add(d time.Duration) {
	c.mu.Lock()
	c.ring[c.n%callSamples] = d
	c.n++
	if len(c.unsent) == callSamples {
		c.unsent = c.unsent[1:]
	}
	c.unsent = append(c.unsent, d)
	c.mu.Unlock()
}

// takeUnsent returns the unsent durations, newest first, and forgets them.
func (c *callTimes) takeUnsent() []time.Duration {
	c.mu.Lock()
	ds := c.unsent
	c.unsent = nil
	c.mu.Unlock()
	slices.Reverse(ds)
	return ds
}

// set replaces the samples with ds, the gate's last calls read from
// Redis (newest first), unless it has none.
func (c *callTimes) set(ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	c.mu.Lock()
	c.n = copy(c.ring[:], ds)
	c.mu.Unlock()
}

// estimate is how long this Gate expects a call to take: the 90th
// percentile of its last calls; 0 with too few.
func (c *callTimes) estimate() time.Duration {
	q, _ := c.quantile(callQuantile)
	return q
}

// quantile returns the q-quantile of the samples, false with too few.
func (c *callTimes) quantile(q float64) (time.Duration, bool) {
	c.mu.Lock()
	n := min(c.n, callSamples)
	if n < minCallSamples {
		c.mu.Unlock()
		return 0, false
	}
	s := make([]time.Duration, n)
	copy(s, c.ring[:n])
	c.mu.Unlock()
	slices.Sort(s)
	return s[min(int(q*float64(n)), n-1)], true
}

// runningWait estimates when a run that has taken elapsed, with leaseLeft
// on its lease, ends: its runner's estimate (recorded in the job's value;
// 0 for none) or else the 90th percentile of the gate's recent call
// durations this Gate knows, less elapsed, at least a second, at most the
// lease's time left (after which a crashed run is taken over). With no
// estimate and fewer than 8 calls known it is the lease's time left.
func (g *Gate) runningWait(leaseLeft, elapsed, runner time.Duration) time.Duration {
	leaseLeft = max(leaseLeft, time.Millisecond)
	q := runner
	if q <= 0 {
		q = g.calls.estimate()
	}
	if q <= 0 {
		return leaseLeft
	}
	return min(max(q-elapsed, minRunningWait), leaseLeft)
}

// shareCalls runs in a renewal, before its trip: it returns the estimate
// the renewal records in the job's value, and the durations to send with
// it (newest first). At a lease's first renewal, while this Gate knows too
// few calls to estimate, it first sends them and reads the gate's in a
// trip of its own, so that a fresh process's first run records the
// gate's estimate.
func (l *Lease) shareCalls() (time.Duration, []time.Duration) {
	g := l.g
	unsent := g.calls.takeUnsent()
	if est := g.calls.estimate(); est > 0 || l.renewals > 0 {
		return est, unsent
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.parent), min(g.renewEvery(), g.opts.Timeout))
	defer cancel()
	t := g.store.Trip()
	rec := t.RecordCalls(ctx, keyspace.Calls(g.opts.Prefix), unsent, callSamples)
	t.Send(ctx)
	if ds, err := rec.Result(); err == nil {
		g.calls.set(ds)
		unsent = nil
	}
	return g.calls.estimate(), unsent
}

// sharedCalls reads what a renewal's trip read of the gate's calls.
func (g *Gate) sharedCalls(rec store.Reply[[]time.Duration]) {
	if ds, err := rec.Result(); err == nil {
		g.calls.set(ds)
	}
}
