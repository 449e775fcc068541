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
// calls are shared in Redis (keyspace.Calls): a settle sends the ones this
// Gate settled since its last, its own included, and reads the gate's back
// in its own round trip (settle.go), so every process that settled a call
// knows them; a renewal does the same, and records the estimate in the
// job's value (renew.go), so a process refused by the running value, even
// one that never ran a call, reads it in its acquire's reply.
const (
	// callSamples is how many recent call durations a Gate keeps.
	callSamples = 64
	// minCallSamples is how many it needs before it trusts them.
	minCallSamples = 8
	// callQuantile is the share of calls that end within the estimate.
	callQuantile = 0.9
	// minRunningWait is the shortest wait a running call's refusal gives.
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
// Redis (newest first), unless ds holds fewer than the Gate has: replies
// of concurrent settles come back in any order, and an older one must not
// undo what a newer one taught.
func (c *callTimes) set(ds []time.Duration) {
	c.mu.Lock()
	if len(ds) >= min(c.n, callSamples) {
		c.n = copy(c.ring[:], ds)
	}
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

// ends is the one estimate of when a running call (a job's run, an
// upstream's probe) that has taken ran, with left on its lease, ends: its
// own estimate (a runner records it in the job's value; 0 for none) or the
// 90th percentile of the gate's recent calls, less ran; at least a second
// (Retry-After's resolution) and at most left, after which a crashed run
// is taken over.
//
// A call past its estimate, or one with no estimate at all, has none
// left: its wait is its age past the estimate, at least a second, so a
// client that comes back on each Retry-After waits 1 s, 1 s, 2 s, 4 s, …
// up to the lease's time left instead of polling every second for a
// stuck call, or being sent away for a whole lease for a short one.
// Derived from the call's age, it needs no state per client.
func (c *callTimes) ends(left, ran, runner time.Duration) time.Duration {
	left = max(left, time.Millisecond)
	q := runner
	if q <= 0 {
		q = c.estimate()
	}
	if r := q - ran; q > 0 && r >= minRunningWait {
		return min(r, left)
	}
	return min(max(ran-q, minRunningWait), left)
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
// (ms): since its fence (Redis's µs clock at its acquire), in whole ms as
// now is, or, for a run whose fence is not recorded (a free key's acquire
// that could not record it, before its first renewal), since its key was
// set with the lease's TTL.
func ranFor(v store.Job, now int64, left, lease time.Duration) time.Duration {
	if v.Fence == 0 {
		return max(lease-left, 0)
	}
	return max(time.Duration(now-v.Fence/1000)*time.Millisecond, 0)
}
