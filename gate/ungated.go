package gate

import (
	"context"
	"errors"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/redisop"
)

// A call runs ungated, on a lease that holds nothing in Redis, through
// two doors only: Redis.FailOpen, when Redis did not answer its acquire
// (unreached), and Options.Shadow, when the gate refused it or could not
// judge it (shadowed). Both report why first.

// ungated is a lease that holds nothing in Redis: its settle writes
// nothing (Lease.Gated reports false).
func (g *Gate) ungated(ctx context.Context, gr grant) *Lease {
	l := &Lease{grant: gr, g: g, parent: ctx, ungated: true, start: time.Now()}
	l.ctx, l.cancel = context.WithCancelCause(context.WithValue(ctx, leaseKey{}, l))
	return l
}

// unreached handles an acquire that Redis did not answer: the caller's
// context ended, Redis failed, or (Redis.FailOpen) fn runs ungated.
func (g *Gate) unreached(ctx context.Context, gr *grant, err error) (*Lease, error) {
	werr := redisError(ctx, "acquire", err)
	if ctx.Err() != nil {
		// The caller gave up (or its deadline passed) before Redis
		// answered: its error, not an outage, and too late to fail open.
		return nil, werr
	}
	g.emit(ctx, Event{Kind: EventRedisError, Job: gr.job, Op: redisop.Acquire, Err: werr})
	if !g.opts.Redis.FailOpen || store.Reached(err) {
		return nil, werr
	}
	// Still merged in-process: Redis being down must not turn every local
	// duplicate into a model call.
	l := g.ungated(ctx, grant{job: gr.job, key: gr.key, token: gr.token, attempt: 1})
	g.emit(ctx, Event{Kind: EventFailOpen, Job: l.job, Err: werr})
	return l, nil
}

// shadowed lets a call through that the gate refused, or could not judge
// for want of Redis (Options.Shadow): the refusal was reported, and the
// call runs on a lease that writes nothing. Bad input and the caller's
// own context still end the call. key is the job's key (jobKey).
func (g *Gate) shadowed(ctx context.Context, job, key string, err error) (*Lease, error) {
	var b *BlockedError
	if ctx.Err() != nil || !(errors.As(err, &b) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrRedisRefused)) {
		return nil, err
	}
	return g.ungated(ctx, grant{job: job, key: key, attempt: 1}), nil
}
