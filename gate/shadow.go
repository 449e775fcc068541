package gate

import (
	"context"
	"errors"
)

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
