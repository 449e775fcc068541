package gate

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/gate/internal/upstream"
	"github.com/retrygate/retrygate/internal/code"
)

// Lease is one held run of a job, from Acquire (or inside Do) until it is
// settled with Succeed, Fail or Release. Its methods are safe for concurrent
// use; settling twice returns ErrAlreadySettled.
type Lease struct {
	grant
	g      *Gate
	parent context.Context // the acquiring context: cancellation and values

	// Set once by the acquire, before the lease is handed out.
	start   time.Time
	ungated bool
	ctx     context.Context
	cancel  context.CancelCauseFunc

	// seen is what the run's responses said of its upstream's budget
	// (budget.go).
	seen    upstream.Seen
	early   atomic.Bool    // the first reading is written before the settle
	writing sync.WaitGroup // that write, which the settle waits for

	mu      sync.Mutex
	expires time.Time // local estimate of the lease's expiry
	timer   *time.Timer
	lost    bool
	settled bool
	result  Result
}

// grant is what an acquire sends and what it was granted: a Lease is made
// of it only once the job is taken (a refusal allocates no Lease).
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

// Result is what a settle recorded.
//
// Deprecated: Lease.Settle returns it as a *CallError.
type Result struct {
	// State is the job's state after the settle: Ready or Done after a
	// success or a release, CoolingDown or Failed after a failure; Ready
	// also after a provider-wide failure while another upstream is open
	// (Options.Fallbacks, FallbackCooldown 0): its next call runs there.
	State State
	// RetryAfter is the cooldown set (0 unless CoolingDown).
	RetryAfter time.Duration
	// Attempts counts failures since the last success.
	Attempts int
	// Verdict is the classification of the failure (zero on success).
	Verdict classify.Verdict
	// Upstream is the state of the upstream the run used after the settle,
	// when the settle changed it.
	Upstream UpstreamStatus
}

// Job returns the lease's job key.
func (l *Lease) Job() string { return l.job }

type leaseKey struct{}

// LeaseFromContext returns the lease whose Context ctx is or derives from:
// the context Do and Call give fn, a handler's request under httpmw, a
// task or job under the queue adapters. nil when there is none. Deep in a
// job's code it names the upstream to call (Scope) and the fence to write
// with (Fence).
func LeaseFromContext(ctx context.Context) *Lease {
	l, _ := ctx.Value(leaseKey{}).(*Lease)
	return l
}

// Upstream names the upstream this run must call: Options.Upstream, or
// the first of Options.Fallbacks that was open when the lease was taken;
// "" without upstreams. Its outcome cools or opens that upstream only.
func (l *Lease) Upstream() string { return l.up.Name() }

// Scope names the upstream this run must call.
//
// Deprecated: use Upstream.
func (l *Lease) Scope() string { return l.up.Name() }

// Fence returns the fencing token: it strictly increases across the
// acquisitions of a job (0 for an ungated lease). A store that keeps the
// highest token it has seen per job and rejects writes with a lower one
// keeps a stale owner (paused past its lease) from overwriting newer work.
func (l *Lease) Fence() int64 { return l.fence }

// Attempt returns the attempt number of this call: 1 + the failures since
// the last success.
func (l *Lease) Attempt() int { return l.attempt }

// Context returns the context fn runs under: the acquiring context, also
// cancelled when the lease is settled, and with cause ErrLeaseLost when the
// lease is lost (unless ContinueOnLeaseLost).
func (l *Lease) Context() context.Context { return l.ctx }

// Gated reports whether the lease holds a lock in Redis; false for the
// ungated lease FailOpen hands out while Redis is unreachable.
func (l *Lease) Gated() bool { return !l.ungated }

// Lost reports whether the lease has been lost (expired or taken over).
func (l *Lease) Lost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Result returns what the settle recorded; zero before it.
//
// Deprecated: use Settle, whose *CallError says what was recorded, or
// that it was not.
func (l *Lease) Result() Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.result
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

// elapsed is how long the run has taken.
func (l *Lease) elapsed() time.Duration { return time.Since(l.start) }

