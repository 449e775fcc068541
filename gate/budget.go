package gate

import (
	"context"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/gate/internal/upstream"
	"github.com/retrygate/retrygate/internal/redisop"
)

// The upstream's budget is what its provider reports of its rate limits on
// every response. It is shared in Redis (gate/internal/upstream,
// budget.go). It is judged before every call.

// What admission keeps unspent of each limit a provider reports:
//   - one request. Then the estimate's rounding does not earn a 429, nor
//     does a call that reached the provider before its reading was
//     written;
//   - for a call that does not say its tokens (WithTokens), 1 % of the
//     token limit. It stands in for the tokens until a cost is learned.
//     Then it is the least kept for a call larger than the learned cost
//     (gate/internal/store, budget_cost.lua).
const (
	budgetReserveRequests = 1
	budgetReserveTokens   = 0.01
)

// learnKeep is how long an upstream keeps what it learned of a provider
// that reports no budget: that it sends none, and its rate. It counts
// from its last call's settle, as the call durations are kept. A queue's
// quiet hours do not start it over one call at a time.
const learnKeep = 24 * time.Hour

// teaches is what a run's end teaches its upstream's learned rate, when
// its responses reported no budget:
//   - a success is a call the provider accepted;
//   - a provider-wide rate limit is one it refused (rate);
//   - any other failure teaches only that no budget came back.
//
// ok is false for a run that was released or cancelled.
func teaches(out outcome, v classify.Verdict) (a store.Answer, rate, ok bool) {
	switch {
	case out == outSuccess:
		return store.AnswerAccepted, false, true
	case out == outFailure && v.ProviderWide && v.Reason == classify.ReasonRateLimited:
		return store.AnswerRefused, true, true
	case out == outFailure:
		return store.AnswerOther, false, true
	}
	return 0, false, false
}

// tokensKey is the context key of WithTokens.
type tokensKey struct{}

// WithTokens returns a copy of ctx that says the call will spend tokens
// of its upstream's token limit. Count its prompt and its max_tokens, as
// the provider counts them. Acquire, Do and Call read it, and so do
// middleware and adapters that acquire with the caller's context.
//
// The acquire reserves the tokens in the upstream's budget in the same
// step as its admission. So concurrent processes cannot all see enough
// tokens left and overshoot together. The settle releases them. The
// response's reading says what the call spent.
//
// Without WithTokens, a call is judged at what the upstream's calls were
// learned to cost. That cost comes from the drop in what is left across
// the calls answered, shared in Redis. Until it is learned, 1 % of the
// token limit stands in. A negative count is read as 0.
func WithTokens(ctx context.Context, tokens int64) context.Context {
	return context.WithValue(ctx, tokensKey{}, max(tokens, 0))
}

// tokensOf is what WithTokens put on ctx, 0 for none.
func tokensOf(ctx context.Context) int64 {
	n, _ := ctx.Value(tokensKey{}).(int64)
	return n
}

// budgetPolicy is the upstreams' budget policy for options o.
func budgetPolicy(o Options) upstream.BudgetPolicy {
	return upstream.BudgetPolicy{
		Off:     o.UpstreamPolicy.IgnoreBudget,
		Reserve: store.BudgetReserve{Requests: budgetReserveRequests, TokenShare: budgetReserveTokens},
		// A budget past its reset says only that the limit is whole. It
		// is kept a lease longer, so the calls it admitted have settled.
		Margin: o.Lease,
	}
}

// budgetContext is the context fn runs under, from ctx. A
// classify.Transport under it reports every response's budget to the
// lease. That holds when the run uses an upstream and budgets are on.
func (g *Gate) budgetContext(ctx context.Context, l *Lease) context.Context {
	if !l.up.Guarded() || g.opts.UpstreamPolicy.IgnoreBudget {
		return ctx
	}
	return classify.WithBudgetFunc(ctx, l.observe)
}

// observe keeps what a response said of the budget for the settle to
// write. A run whose upstream had no budget at its acquire writes its
// first reading at once. It does so in a round trip of its own, off the
// caller's path. Until then every process's calls go unjudged, and a call
// may take seconds to settle.
func (l *Lease) observe(b classify.Budget) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.settled {
		return // written already, or never
	}
	l.seen.Observe(b)
	if l.up.Unjudged() && !l.early {
		l.early = true
		l.writing.Add(1) // before the settle's Wait: settled is set under mu first
		go l.writeEarly()
	}
}

// writeEarly writes what the run's responses said so far to its
// upstream's budget. The settle waits for it.
func (l *Lease) writeEarly() {
	defer l.writing.Done()
	g := l.g
	ctx, cancel := g.opCtx(l.parent)
	defer cancel()
	t := g.store.Trip()
	r := l.up.Early(ctx, &t, &l.seen, time.Now())
	t.Send(ctx)
	if err := r.Err(); err != nil {
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Upstream: l.up.Name(), Op: redisop.Upstream, Err: redisError(ctx, "budget", err)})
	}
}

// ObserveBudget tells the lease's upstream what a response said of the
// provider's rate limits. Use it for a client whose requests do not go
// through classify.Transport. A Transport reports every response under
// Lease.Context by itself.
//
//	if b, ok := classify.ParseBudget(resp.Header, time.Now()); ok {
//		lease.ObserveBudget(b)
//	}
//
// The settle writes the newest reading of each limit to the upstream in
// Redis. Every process's next acquire judges by it. The first reading of
// an upstream with no budget is written at once. ObserveBudget is safe
// for concurrent use. It does nothing with UpstreamPolicy.Off or
// UpstreamPolicy.IgnoreBudget, or once the lease is settled.
func (l *Lease) ObserveBudget(b classify.Budget) {
	if l.up.Guarded() && !l.g.opts.UpstreamPolicy.IgnoreBudget {
		l.observe(b)
	}
}

// release gives back the call an acquire reserved in its upstream's
// budget. It is for an acquire refused after the reservation without
// taking the job. It costs one round trip, only then.
func (g *Gate) release(ctx context.Context, l *grant, j upstream.Judgement) {
	rctx, cancel := g.opCtx(ctx)
	defer cancel()
	t := g.store.Trip()
	r := j.Release(rctx, &t)
	t.Send(rctx)
	if err := r.Err(); err != nil {
		g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Op: redisop.Upstream, Err: redisError(rctx, "budget", err)})
	}
}

// budgetWait is the wait the run's last response gives for one more
// call, for a provider-wide failure whose hint is hint. It is the wait
// the response's message stated. Else it is the shorter of the hint and
// the budget's refill of one call (its request and tokens). A reset
// header says when the limit is whole again. That can be a minute at a
// per-minute limit, when one call fits in milliseconds. It is 0 when the
// run saw no budget, or one that says the call fits already.
func (l *Lease) budgetWait(hint time.Duration) time.Duration {
	w, stated, ok := l.seen.Fits(time.Now(), l.tokens, budgetReserveTokens)
	switch {
	case !ok:
		return 0
	case stated || hint <= 0:
		return w
	}
	return min(w, hint)
}
