package line

import (
	"context"
	"time"

	"github.com/retrygate/retrygate/gate/internal/hub"
	"github.com/retrygate/retrygate/gate/internal/store"
)

// The collector: one goroutine per line and process while any of its
// callers wait. A turn given to one of them lands on the process's list
// of grants and is published there; the hub wakes the collector, which
// takes the list in one round trip and wakes each caller whose turn came.
// Where the hub cannot subscribe it polls, as the hub asks its listeners
// to. Every Lease/3 it renews the process's lease, which keeps all its
// places, in the same round trip. Places dropped (the lease ended in a
// pause, the line was lost to a Redis restart or a failover) show as a
// new token for the process, or none: its callers join again, in their
// classes and tenants, before their deadlines.

func (l *Line) collector(ctx context.Context) {
	ln := l.h.Listen(l.keys.GrantsOf(l.owner))
	defer ln.Close()
	renew := time.NewTicker(l.cfg.Lease / 3)
	defer renew.Stop()
	poll := hub.PollMin
	collect, renewing := true, false
	for {
		// After Ready, a turn given is either pushed or in what is read.
		push := ln.Ready(ctx, l.cfg.Timeout)
		if collect || renewing {
			// One that failed (Redis out of reach: a restart, a cluster
			// down) is tried again by polling, not left to the next wake:
			// turns given meanwhile were published to nobody.
			push = l.collect(ctx, renewing) && push
		}
		if l.idle() {
			return
		}
		var tick <-chan time.Time
		var t *time.Timer
		if push {
			poll = hub.PollMin
		} else {
			t = time.NewTimer(poll)
			tick = t.C
			poll = min(2*poll, hub.PollMax)
		}
		collect, renewing = false, false
		select {
		case <-ln.Wake():
			collect = true
		case <-tick:
			collect = true
		case <-renew.C:
			renewing = true
		case <-l.check:
			collect = true
		case <-l.kick:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// idle stops the collector when nobody waits.
func (l *Line) idle() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waiting) > 0 {
		return false
	}
	l.running = false
	return true
}

// collect takes the turns given to this process's callers and wakes
// them; with renew, it first renews the process's lease. Callers whose
// places were dropped join again. It reports whether Redis answered.
func (l *Line) collect(ctx context.Context, renew bool) bool {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	tr := l.st.Trip()
	if renew {
		tr.RenewLine(ctx, l.keys, l.owner, l.cfg.Lease, l.cfg.keep())
	}
	cr := tr.CollectLine(ctx, l.keys, l.owner)
	tr.Send(ctx)
	c, err := cr.Result()
	if err != nil {
		return false // the next poll tries again
	}
	return l.collected(ctx, c)
}

// collected wakes the callers whose turns c holds, passes on the turns
// nobody here can use, and puts callers whose places were dropped back in
// line. It reports whether Redis answered.
func (l *Line) collected(ctx context.Context, c store.LineCollected) bool {
	return l.settle(ctx, l.wake(c))
}

// woken is what a collection leaves to do in Redis: the turns to pass on,
// the callers to put back in line.
type woken struct {
	pass []string
	lost []*waiter
}

// wake wakes the callers whose turns c holds, and returns the rest.
func (l *Line) wake(c store.LineCollected) woken {
	now := time.Now()
	var lost []*waiter
	var unused []string
	l.mu.Lock()
	l.token = c.Token
	for _, m := range c.Granted {
		if w := l.waiting[m]; w != nil {
			delete(l.waiting, m)
			close(w.granted)
		} else if _, ok := l.leaving[m]; ok {
			delete(l.leaving, m)
			unused = append(unused, m)
		} else if _, ok := l.taken[m]; ok {
			delete(l.taken, m) // used in its caller's join
		} else if l.joining > 0 {
			l.early[m] = now
		} else {
			unused = append(unused, m)
		}
	}
	for m, t := range l.early {
		if now.Sub(t) > l.cfg.Lease {
			delete(l.early, m)
			unused = append(unused, m)
		}
	}
	for m, t := range l.leaving {
		if now.Sub(t) > l.cfg.Lease {
			delete(l.leaving, m)
		}
	}
	for m, t := range l.taken {
		if now.Sub(t) > l.cfg.Lease {
			delete(l.taken, m) // its collection was lost
		}
	}
	for _, w := range l.waiting {
		// One past its deadline is left to its Wait, which returns now;
		// one whose rejoin is in flight, to that rejoin.
		if w.token != c.Token && now.Before(w.deadline) && !w.rejoining {
			w.rejoining = true
			lost = append(lost, w)
		}
	}
	l.mu.Unlock()
	return woken{pass: unused, lost: lost}
}

// settle passes on the turns nobody here can use and puts the callers
// whose places were dropped back in line. It reports whether Redis
// answered the rejoin.
func (l *Line) settle(ctx context.Context, w woken) bool {
	if len(w.pass) > 0 { // to the next in line
		_ = l.pass(ctx, w.pass)
	}
	if len(w.lost) > 0 {
		return l.rejoin(ctx, w.lost)
	}
	return true
}

// rejoin puts callers whose places were lost back in line, in one round
// trip. It reports whether each join was answered (one that was not is
// tried again at the next collection). Each caller has one rejoin in
// flight at a time (wake): after a line is lost, every join's collection
// and the collector find the same callers lost, and a rejoin of each
// would put every caller in line once per collection until the extra
// places left, inflating the places ahead that a join judges a deadline
// by (4 places a caller, and waits told 3 to 4 times too long, after a
// cluster master's restart in a storm).
func (l *Line) rejoin(ctx context.Context, ws []*waiter) bool {
	now := time.Now()
	// Each place as it was lost: the caller may leave, or a turn come to
	// its old place, meanwhile; a caller still waiting takes its new place.
	was := make([]string, len(ws))
	l.mu.Lock()
	for i, w := range ws {
		was[i] = w.member
	}
	l.mu.Unlock()
	tr := l.st.Trip()
	rs := make([]store.Reply[store.LineJoined], len(ws))
	for i, w := range ws {
		j := l.join(w, max(w.deadline.Sub(now), 0), 0)
		j.Again = was[i] // at its first arrival
		rs[i] = tr.JoinLine(ctx, l.keys, j)
	}
	tr.Send(ctx)
	var orphans []string
	answered := true
	l.mu.Lock()
	for i, w := range ws {
		w.rejoining = false
		j, err := rs[i].Result()
		if err != nil {
			answered = false
			continue
		}
		if !j.Joined {
			continue
		}
		if w.done || isClosed(w.granted) {
			// It left, or had its turn, meanwhile: this new place goes.
			orphans = append(orphans, j.Member)
			continue
		}
		delete(l.waiting, w.member)
		w.member, w.token = j.Member, j.Token
		l.token = j.Token
		l.registerLocked(ctx, w)
	}
	l.mu.Unlock()
	if len(orphans) > 0 {
		tr := l.st.Trip()
		for _, m := range orphans {
			tr.LeaveLine(ctx, l.keys, l.owner, m)
		}
		tr.Send(ctx)
	}
	return answered
}