// Succeed releases the lock (or holds the job as Done for DoneTTL) and
// resets the attempt count. ctx only carries values: the write runs on a
// detached context bounded by Options.Timeout.
func (l *Lease) Succeed(ctx context.Context) error {
	_, err := l.settle(ctx, outSuccess, classify.Verdict{})
	return err
}

// Release frees the lock with no cooldown and no attempt counted: the call
// did not reach the model or its failure was not the job's (a client's bad
// request). A probe of the upstream that is released gives the probe to
// the next call.
func (l *Lease) Release(ctx context.Context) error {
	_, err := l.settle(ctx, outRelease, classify.Verdict{Class: classify.ClassCanceled, Reason: classify.ReasonCanceled})
	return err
}

// Settle records the outcome of a call that returned err, as Do does, and
// returns what Do would return: nil after a success (or ErrLeaseLost,
// ErrNotOwned: a newer owner may have run meanwhile); for an error, a
// *CallError wrapping it that says what the gate did (State, RetryAfter,
// Written). It is the one verb an adapter needs after Acquire.
func (l *Lease) Settle(ctx context.Context, err error) error {
	if err != nil {
		return l.failError(ctx, err)
	}
	serr := l.Succeed(ctx)
	if errors.Is(serr, ErrLeaseLost) || errors.Is(serr, ErrNotOwned) {
		return serr
	}
	// A success whose release could not reach Redis stays a success: the
	// lock expires with the lease and the observer saw the error.
	return nil
}

// Fail classifies err with Options.Classify and records the outcome: a
// cooldown, a failed mark, or (the acquiring context cancelled) a release.
// It returns nil when the outcome was recorded, else ErrLeaseLost,
// ErrNotOwned, ErrAlreadySettled or an ErrUnavailable. If Redis cannot be
// reached the lock's own TTL is the cooldown: a failure never leads to an
// immediate free retry.
func (l *Lease) Fail(ctx context.Context, err error) error {
	out, v := l.g.verdict(l.parent, err)
	_, serr := l.settle(ctx, out, v)
	return serr
}

// failError settles a failure and builds the error Do returns.
func (l *Lease) failError(ctx context.Context, ferr error) error {
	out, v := l.g.verdict(l.parent, ferr)
	res, serr := l.settle(ctx, out, v)
	ce := &CallError{Job: l.job, Verdict: v, State: res.State, RetryAfter: res.RetryAfter,
		Attempts: res.Attempts, Fence: l.fence, Err: ferr, SettleErr: serr}
	if serr != nil {
		// Not written: the lock's own TTL, at most a lease, is the
		// cooldown.
		ce.State, ce.RetryAfter = Running, l.g.opts.Lease
	}
	return ce
}

var panicVerdict = classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonPanic, Evidence: "go:panic"}

// verdict classifies err. A "canceled" verdict is the caller giving up
// only when the caller's own context was cancelled; otherwise it is a
// transient failure. A custom classifier that panics or returns what no
// code can be gets a transient "unknown" verdict or a cleaned one.
func (g *Gate) verdict(parent context.Context, err error) (out outcome, v classify.Verdict) {
	defer func() {
		if r := recover(); r != nil { // a custom classifier must not crash the settle
			out, v = outFailure, classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonUnknown}
		}
	}()
	v = g.opts.Classify(err)
	if v.Class == classify.ClassCanceled && errors.Is(parent.Err(), context.Canceled) {
		return outCanceled, classify.Verdict{Class: classify.ClassCanceled, Reason: classify.ReasonCanceled}
	}
	if v.Class >= classify.ClassCanceled {
		v.Class = classify.ClassTransient
	}
	if !code.Reason(v.Reason) {
		v.Reason = classify.ReasonUnknown
	}
	if v.Evidence != "" && !code.Evidence(v.Evidence) {
		v.Evidence = ""
	}
	if v.Class != classify.ClassPermanent {
		v.Suspect = false
	}
	v.RetryAfter = min(max(v.RetryAfter, 0), classify.MaxHint)
	return outFailure, v
}
