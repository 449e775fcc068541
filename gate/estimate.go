package gate

import (
	"slices"
	"sync"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
)

// How long a running job will take, for the refusal of a duplicate: the
// lease's time left says when a crashed run is taken over, not when a live
// one ends (a 60 s lease for a 5 s call). A Gate keeps the durations of its
// last calls and estimates from them.
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
}

func (c *callTimes) add(d time.Duration) {
	c.mu.Lock()
	c.ring[c.n%callSamples] = d
	c.n++
	c.mu.Unlock()
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
// on its lease, ends: the 90th percentile of the recent call
// durations less elapsed, at least a second, at most the lease's time left
// (after which a crashed run is taken over). With fewer than 8 calls seen
// it is the lease's time left.
func (c *callTimes) runningWait(leaseLeft, elapsed time.Duration) time.Duration {
	leaseLeft = max(leaseLeft, time.Millisecond)
	q, ok := c.quantile(callQuantile)
	if !ok {
		return leaseLeft
	}
	return min(max(q-elapsed, minRunningWait), leaseLeft)
}

// leaseLeft is a running value's time left from its TTL; a value held
// without a TTL (not written by a gate) is held for a lease, as far as
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
