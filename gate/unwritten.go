package gate

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/keyspace"
)

// How often the Done mark of a success Redis did not take is written
// again. The first write again comes soon after the failure. Then the
// writes back off, up to rewriteMax apart. A write that timed out is sent
// again at once.
const (
	rewriteFirst = 50 * time.Millisecond
	rewriteMax   = time.Second
)

// rewrite writes again the Done mark w of a success whose settle Redis
// did not take. Meanwhile f keeps the job Done in this process. It backs
// off from quick failures. After a write that timed out it writes again
// at once, so one write is in flight. It stops when Redis takes the mark,
// or when f ends or is dropped (a Reset).
//
// The lease may have expired meanwhile. So the mark is written on a key
// that is gone too (store.Settlement.Late). The settle still compares the
// token: a newer owner's value is never overwritten. A newer run's
// outcome (done, cooling, failed) or its renewal ends f and rules here
// too. A running value no renewal wrote to does not (unrenewed).
func (l *Lease) rewrite(ctx context.Context, f *unwrittenOutcome, w jobWrite, held time.Duration) {
	g := l.g
	defer g.rewriting.Done()
	ctx = context.WithoutCancel(ctx)
	s := w.settlement()
	s.Late = true
	wait := rewriteFirst
	for sleep := wait; ; {
		time.Sleep(sleep)
		left := time.Until(f.until)
		if left < time.Millisecond || !g.unwritten.current(l.job, f, false) {
			return
		}
		s.TTL = left
		rctx, cancel := context.WithTimeout(ctx, g.opts.Redis.Timeout)
		t := g.store.Trip()
		t.MarkDone(rctx, keyspace.Done(l.key), l.token, l.fence)
		settled := t.Settle(rctx, l.key, l.token, l.fence, s)
		t.Send(rctx)
		rep, err := settled.Result()
		timedOut := rctx.Err() != nil || isTimeout(err)
		cancel()
		switch {
		case err != nil && timedOut:
			// Not answered in time: Redis is paused or out of reach. The
			// write was the wait. It is sent again at once, so one is in
			// flight when Redis answers again. It then reaches Redis
			// before the acquires sent after it.
			sleep = 0
			continue
		case err != nil, !rep.Gone && unrenewed(rep.Found):
			wait = min(2*wait, rewriteMax)
			sleep = wait
			continue
		case rep.Owned || (rep.Found.Kind == store.Done && rep.Found.Fence == l.fence):
			// Written now, or by the first settle whose reply was lost.
			g.emit(ctx, Event{Kind: EventSettled, Job: l.job, Upstream: l.Upstream(), State: Done, Fence: l.fence, Attempt: l.attempt, Held: held})
		default:
			g.unwritten.current(l.job, f, true)
			st := Ready
			if !rep.Gone {
				st = kindState(rep.Found)
			}
			g.emit(ctx, Event{Kind: EventSettled, Job: l.job, Upstream: l.Upstream(), State: st,
				Fence: l.fence, Attempt: l.attempt, Held: held, Err: ErrNotOwned})
		}
		return
	}
}

// Close writes what the gate still keeps for Redis before its process
// exits. Call it in the shutdown path after the last call has ended.
//
// What the gate keeps are the done marks (Retention.Done) of successes
// Redis did not take when they settled. This process alone remembers
// them. Close returns nil once each is written or no longer needed: a
// newer run, a Reset, the Retention.Done over. It returns ctx's error when
// ctx ends first. Those successes may then run again. Close does not close
// the client.
func (g *Gate) Close(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		g.rewriting.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctxError(ctx, "close: successes not yet written to Redis")
	}
}

// isTimeout reports whether err is a network timeout: the client's own
// read or write deadline passed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// unrenewed reports whether j is a running value no renewal wrote to.
// Such a value is an acquire's. Redis may have served that acquire after
// its caller gave up: sent while Redis was paused, run when it resumed.
// It runs nothing and is given back or expires with its lease. A run that
// renewed is alive, and a newer owner. A success written late once that
// run is gone could mark done a job whose result a fencing store refused.
func unrenewed(j store.Job) bool { return j.Kind == store.Running && j.Taken }
