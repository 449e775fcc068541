package gate

import (
	"slices"
	"sync"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
)

// How long a running job will take, for the refusal of a duplicate.
// The lease's time left says when a crashed run is taken over. It does not
// say when a live one ends (a 60 s lease for a 5 s call).
//
// The durations of the gate's last calls are shared in Redis
// (keyspace.Calls):
//   - A settle sends the ones this Gate settled since its last, its own
//     included. It reads the gate's back in the same round trip (settle.go).
//     So every process that settled a call knows them.
//   - A renewal does the same (renew.go). It also records the estimate in
//     the job's value. So a process refused by the running value reads it
//     in its acquire's reply, even one that never ran a call.
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

// callTimes holds a Gate's recent call durations, as a ring.
// A duration is fn's, from acquire to settle.
type callTimes struct {
	mu   sync.Mutex
	ring [callSamples]time.Duration
	n    int // samples recorded, ever
	// unsent are the durations this Gate settled and has not sent to
	// Redis yet, oldest first. It holds at most callSamples.
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
// Redis (newest first). It keeps the samples when ds holds fewer than the
// Gate has. Replies of concurrent settles come back in any order. An older
// one must not undo what a newer one taught.
func (c *callTimes) set(ds []time.Duration) {
	c.mu.Lock()
	if len(ds) >= min(c.n, callSamples) {
		c.n = copy(c.ring[:], ds)
	}
	c.mu.Unlock()
}

// estimate is how long a call is expected to take: the 90th percentile of
// the samples. It is at least a millisecond, the precision Redis keeps.
// With too few samples it is 0.
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

// ends is the one estimate of when a running call ends. The call is a
// job's run or an upstream's probe. It has taken ran, with left on its
// lease. Its wait is its estimate less ran. The estimate is runner, which
// a runner records in the job's value (0 for none). Without one, it is
// the 90th percentile of the gate's recent calls. The wait is at least a
// second, Retry-After's resolution. It is at most left, after which a
// crashed run is taken over.
//
// A call past its estimate, or one with no estimate at all, has none
// left. Its wait is then its age past the estimate, at least a second.
// A client that comes back on each Retry-After waits 1 s, 1 s, 2 s, 4 s, …
// up to the lease's time left. It neither polls every second for a stuck
// call nor is sent away for a whole lease for a short one. Derived from
// the call's age, the wait needs no state per client.
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

// runningWait is what a refusal of a running job tells, wherever Redis
// read it (acquire, Status, Reset): the time its lease has left, and the
// wait until its call is expected to end. v is its value, read at Redis's
// now (ms) with ttl left; noTTL: its key has none, a value no gate wrote,
// which as far as anyone knows runs for a lease.
func (g *Gate) runningWait(v store.Job, now int64, ttl time.Duration, noTTL bool) (left, wait time.Duration) {
	left = ttl
	if noTTL {
		left = g.opts.Lease
	}
	return left, g.retryIn(refuser{state: Running, left: left, ran: ranFor(v, now, left, g.opts.Lease), runner: v.Estimate, foreign: v.Kind == store.Foreign})
}

// ranFor is how long a running value's run has taken at Redis time now
// (ms). It counts from the run's fence, Redis's µs clock at its acquire,
// in whole ms as now is. A run's fence may not be recorded: a free key's
// acquire could not record it, and the first renewal has not yet. Then
// ranFor counts from when the key was set with the lease's TTL.
func ranFor(v store.Job, now int64, left, lease time.Duration) time.Duration {
	if v.Fence == 0 {
		return max(lease-left, 0)
	}
	return max(time.Duration(now-v.Fence/1000)*time.Millisecond, 0)
}
