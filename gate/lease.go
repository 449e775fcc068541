package gate

import (
	"context"
	"errors"
	"github.com/retrygate/retrygate/internal/redisop"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/retrygate/retrygate/classify"
)

// Lease is one held run of a job, from Acquire (or inside Do) until it is
// settled with Succeed, Fail or Release. Its methods are safe for concurrent
// use; settling twice returns ErrAlreadySettled.
type Lease struct {
	g      *Gate
	job    string
	keys   jobKeys
	token  string
	parent context.Context // the acquiring context: cancellation and values
	hint   coolingHint     // the cooldown this process last saw, if hinted
	hinted bool

	// Set once by Acquire before the lease is handed out.
	fence   int64
	attempt int
	start   time.Time
	ungated bool
	probe   bool // this call probes the upstream scope after its cooldown
	ctx     context.Context
	cancel  context.CancelCauseFunc

	// Guarded by g.mu: the acquire's outcome, for coalesced callers.
	resolved bool
	refusal  error
	waiters  chan struct{} // closed when resolved; made by the first waiter

	mu      sync.Mutex
	expires time.Time // local estimate of the lock's expiry
	timer   *time.Timer
	lost    bool
	settled bool
	result  Result
}

// Result is what a settle recorded.
type Result struct {
	// State is the job's state after the settle (Ready, CoolingDown,
	// Failed, Done).
	State State
	// RetryAfter is the cooldown set (0 unless CoolingDown).
	RetryAfter time.Duration
	// Attempts counts failures since the last success.
	Attempts int
	// Verdict is the classification of the failure (zero on success).
	Verdict classify.Verdict
	// Upstream is the scope's state after the settle, when it changed it.
	Upstream UpstreamStatus
}

// Job returns the lease's job key.
func (l *Lease) Job() string { return l.job }

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
func (l *Lease) Result() Result {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.result
}

// remaining estimates the lease time left, for refusals decided in-process.
func (l *Lease) remaining() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.expires.IsZero() {
		return l.g.opts.Lease
	}
	return max(time.Until(l.expires), time.Millisecond)
}

// Succeed releases the lock (or holds the job as Done for DoneTTL) and
// resets the attempt count. ctx only carries values: the write runs on a
// detached context bounded by Options.Timeout.
func (l *Lease) Succeed(ctx context.Context) error {
	_, err := l.settle(ctx, opSuccess, classify.Verdict{})
	return err
}

// Release frees the lock with no cooldown and no attempt counted: the call
// did not reach the model or its failure was not the job's (a client's bad
// request).
func (l *Lease) Release(ctx context.Context) error {
	_, err := l.settle(ctx, opRelease, classify.Verdict{Class: classify.ClassCanceled, Reason: classify.ReasonCanceled})
	return err
}

// Fail classifies err with Options.Classify and records the outcome: a
// cooldown, a failed mark, or (the acquiring context cancelled) a release.
// It returns nil when the outcome was recorded, else ErrLeaseLost,
// ErrNotOwned, ErrAlreadySettled or an ErrUnavailable. If Redis cannot be
// reached the lock's own TTL is the cooldown: a failure never leads to an
// immediate free retry.
func (l *Lease) Fail(ctx context.Context, err error) error {
	v := l.g.verdict(l.parent, err)
	_, serr := l.settle(ctx, l.g.opForVerdict(v), v)
	return serr
}

// failError settles a failure and builds the error Do returns.
func (l *Lease) failError(ctx context.Context, ferr error) error {
	v := l.g.verdict(l.parent, ferr)
	res, serr := l.settle(ctx, l.g.opForVerdict(v), v)
	ce := &CallError{Job: l.job, Verdict: v, State: res.State, RetryAfter: res.RetryAfter,
		Attempts: res.Attempts, Fence: l.fence, Err: ferr, SettleErr: serr}
	if serr != nil {
		ce.State = Running
	}
	return ce
}

var panicVerdict = classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonPanic}

type settleOp string

const (
	opSuccess   settleOp = "s"
	opRelease   settleOp = "r"
	opTransient settleOp = "t"
	// opProviderWide: transient, and about the provider or the key (a
	// rate limit, an overload), not the job.
	opProviderWide settleOp = "v"
	opPermanent    settleOp = "p"
	opSystemic     settleOp = "y"
	opCanceled     settleOp = "x" // caller cancelled, with Options.CanceledCooldown
	opWave         settleOp = "w" // permanent, but part of a wave in its scope (wave.go)
)

func opFor(v classify.Verdict) settleOp {
	switch v.Class {
	case classify.ClassPermanent:
		return opPermanent
	case classify.ClassSystemic:
		return opSystemic
	case classify.ClassCanceled:
		return opRelease
	}
	if v.ProviderWide {
		return opProviderWide
	}
	return opTransient
}

// minProviderWait is the shortest cooldown a provider's hint sets, so a
// hint of a few milliseconds is not an immediate free retry.
const minProviderWait = time.Second

