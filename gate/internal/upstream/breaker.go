package upstream

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/keyspace"
)

// Policy tunes every upstream's breaker.
type Policy struct {
	// AllowedFails: how many other 5xx failures an upstream tolerates
	// inside FailWindow. One more cools it.
	AllowedFails int
	FailWindow   time.Duration
	// PermanentWave: how many distinct jobs failing permanently with one
	// reason within FailWindow make a wave (≤ 0: off).
	PermanentWave int
	// UnreachableJobs: how many distinct jobs whose calls could not reach
	// the upstream's address within FailWindow cool it (≤ 0: off).
	UnreachableJobs int
	// Budget: admission by the provider's reported rate limits.
	Budget BudgetPolicy
}

// Breaker is one upstream's breaker: a guarded upstream in Redis, or Free.
type Breaker interface {
	// Name names the upstream ("" for Free).
	Name() string

	key() string // "" for Free: nothing to read
	judge(v store.Upstream, now int64) (Permit, Status)
	remember(st Status)
	forget()
	knownRefusing() bool
	claim(ctx context.Context, s *store.Store, token store.Token) (store.Claim, error)
	unclaim(ctx context.Context, t *store.Trip, token store.Token) store.Reply[bool]
	record(ctx context.Context, t *store.Trip, w Write, token store.Token) Record
	recorded(ctx context.Context, s *store.Store, r Record, token store.Token) (store.Stopped, error)
	wave(ctx context.Context, s *store.Store, reason, job string) (in, started bool, err error)
	reset(ctx context.Context, s *store.Store) error
}

// Free is the breaker of a gate without an upstream. It always permits,
// reads nothing and writes nothing.
type Free struct{}

func (Free) Name() string                                 { return "" }
func (Free) key() string                                  { return "" }
func (Free) judge(store.Upstream, int64) (Permit, Status) { return Permitted, Status{} }
func (Free) remember(Status)                              {}
func (Free) forget()                                      {}
func (Free) knownRefusing() bool                          { return false }
func (Free) wave(context.Context, *store.Store, string, string) (bool, bool, error) {
	return false, false, nil
}
func (Free) reset(context.Context, *store.Store) error { return nil }
func (Free) claim(context.Context, *store.Store, store.Token) (store.Claim, error) {
	return store.Claim{Ready: true}, nil
}
func (Free) unclaim(context.Context, *store.Trip, store.Token) store.Reply[bool] {
	return store.Reply[bool]{}
}
func (Free) record(_ context.Context, _ *store.Trip, w Write, _ store.Token) Record { return Record{} }
func (Free) recorded(context.Context, *store.Store, Record, store.Token) (store.Stopped, error) {
	return store.Stopped{}, nil
}

// guarded is an upstream's breaker in Redis (store's upstream
// operations, keyspace.Upstream's keys).
type guarded struct {
	name        string
	prefix      string
	k, fails    string
	unreachable string // distinct jobs that could not reach its address
	bk          store.BudgetKeys
	policy      Policy

	// refusingUntil (unix ns, local clock) is when the refusal this
	// process last read from the upstream ends. Until then an acquire
	// that finds every upstream so only reads them, with Redis's clock
	// (Set.PeekKnown). It writes nothing. It picks the path, never the
	// answer. The answer always comes from what Redis holds now.
	refusingUntil atomic.Int64
	// spentUntil (unix ns, local clock) is when the budget's refusal this
	// process last read ends. With refusingUntil it picks where a
	// cluster's acquire asks to reserve its call (Set.Admissions).
	spentUntil atomic.Int64
}

func newGuarded(prefix, name string, p Policy) *guarded {
	k, fails := keyspace.Upstream(prefix, name)
	return &guarded{name: name, prefix: prefix, k: k, fails: fails, unreachable: keyspace.Unreachable(prefix, name),
		bk: budgetKeys(prefix, name, k), policy: p}
}

func (b *guarded) Name() string { return b.name }
func (b *guarded) key() string  { return b.k }

func (b *guarded) judge(v store.Upstream, now int64) (Permit, Status) {
	return stateOf(v).judge(b.name, now)
}

// remember notes that the upstream refuses for st.RetryAfter.
func (b *guarded) remember(st Status) {
	b.refusingUntil.Store(time.Now().Add(st.RetryAfter).UnixNano())
}

// forget notes that the upstream was seen not refusing.
func (b *guarded) forget() {
	if b.refusingUntil.Load() != 0 {
		b.refusingUntil.Store(0)
	}
}

// knownRefusing reports whether this process last saw the upstream refuse
// and that refusal has not ended by the local clock.
func (b *guarded) knownRefusing() bool {
	return time.Now().UnixNano() < b.refusingUntil.Load()
}

// claim asks for the probe. A ready reply lets the call run as usual:
// the key expired meanwhile.
func (b *guarded) claim(ctx context.Context, s *store.Store, token store.Token) (store.Claim, error) {
	t := s.Trip()
	c := t.Claim(ctx, b.k, token)
	t.Send(ctx)
	return c.Result()
}

