package gate

import (
	"context"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/keyspace"
)

// How often the Done mark of a success Redis did not take is written
// again: soon after the failure, then backing off, at most this often.
const (
	rewriteFirst = 50 * time.Millisecond
	rewriteMax   = time.Second
)

// rewrite writes again the Done mark w of a success whose settle Redis
// did not take, while f holds the job Done in this process: backing off,
// until Redis takes it, the hold ends or is dropped (a Reset). Its lease
// may have expired meanwhile, so the mark is written on a key that is
// gone too (store.Settlement.Late); the settle still compares the token,
// so a newer owner's value is never overwritten: that value ends the hold
// and rules here too.
func (l *Lease) rewrite(ctx context.Context, f *unwrittenFailure, w jobWrite, held time.Duration) {
	g := l.g
	ctx = context.WithoutCancel(ctx)
	s := w.settlement()
	s.Late = true
	wait := rewriteFirst
	for {
		time.Sleep(wait)
		wait = min(2*wait, rewriteMax)
		left := time.Until(f.until)
		if left < time.Millisecond || !g.unwritten.held(l.job, f, false) {
			return
		}
		s.TTL = left
		rctx, cancel := context.WithTimeout(ctx, g.opts.Redis.Timeout)
		t := g.store.Trip()
		t.MarkDone(rctx, keyspace.Done(g.opts.Prefix, l.job), l.token)
		settled := t.Settle(rctx, l.key, l.token, l.fence, s)
		t.Send(rctx)
		rep, err := settled.Result()
		cancel()
		switch {
		case err != nil:
			continue
		case rep.Owned || (rep.Found.Kind == store.Done && rep.Found.Fence == l.fence):
			// Written now, or by the first settle whose reply was lost.
			g.emit(ctx, Event{Kind: EventSettled, Job: l.job, Upstream: l.Upstream(), State: Done, Fence: l.fence, Attempt: l.attempt, Held: held})
		default:
			g.unwritten.held(l.job, f, true)
			st := Ready
			if !rep.Gone {
				st = heldState(rep.Found)
			}
			g.emit(ctx, Event{Kind: EventSettled, Job: l.job, Upstream: l.Upstream(), State: st,
				Fence: l.fence, Attempt: l.attempt, Held: held, Err: ErrNotOwned})
		}
		return
	}
}