// opForVerdict is opFor with the gate's options applied.
func (g *Gate) opForVerdict(v classify.Verdict) settleOp {
	op := opFor(v)
	if op == opRelease && g.opts.CanceledCooldown > 0 {
		return opCanceled
	}
	return op
}

// verdict classifies err, and turns a "canceled" verdict into a transient
// one unless the caller's own context was cancelled: only the caller giving
// up releases the job without a cooldown.
func (g *Gate) verdict(parent context.Context, err error) (v classify.Verdict) {
	defer func() {
		if r := recover(); r != nil { // a custom classifier must not crash the settle
			v = classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonUnknown}
		}
	}()
	v = g.opts.Classify(err)
	if v.Class == classify.ClassCanceled && !errors.Is(parent.Err(), context.Canceled) {
		v.Class = classify.ClassTransient
	}
	if v.Class > classify.ClassCanceled {
		v.Class = classify.ClassTransient
	}
	v.Reason = safeReason(v.Reason)
	v.RetryAfter = min(max(v.RetryAfter, 0), classify.MaxHint)
	return v
}

// safeReason keeps reason codes short and free of anything but
// [a-z0-9_.-], since they reach end users and metric labels.
func safeReason(r string) string {
	if r == "" || len(r) > 64 {
		return classify.ReasonUnknown
	}
	for i := 0; i < len(r); i++ {
		c := r[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return classify.ReasonUnknown
		}
	}
	return r
}

// settle records the outcome in Redis once.
func (l *Lease) settle(ctx context.Context, op settleOp, v classify.Verdict) (Result, error) {
	g := l.g
	l.mu.Lock()
	if l.settled {
		l.mu.Unlock()
		return Result{}, ErrAlreadySettled
	}
	l.settled = true
	lost := l.lost
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
	defer g.forget(l)
	if l.cancel != nil {
		defer l.cancel(context.Canceled)
	}
	if l.ungated {
		return Result{State: Ready, Verdict: v}, nil
	}
	if lost && !g.opts.ContinueOnLeaseLost {
		return Result{Verdict: v}, ErrLeaseLost
	}

	// Detached from the caller, so a request that went away still records
	// its outcome; bounded when the client applies context deadlines.
	rctx := context.WithoutCancel(ctx)
	if g.ctxDeadlines {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(rctx, g.opts.Timeout)
		defer cancel()
	}
	var (
		res   Result
		owned bool
		cur   string
		err   error
	)
	if op == opSuccess || op == opRelease {
		res, owned, err = l.releaseRedis(rctx, op)
	} else {
		res, owned, cur, err = l.failRedis(ctx, rctx, op, v)
	}
	res.Verdict = v
	held := time.Since(l.start)
	if err != nil {
		werr := redisError("settle", err)
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Op: redisop.Settle, Err: werr})
		if res.State == CoolingDown || res.State == Failed {
			// The failure is not in Redis: refuse the job here for the
			// cooldown it should have had, so no retry through this
			// process runs early; other processes see the lease's TTL.
			until := time.Now().Add(res.RetryAfter)
			if res.State == Failed {
				until = time.Now().Add(g.opts.FailedTTL)
			}
			g.noteCooling(l.job, coolingHint{value: failedValue(res.State, res.Attempts, v.Reason, l.fence), until: until, local: true})
			g.emit(ctx, Event{Kind: EventWarning, Job: l.job, State: res.State, Fence: l.fence, Attempt: l.attempt,
				Class: v.Class, Reason: WarnSettleUnwritten, Cooldown: time.Until(until), Err: werr})
		}
		return res, werr
	}
	if !owned {
		if g.obs != nil {
			st := Ready
			if cur != "" {
				st, _, _ = stateOf(cur)
			}
			g.emit(ctx, Event{Kind: EventSettled, Job: l.job, State: st, Fence: l.fence, Attempt: l.attempt, Held: held, Err: ErrNotOwned})
		}
		return res, ErrNotOwned
	}
	l.mu.Lock()
	l.result = res
	l.mu.Unlock()
	g.emit(ctx, Event{Kind: EventSettled, Job: l.job, State: res.State, Fence: l.fence, Attempt: l.attempt,
		Class: v.Class, Reason: v.Reason, Held: held, Cooldown: res.RetryAfter})
	return res, nil
}

// releaseRedis frees the lock (or holds it Done) with release.lua.
func (l *Lease) releaseRedis(ctx context.Context, op settleOp) (res Result, owned bool, err error) {
	g := l.g
	done, clear := any(int64(0)), "0"
	if op == opSuccess {
		done = g.argDoneTTL
		if l.attempt > 1 {
			clear = "1"
		}
	}
	if l.probe {
		// The probe's call reached the upstream: open the scope for all.
		if sr := g.updateScope(ctx, scopeUpdate{op: scopeOpen, factor: 1}, "", l.token); sr.err != nil {
			g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Op: redisop.Scope, Err: redisError("scope", sr.err)})
		} else {
			res.Upstream = sr.status
		}
		res.Upstream.Scope = g.opts.Scope
	}
	n, err := g.scripts.release.Run(ctx, g.rdb, l.keys.both[:], l.token, done, clear).Int()
	if err != nil {
		return res, false, err
	}
	switch n { // 0: not owned
	case 1:
		res.State = Ready
	case 2:
		res.State = Done
	}
	return res, n > 0, nil
}