// unclaim queues on t the give-back of the probe token claimed.
func (b *guarded) unclaim(ctx context.Context, t *store.Trip, token store.Token) store.Reply[bool] {
	return t.CancelProbe(ctx, b.k, token)
}

// Op is what a run's end does to its upstream.
type Op uint8

const (
	Keep      Op = iota // nothing
	Recover             // the probe's call reached the upstream: make it ready
	Unclaim             // the probe's call did not reach it: the next call probes
	Throttle            // a provider-wide transient failure cools it
	Suspend             // a provider-wide systemic failure, or a wave, pauses it
	Count               // one more 5xx in its window
	Unreached           // one more distinct job whose call could not reach its address
)

// Write is what a run's end does to its upstream (the gate's decision).
type Write struct {
	Op     Op
	TTL    time.Duration // Throttle, Suspend; Count and Unreached when they cool it
	Reason string
	// Job is the job that could not reach the upstream (Unreached). A job
	// failing again counts once.
	Job string
}

// Record is a run's end queued on a trip.
type Record struct {
	w       Write
	stopped store.Reply[store.Stopped] // Throttle, Suspend
	count   store.Reply[int64]         // Count, Unreached
	done    store.Reply[bool]          // Recover, Unclaim
}

func (b *guarded) record(ctx context.Context, t *store.Trip, w Write, token store.Token) Record {
	r := Record{w: w}
	switch w.Op {
	case Recover:
		r.done = t.RecoverUpstream(ctx, b.k, token)
	case Unclaim:
		r.done = t.CancelProbe(ctx, b.k, token)
	case Throttle:
		r.stopped = t.StopUpstream(ctx, b.k, token, store.Stop{Reason: w.Reason, TTL: w.TTL})
	case Suspend:
		// A pause for a wave's reason starts its count anew.
		r.stopped = t.StopUpstream(ctx, b.k, token, store.Stop{Pause: true, Reason: w.Reason, TTL: w.TTL,
			Clear: keyspace.Wave(b.prefix, b.name, w.Reason)})
	case Count:
		r.count = t.Count(ctx, b.fails, token.Token, b.policy.FailWindow)
	case Unreached:
		if b.policy.UnreachableJobs > 0 {
			r.count = t.Count(ctx, b.unreachable, w.Job, b.policy.FailWindow)
		}
	}
	return r
}

// recorded decodes what record sent. A 5xx that fills the window past
// AllowedFails, or the UnreachableJobs-th distinct job that could not
// reach the upstream, cools it, in one more round trip.
func (b *guarded) recorded(ctx context.Context, s *store.Store, r Record, token store.Token) (store.Stopped, error) {
	var window string
	var limit int64
	switch r.w.Op {
	case Throttle, Suspend:
		return r.stopped.Result()
	case Count:
		window, limit = b.fails, max(int64(b.policy.AllowedFails)+1, 1)
	case Unreached:
		if b.policy.UnreachableJobs <= 0 {
			return store.Stopped{}, nil
		}
		window, limit = b.unreachable, int64(b.policy.UnreachableJobs)
	}
	if window != "" {
		n, err := r.count.Result()
		if err != nil || n < limit {
			return store.Stopped{}, err
		}
		t := s.Trip()
		stopped := t.StopUpstream(ctx, b.k, token, store.Stop{Reason: r.w.Reason, TTL: r.w.TTL, Clear: window})
		t.Send(ctx)
		return stopped.Result()
	}
	return store.Stopped{}, r.done.Err()
}

// wave reports whether a permanent failure of job with reason is part of a
// wave in the upstream. A wave is PermanentWave distinct jobs failing with
// it within FailWindow. The upstream already paused (or probing) for it
// is one too. started is set for the failure that fills the window. One
// round trip.
func (b *guarded) wave(ctx context.Context, s *store.Store, reason, job string) (in, started bool, err error) {
	if b.policy.PermanentWave <= 0 {
		return false, false, nil
	}
	// The count and the upstream's value are read in one step: the pause
	// that a wave starts clears its count, and a count after that clear
	// read beside a value from before it is a job Failed in a wave.
	t := s.Trip()
	count := t.CountWave(ctx, keyspace.Wave(b.prefix, b.name, reason), b.k, job, b.policy.FailWindow)
	t.Send(ctx)
	w, err := count.Result()
	if err != nil {
		return false, false, err
	}
	n, u := w.N, w.Upstream
	if (u.Mode == store.ModePaused || u.Mode == store.ModeProbing) && u.Reason == reason {
		return true, false, nil
	}
	size := int64(b.policy.PermanentWave)
	return n >= size, n == size, nil
}

// reset ends the upstream's cooldown or pause. It clears its failure
// windows and forgets the rate learned of its provider. It costs one
// round trip on one node.
func (b *guarded) reset(ctx context.Context, s *store.Store) error {
	t := s.Trip()
	r := t.ResetUpstream(ctx, b.k, b.fails, b.unreachable)
	learned := t.ForgetLearned(ctx, b.bk)
	t.Send(ctx)
	if err := r.Err(); err != nil {
		return err
	}
	if err := learned.Err(); err != nil {
		return err
	}
	b.forget()
	return nil
}
