package gate

import (
	"slices"
	"sync"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
)

// How long a running job will take, for the refusal of a duplicate: the
// lease's time left says when a crashed run is taken over, not when a live
// one ends (a 60 s lease for a 5 s call). The durations of the gate's last
// calls are shared in Redis (keyspace.Calls): a renewal sends the ones
// this Gate settled since its last and reads the gate's back, in its own
// round trip, and records the estimate in the job's value (renew.go), so a
// process refused by the running value, even one that never ran a call,
// reads it in its acquire's reply. A settle, the success path, sends
// nothing more.
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

// estimate is how long a call is expected to take: the 90th percentile of
// the samples, at least a millisecond (the precision Redis keeps); 0 with
// too few.
func (c *callTimes) estimate() time.Duration {
	q, ok := c.quantile(callQuantile)
	if !ok {
		return 0
	}
	return max(q, time.Millisecond)
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
// 0 for none) or else the 90th percentile of the recent call durations,
// less elapsed, at least a second, at most the lease's time left (after
// which a crashed run is taken over). With no estimate and fewer than 8
// calls seen it is the lease's time left.
//
// A run past its estimate has no estimate left: its wait is how long it
// has overrun, at least a second, so a client that asks again on each
// Retry-After waits 1 s, 1 s, 2 s, 4 s, … up to the lease's time left
// instead of polling every second for a stuck call. Derived from the
// run's age, it needs no state per client.
func (c *callTimes) runningWait(leaseLeft, elapsed, runner time.Duration) time.Duration {
	leaseLeft = max(leaseLeft, time.Millisecond)
	q := runner
	if q <= 0 {
		q = c.estimate()
	}
	if q <= 0 {
		return leaseLeft
	}
	if left := q - elapsed; left >= minRunningWait {
		return min(left, leaseLeft)
	}
	return min(max(elapsed-q, minRunningWait), leaseLeft)
}

// leaseLeft is a running value's time left from its TTL; a value
// without a TTL (not written by a gate) runs for a lease, as far as
// anyone knows.
func leaseLeft(ttl time.Duration, noTTL bool, lease time.Duration) time.Duration {
	if noTTL {
		return lease
	}
	return ttl
}

// ranFor is how long a running value's run has taken at Redis time now
// (ms): since its fence (Redis's µs clock at its acquire), or, for a run
// taken on a free key and not renewed yet (no fence recorded), since its
// key was set with the lease's TTL.
func ranFor(v store.Job, now int64, left, lease time.Duration) time.Duration {
	if v.Fence == 0 {
		return max(lease-left, 0)
	}
	return max(time.Duration(now*1000-v.Fence)*time.Microsecond, 0)
}
