package limitstorm

import (
	"context"
	"sync"
	"time"

	"github.com/retrygate/retrygate/gate"
)

// A call in line is answered by its deadline (gate.Options.Wait) plus
// however late the Go runtime's own timers are then: the gate's timer
// for the deadline is one of them, and a process the machine does not
// schedule wakes none. So each process of a storm runs a canary, a
// goroutine that sleeps canaryPeriod at a time and records how late each
// wake-up is, and each answer past its deadline is judged against the
// canary's lateness at that moment (Late.Excess).

// canaryPeriod is each canary goroutine's sleep: a stall longer than it
// delays one of its wake-ups by at least the stall less canaryPeriod.
const canaryPeriod = 50 * time.Millisecond

// canaries is how many goroutines the canary runs, their sleeps
// staggered: a process with hundreds of goroutines runnable does not
// wake each one equally late. At a load average of 20-27 on 2 cores one
// goroutine's wake-ups read up to 0.28 s less late than an answer's
// timer at the same moment; eight read within 0.02 s of every answer.
const canaries = 8

// canary records how late a process's timers fire.
type canary struct {
	mu    sync.Mutex
	wakes []wake
	stop  chan struct{}
	wg    sync.WaitGroup
}

// wake is one of the canary's wake-ups: when it was due, and when it came.
type wake struct{ due, woke time.Time }

// startCanary starts a canary; stop it with stopCanary.
func startCanary() *canary {
	c := &canary{stop: make(chan struct{})}
	for i := range canaries {
		c.wg.Add(1)
		go c.run(canaryPeriod * time.Duration(i+1) / canaries)
	}
	return c
}

// run is one of the canary's goroutines, first waking after first.
func (c *canary) run(first time.Duration) {
	defer c.wg.Done()
	t := time.NewTimer(first)
	defer t.Stop()
	due := time.Now().Add(first)
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		w := wake{due: due, woke: time.Now()}
		c.mu.Lock()
		c.wakes = append(c.wakes, w)
		c.mu.Unlock()
		due = w.woke.Add(canaryPeriod)
		t.Reset(canaryPeriod)
	}
}

func (c *canary) stopCanary() {
	close(c.stop)
	c.wg.Wait()
}

// lateness is how late the canary's timer was at some moment from `from`
// to `to`: of each wake-up that had not come by `from`, the time from its
// due to its coming, or to `to` if it came later (the canary and an
// answer delayed by one stall run in either order after it; a stall that
// began after `to` does not count). A stall of the process over
// [from, to] shows in it, less at most canaryPeriod.
func (c *canary) lateness(from, to time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var late time.Duration
	for _, w := range c.wakes {
		if w.woke.Before(from) {
			continue
		}
		woke := w.woke
		if woke.After(to) {
			woke = to
		}
		late = max(late, woke.Sub(w.due))
	}
	return late
}

// most is the canary's latest wake-up, and how many it recorded.
func (c *canary) most() (time.Duration, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var late time.Duration
	for _, w := range c.wakes {
		late = max(late, w.woke.Sub(w.due))
	}
	return late, len(c.wakes)
}

// Late is a call answered past its deadline (gate.Options.Wait after it
// was asked), by more than canaryPeriod.
type Late struct {
	Job int
	// Asked and Answered are from the storm's start; Past is how long
	// after the deadline the answer came (the call's start when admitted).
	Asked, Answered, Past time.Duration
	Admitted              bool
	// Canary is how late the process's own timers were then
	// (canary.lateness over [deadline, answered]), and CanaryAsked how
	// late they were as the call began (over [asked, asked + Past]): the
	// gate starts its wait when its goroutine runs AcquireWait's first
	// line. One call was answered 0.47 s past the harness's deadline with
	// the canary 16 ms late then, yet the gate's own wait was 5.01 s: it
	// began 0.46 s after the harness read its clock.
	Canary, CanaryAsked time.Duration
	// Path is which way the gate answered, from its last event for the
	// call (Observer): "turn" (admitted with a turn in line), "first"
	// (admitted without waiting in line), "refused <state>" with the time
	// it had waited in line; "none" when no event came.
	Path string
	// Decided is when that event came, past the deadline (negative:
	// before): the gate's answer ready, before the goroutines that carry
	// it to the caller ran.
	Decided time.Duration
	// Waited is the event's time in line.
	Waited time.Duration
}

// Excess is how much later than the process's own timers the call was
// answered.
func (l Late) Excess() time.Duration { return l.Past - l.Canary - l.CanaryAsked }

// answerEvents records the gate events that answer calls (EventAcquired,
// EventRefused), the last one of each job, with when it came: an
// Observer.
type answerEvents struct {
	mu   sync.Mutex
	last map[string]answerEvent
	next gate.Observer
}

type answerEvent struct {
	e  gate.Event
	at time.Time
}

func (a *answerEvents) Observe(ctx context.Context, e gate.Event) {
	if e.Kind == gate.EventAcquired || e.Kind == gate.EventRefused {
		now := time.Now()
		a.mu.Lock()
		if a.last == nil {
			a.last = make(map[string]answerEvent)
		}
		a.last[e.Job] = answerEvent{e: e, at: now}
		a.mu.Unlock()
	}
	if a.next != nil {
		a.next.Observe(ctx, e)
	}
}

// of is job's last answering event since asked.
func (a *answerEvents) of(job string, asked time.Time) (answerEvent, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	an, ok := a.last[job]
	if !ok || an.at.Before(asked) {
		return answerEvent{}, false
	}
	return an, true
}

// path names the way an answer came.
func (an answerEvent) path() string {
	switch {
	case an.e.Kind == gate.EventAcquired && an.e.Waited > 0:
		return "turn"
	case an.e.Kind == gate.EventAcquired:
		return "first"
	default:
		return "refused " + an.e.State.String()
	}
}

// lateAnswer notes job j's call, asked at asked and answered at answered
// (admitted: its call started), past its deadline.
func (s *share) lateAnswer(j Job, asked, answered time.Time, admitted bool) {
	deadline := asked.Add(s.c.Gate.Wait)
	l := pendingLate{Late: Late{Job: j.ID, Asked: asked.Sub(s.storm.Start), Answered: answered.Sub(s.storm.Start),
		Past: answered.Sub(deadline), Admitted: admitted, Path: "none"}, asked: asked, deadline: deadline, answered: answered}
	if an, ok := s.events.of(j.Key(), asked); ok {
		l.Path, l.Decided, l.Waited = an.path(), an.at.Sub(deadline), an.e.Waited
	}
	s.mu.Lock()
	s.late = append(s.late, l)
	s.mu.Unlock()
}

// judgeLate sets each late answer's canary lateness, and counts those
// later than it by more than lateSlack.
func (s *share) judgeLate(cn *canary) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out.Canary, s.out.CanaryWakes = cn.most()
	for _, l := range s.late {
		l.Canary = cn.lateness(l.deadline, l.answered)
		l.CanaryAsked = cn.lateness(l.asked, l.asked.Add(l.Past))
		s.out.Lates = append(s.out.Lates, l.Late)
		if x := l.Excess(); x > lateSlack {
			s.out.Late++
			s.out.Latest = max(s.out.Latest, x)
		}
	}
}
