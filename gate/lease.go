package gate

import (
	"context"
	"sync"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/gate/internal/upstream"
)

// Lease is one held run of a job. It lasts from Acquire (or inside Do)
// until it is settled with Succeed, Fail or Release. Its methods are safe
// for concurrent use. Settling twice returns ErrAlreadySettled.
type Lease struct {
	grant
	g      *Gate
	parent context.Context // the acquiring context: cancellation and values

	// Set once by the acquire, before the lease is handed out. start is
	// when it was sent; acquired is when its reply came.
	start    time.Time
	acquired time.Time
	ungated  bool
	ctx      context.Context
	cancel   context.CancelCauseFunc

	// renewals counts the renewals sent (renew.go). Only renewals touch
	// it, one at a time.
	renewals int
	// seen is what the run's responses said of its upstream's budget
	// (budget.go).
	seen    upstream.Seen
	writing sync.WaitGroup // the first reading's write, which the settle waits for

	mu      sync.Mutex
	expires time.Time // local estimate of the lease's expiry
	// estimate is the call's expected length as the last renewal recorded
	// it in the job's value (0: none yet). A refusal this process answers
	// reads it, so it tells the wait Status reads there.
	estimate time.Duration
	timer    *time.Timer
	lost     bool
	settled  bool
	early    bool // the first reading is written before the settle (budget.go)
}

// grant is what an acquire sends and what it was granted. A Lease is made
// of it only once the job is taken. A refusal allocates no Lease.
type grant struct {
	job     string
	key     string
	token   store.Token
	fence   int64
	attempt int
	hist    store.Job       // the job's last settled value, for decide
	up      upstream.Choice // the upstream this run uses, and whether it probes it
	tokens  int64           // the tokens the call will spend, when its caller said (budget.go)
}

// Job returns the lease's job key.
func (l *Lease) Job() string { return l.job }

type leaseKey struct{}

// LeaseFromContext returns the lease whose Context ctx is or derives from.
// That is the context Do and Call give fn, a handler's request under
// httpmw, or a task or job under the queue adapters. It returns nil when
// there is none. Deep in a job's code, the lease names the upstream to
// call (Upstream) and the fence to write with (Fence).
func LeaseFromContext(ctx context.Context) *Lease {
	l, _ := ctx.Value(leaseKey{}).(*Lease)
	return l
}

// Upstream names the upstream this run must call. It is Options.Upstream,
// or the first of Options.UpstreamPolicy.Fallbacks that was ready when the
// lease was taken. It is "" with UpstreamPolicy.Off. The run's outcome
// cools or readies that upstream only.
func (l *Lease) Upstream() string { return l.up.Name() }

// Fence returns the fencing token. It strictly increases across the
// acquisitions of a job. It is 0 for an ungated lease. A store can keep
// the highest token it has seen per job and reject writes with a lower
// one. It then keeps a stale owner (paused past its lease) from
// overwriting newer work.
func (l *Lease) Fence() int64 { return l.fence }

// Attempt returns the attempt number of this call: 1 + the failures since
// the last success.
func (l *Lease) Attempt() int { return l.attempt }

// Context returns the context fn runs under: the acquiring context. It is
// also cancelled when the lease is settled. When the lease is lost, it is
// cancelled with cause ErrLeaseLost, unless Redis.ContinueOnLeaseLost.
func (l *Lease) Context() context.Context { return l.ctx }

// Gated reports whether the lease holds a lock in Redis. It is false for
// an ungated lease: Redis.FailOpen's while Redis is unreachable, and
// Options.Shadow's for a call the gate refused.
func (l *Lease) Gated() bool { return !l.ungated }

// Lost reports whether the lease has been lost (expired or taken over).
func (l *Lease) Lost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// remaining is the lease's time left by the local clock.
func (l *Lease) remaining() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.expires.IsZero() {
		return l.g.opts.Lease
	}
	return max(time.Until(l.expires), time.Millisecond)
}

// recorded is the estimate the job's value holds (see estimate).
func (l *Lease) recorded() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.estimate
}

// elapsed is how long the run has taken.
func (l *Lease) elapsed() time.Duration { return time.Since(l.start) }
