package gate

import (
	"context"
	"time"

	"github.com/retrygate/retrygate/gate/internal/hub"
)

// Watch reports a job's status, read with Status, on the returned channel:
// at once, and again after each change, made by any process, until ctx
// ends; the channel is then closed. A change is a new state, attempt count,
// reason, fence or upstream state: a settle, a reset (Reset, the
// CLI), an undo, an upstream cooling, pausing or being reset, and the end of a
// cooldown, a lease, a done or failed mark or an upstream cooldown, which
// Redis does not announce, so Watch reads again when the TTL it last read
// ends. An acquire is not announced (only settles publish, so a call that
// succeeds pays one publish): a new lease shows when it settles, or when
// Watch reads for another reason. A renewal is no change.
//
// Changes are pushed as AcquireWait's wake-ups are (Redis pub/sub on the
// job's and the upstreams' channels, shared with the Gate's waiters), within
// a round trip of the change; where subscribing fails Watch polls, up to
// once a second, after an EventWarning. The channel holds the latest
// status only: a reader that falls behind skips to the newest. A failed
// first read is returned as the error; later failed reads are retried.
func (g *Gate) Watch(ctx context.Context, job string) (<-chan Status, error) {
	key, err := g.jobKey(job)
	if err != nil {
		return nil, err
	}
	names := append([]string{key}, g.ups.Keys()...)
	ln := g.hub.Listen(names...)
	push := ln.Ready(ctx, g.opts.Redis.Timeout)
	st, err := g.Status(ctx, job)
	if err != nil {
		ln.Close()
		return nil, err
	}
	out := make(chan Status, 1)
	out <- st
	go g.watch(ctx, job, ln, st, push, out)
	return out, nil
}

func (g *Gate) watch(ctx context.Context, job string, ln *hub.Listener, last Status, push bool, out chan Status) {
	defer close(out)
	defer ln.Close()
	poll := hub.PollMin
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		step, ok := nextExpiry(last)
		if !ok {
			step = time.Hour
		}
		if last.InLine {
			step = min(step, placeEvery)
		}
		// A job state read with no time left (its key's last millisecond,
		// where PTTL reads 0, or a key without a TTL, which the gate never
		// writes) ends unannounced, any moment: poll for it as without a
		// subscription.
		if push && (ok || last.State == Ready) {
			poll = hub.PollMin
		} else {
			step = min(step, poll)
			poll = min(2*poll, hub.PollMax)
		}
		t.Reset(step)
		select {
		case <-ln.Wake():
		case <-t.C:
		case <-ctx.Done():
			return
		}
		within := g.opts.Redis.Timeout
		if !push {
			within = min(within, poll)
		}
		push = ln.Ready(ctx, within)
		st, err := g.Status(ctx, job)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			push = false // read again after a backoff
			continue
		}
		if changed(last, st) {
			select {
			case out <- st:
			default: // the reader is behind: replace what it has not read
				select {
				case <-out:
				default:
				}
				out <- st
			}
		}
		last = st
	}
}

// placeEvery is how often Watch reads again the place of a job whose
// caller waits in line. A place changes at every turn the line gives, for
// every caller behind it: announcing each would cost a read per watcher
// per turn (at a provider's 10 calls a second, ten times what this costs),
// to move a countdown a page already runs between reads.
const placeEvery = time.Second

// nextExpiry is when the state last read ends by itself: a cooldown, a
// lease, a done or failed mark, an upstream cooldown or pause; false if never.
func nextExpiry(st Status) (time.Duration, bool) {
	var d time.Duration
	waits := []time.Duration{st.RetryAfter, st.TTL}
	for _, u := range st.Upstreams {
		waits = append(waits, u.RetryAfter)
	}
	for _, c := range waits {
		if c > 0 && (d == 0 || c < d) {
			d = c
		}
	}
	// A little past the TTL, so the read finds the key gone.
	return d + 2*time.Millisecond, d > 0
}

// changed reports a change a person watching the job would see.
func changed(a, b Status) bool {
	if a.State != b.State || a.Attempts != b.Attempts || a.Reason != b.Reason || a.Fence != b.Fence ||
		a.InLine != b.InLine || a.Ahead != b.Ahead || len(a.Upstreams) != len(b.Upstreams) {
		return true
	}
	for i, u := range a.Upstreams {
		v := b.Upstreams[i]
		if u.State != v.State || u.Reason != v.Reason || u.Probing != v.Probing {
			return true
		}
	}
	return false
}