// failRedis records a failure with settle.lua and, on a multi-node client,
// updates the upstream scope on its own slot in parallel. cur is the lock's
// value found when the lock was not owned.
func (l *Lease) failRedis(ctx, rctx context.Context, op settleOp, v classify.Verdict) (res Result, owned bool, cur string, err error) {
	g := l.g
	if op == opPermanent && g.inWave(ctx, rctx, l, v) {
		op = opWave
	}
	w := g.outcome(op, v, l.attempt-1)
	w.value = failedValue(w.state, w.attempts, v.Reason, l.fence)
	w.scope, w.reason = g.scopeUpdateFor(op, v, l.probe), v.Reason
	keys := l.keys.both[:]
	oneScript := w.scope.op != scopeNone && g.oneNode
	var scopeCh chan scopeResult
	switch {
	case oneScript:
		keys = []string{l.keys.lock, l.keys.meta, g.scopeKey, g.scopeFails}
	case w.scope.op != scopeNone:
		scopeCh = make(chan scopeResult, 1)
		go func() { scopeCh <- g.updateScope(rctx, w.scope, v.Reason, l.token) }()
	}
	reply, err := decodeSettle(g.scripts.settle.Run(rctx, g.rdb, keys, l.settleArgs(w.settleWrite, oneScript)...))
	if scopeCh != nil {
		if sr := <-scopeCh; sr.err == nil {
			res.Upstream = sr.status
		} else {
			g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Op: redisop.Scope, Err: redisError("scope", sr.err)})
		}
	}
	if err != nil {
		// What the settle meant to write, for the local refusal.
		res.State, res.Attempts = w.state, w.attempts
		if w.state == CoolingDown {
			res.RetryAfter = w.ttl
		}
		return res, false, "", err
	}
	if oneScript {
		res.Upstream = reply.scope
	}
	res.Upstream.Scope = g.opts.Scope
	if res.Upstream.State != ScopeOpen {
		g.noteScope(res.Upstream.RetryAfter)
		g.emitScope(ctx, l.job, w.scope, res.Upstream, v)
	}
	if !reply.owned {
		return res, false, reply.cur, nil
	}
	res.State, res.Attempts = w.state, w.attempts
	if w.state == CoolingDown {
		res.RetryAfter = w.ttl
	}
	return res, true, "", nil
}

// failure is what a failed call does to its job: settle.lua's write plus
// the state it leads to.
type failure struct {
	settleWrite
	state State
}

// outcome decides what a failure does to its job, given the failures
// counted before this call (read by the acquire; nobody else can change
// them while the lease is held).
func (g *Gate) outcome(op settleOp, v classify.Verdict, before int) failure {
	o := g.opts
	f := failure{state: CoolingDown}
	f.attempts = before
	switch op {
	case opPermanent:
		f.attempts++
		f.counted = true
		f.state, f.ttl = Failed, o.FailedTTL
	case opTransient:
		f.attempts++
		f.counted = true
		if o.MaxAttempts > 0 && f.attempts >= o.MaxAttempts {
			f.state, f.ttl = Failed, o.FailedTTL
			break
		}
		f.ttl = max(v.RetryAfter, g.backoff(f.attempts))
	case opCanceled:
		f.ttl = o.CanceledCooldown
	case opProviderWide:
		// The provider's limits, not the job: no attempt counted, and the
		// wait is the provider's hint when it gave one.
		f.ttl = o.Cooldown
		if g.scopeKey != "" {
			f.ttl = o.ScopePolicy.Cooldown
		}
		if v.RetryAfter > 0 {
			f.ttl = max(v.RetryAfter, minProviderWait)
		}
	default: // opSystemic, opWave: not the job's fault, no attempt counted
		f.ttl = max(v.RetryAfter, o.Cooldown)
	}
	if f.state == CoolingDown {
		f.ttl = min(f.ttl, o.MaxCooldown)
	}
	f.ttl = max(f.ttl, time.Millisecond)
	f.metaTTL = f.ttl + o.AttemptsTTL
	return f
}

// backoff is the cooldown of the n-th counted failure in a row:
// Cooldown × BackoffFactor^(n-1), spread by ± Jitter, at most MaxCooldown.
func (g *Gate) backoff(n int) time.Duration {
	o := g.opts
	d := float64(o.Cooldown) * math.Pow(o.BackoffFactor, float64(n-1))
	if o.Jitter > 0 {
		d *= 1 + o.Jitter*(2*rand.Float64()-1)
	}
	if d >= float64(o.MaxCooldown) {
		return o.MaxCooldown
	}
	return time.Duration(d)
}
