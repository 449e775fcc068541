package upstream

import (
	"context"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
)

// Set is a gate's upstreams, in the order calls try them. The first comes
// first, then the fallbacks. Without a name it holds Free.
type Set struct {
	all  []Breaker
	keys []string // the guarded upstreams' keys, read by every acquire
	// free is Free's judgement, made once. An acquire without upstreams
	// allocates none.
	free   Judgement
	budget BudgetPolicy
}

// NewSet returns the upstreams named, in order, with keys under prefix.
func NewSet(prefix string, names []string, p Policy) *Set {
	s := &Set{budget: p.Budget}
	for _, name := range names {
		b := newGuarded(prefix, name, p)
		s.all = append(s.all, b)
		s.keys = append(s.keys, b.key())
	}
	if len(s.all) == 0 {
		s.all = []Breaker{Free{}}
		s.free = Judgement{permits: []Permit{Permitted}, statuses: []Status{{}}}
	}
	return s
}

// Keys are the upstreams' keys, in order. An acquire reads them beside
// its job. A watcher listens to them as channels. Empty for Free.
func (s *Set) Keys() []string { return s.keys }

// Len is the number of upstreams (0 for Free).
func (s *Set) Len() int { return len(s.keys) }

// Judgement is what an acquire's read of the upstreams says.
type Judgement struct {
	permits  []Permit
	statuses []Status
	refusing bool // every upstream refuses
	// asks and admitted are what the acquire asked the budgets and their
	// answers. Choose keeps admitted current.
	set      *Set
	asks     []store.Admission
	admitted []store.Admitted
}

// Refusal returns the upstreams' statuses when every one refuses.
func (j Judgement) Refusal() ([]Status, bool) { return j.statuses, j.refusing }

// Judge reads the values an acquire read (one per key, as Keys) at Redis
// time now. It reads their budgets' answers to asks with them (as
// Admissions; nil when none were asked). An upstream whose breaker
// refuses is remembered. While this process knows every upstream refuses
// so, its next acquires only read them (PeekKnown). A budget's refusal is
// remembered only for one choice. It picks which upstream a cluster's
// acquire asks to reserve its call (Admissions). Its wait is a call's
// refill.
func (s *Set) Judge(values []store.Upstream, asks []store.Admission, admitted []store.Admitted, now int64) Judgement {
	if s.free.permits != nil {
		return s.free
	}
	j := Judgement{permits: make([]Permit, len(s.all)), statuses: make([]Status, len(s.all)), refusing: true,
		set: s, asks: asks, admitted: admitted}
	i := 0
	for n, b := range s.all {
		var v store.Upstream
		if b.key() != "" {
			v, i = values[i], i+1
		}
		j.permits[n], j.statuses[n] = b.judge(v, now)
		switch {
		case j.permits[n] == Refused:
			b.remember(j.statuses[n])
		case n < len(admitted):
			// Ready, or its wait over. The probe must fit the budget too.
			var refused bool
			j.permits[n], j.statuses[n], refused = judgeBudget(b.Name(), j.permits[n], admitted[n])
			if refused {
				b.(*guarded).spent(j.statuses[n].RetryAfter)
			}
		}
		j.refusing = j.refusing && j.permits[n] == Refused
	}
	return j
}

// PeekKnown: while this process knows that every upstream refuses, an
// acquire only reads them, with Redis's clock. That costs one round trip
// and writes nothing. It returns their refusal when they all still
// refuse. It returns nil when one does not, or one is not known to
// refuse. The acquire then takes the job as usual.
func (s *Set) PeekKnown(ctx context.Context, st *store.Store) ([]Status, error) {
	for _, b := range s.all {
		if !b.knownRefusing() {
			return nil, nil
		}
	}
	t := st.Trip()
	reads := make([]store.Reply[store.UpstreamRead], len(s.all))
	for i, b := range s.all {
		reads[i] = t.ReadUpstream(ctx, b.key())
	}
	t.Send(ctx)
	ups := make([]Status, len(s.all))
	for i, b := range s.all {
		r, err := reads[i].Result()
		if err != nil {
			return nil, err
		}
		var p Permit
		if p, ups[i] = b.judge(r.Upstream, r.Now); p != Refused {
			b.forget()
			return nil, nil
		}
		if r.Upstream.Mode == store.ModeForeign {
			ups[i].RetryAfter = max(r.TTL, time.Millisecond) // foreign: its key's TTL
		}
		b.remember(ups[i])
	}
	return ups, nil
}

// Choice is the upstream a run uses, and whether the run probes it.
type Choice struct {
	b     Breaker
	probe bool
	level int // the upstream's stops in a row before the probe
	// member is the call's reservation in the upstream's budget, "" for
	// none. off: budgets are off.
	member   string
	margin   time.Duration
	off      bool
	judged   bool // the upstream had a budget when the call was admitted
	admitted store.Admitted
	learned  bool // a learned rate judged the call (store.Admitted.Learned, or starting slowly)
}

// Choose picks the upstream the run holding token uses. It is the first,
// in order, that is ready or whose probe this call claims. A claim costs
// one more round trip. The call's reservation goes with the choice. A
// ready upstream's budget may have judged the call without reserving it,
// when a cluster's acquire asked another. It reserves the call now, in
// one more round trip that gives back the other's. It refuses the call if
// it no longer fits. Choose returns the upstreams' refusal when none
// takes the call.
func (s *Set) Choose(ctx context.Context, st *store.Store, token store.Token, j Judgement) (Choice, []Status, error) {
	for i, b := range s.all {
		switch j.permits[i] {
		case Permitted:
			c := Choice{b: b, margin: s.budget.Margin, off: s.budget.Off}
			if j.unreserved(i) {
				a, err := s.reserve(ctx, st, j, i)
				if err != nil {
					return Choice{}, nil, err
				}
				if !a.Admitted {
					j.permits[i], j.statuses[i], _ = judgeBudget(b.Name(), Permitted, a)
					b.(*guarded).spent(j.statuses[i].RetryAfter)
					continue
				}
			}
			if h, m := j.reservation(); h == i {
				c.member = m
			}
			if i < len(j.admitted) {
				c.judged, c.admitted = j.admitted[i].Judged, j.admitted[i]
			}
			// Unjudged by a budget it was asked. The provider is known to
			// send none and has refused nothing yet. Its first 429 starts
			// the learned rate.
			c.learned = j.learned(i) || i < len(j.admitted) && !j.admitted[i].Judged && !j.admitted[i].Failed && j.asks != nil
			s.drop(ctx, st, j, i)
			b.forget()
			return c, nil, nil
		case MayProbe:
			c, err := b.claim(ctx, st, token)
			switch {
			case err != nil:
				return Choice{}, nil, err
			case c.Ready:
				b.forget()
				s.drop(ctx, st, j, i)
				return Choice{b: b, margin: s.budget.Margin, off: s.budget.Off, learned: j.learned(i)}, nil, nil
			case c.Claimed:
				b.forget()
				s.drop(ctx, st, j, i)
				return Choice{b: b, probe: true, level: c.Level, margin: s.budget.Margin, off: s.budget.Off, learned: j.learned(i)}, nil, nil
			}
			j.statuses[i] = refusal(b.Name(), c.Value, c.Wait)
			b.remember(j.statuses[i])
		}
	}
	return Choice{}, j.statuses, nil
}

// Peeks are the upstreams' values queued on a status's trip.
type Peeks struct {
	s     *Set
	peeks []store.Reply[store.UpstreamRead]
}

// Peek queues a read of every upstream's value on t, beside a job's read.
// Each is read with the clock of the server that holds it. Its wait was
// written with that clock. The job's server may be another, its clock
// apart.
func (s *Set) Peek(ctx context.Context, t *store.Trip) Peeks {
	p := Peeks{s: s, peeks: make([]store.Reply[store.UpstreamRead], len(s.keys))}
	for i, k := range s.keys {
		p.peeks[i] = t.ReadUpstream(ctx, k)
	}
	return p
}

// Judge judges what Peek read, each at its server's time. nil for Free.
func (p Peeks) Judge() ([]Status, error) {
	if len(p.peeks) == 0 {
		return nil, nil
	}
	out := make([]Status, len(p.peeks))
	for i, r := range p.peeks {
		v, err := r.Result()
		if err != nil {
			return nil, err
		}
		_, out[i] = p.s.all[i].judge(v.Upstream, v.Now)
	}
	return out, nil
}

// Reads are the upstreams' values, each read with Redis's clock, and
// their budgets.
type Reads struct {
	s       *Set
	reads   []store.Reply[store.UpstreamRead]
	budgets []store.Reply[store.BudgetRead]
}

// Read queues a read of every upstream with Redis's clock on t. It reads
// its budget too, unless budgets are off.
func (s *Set) Read(ctx context.Context, t *store.Trip) Reads {
	r := Reads{s: s, reads: make([]store.Reply[store.UpstreamRead], len(s.keys))}
	for i, k := range s.keys {
		r.reads[i] = t.ReadUpstream(ctx, k)
	}
	if !s.budget.Off && len(s.keys) > 0 {
		r.budgets = make([]store.Reply[store.BudgetRead], len(s.keys))
		for i, b := range s.all {
			r.budgets[i] = t.ReadBudget(ctx, b.(*guarded).bk)
		}
	}
	return r
}

// Result judges what Read read. nil for Free.
func (r Reads) Result() ([]Status, error) {
	if len(r.reads) == 0 {
		return nil, nil
	}
	out := make([]Status, len(r.reads))
	for i, rd := range r.reads {
		v, err := rd.Result()
		if err != nil {
			return nil, err
		}
		_, out[i] = r.s.all[i].judge(v.Upstream, v.Now)
		if i < len(r.budgets) {
			if out[i].Limits, err = r.budgets[i].Result(); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Reset ends every upstream's cooldown or pause and clears its windows.
func (s *Set) Reset(ctx context.Context, st *store.Store) error {
	for _, b := range s.all {
		if err := b.reset(ctx, st); err != nil {
			return err
		}
	}
	return nil
}

// Name names the chosen upstream ("" for Free).
func (c Choice) Name() string {
	if c.b == nil {
		return ""
	}
	return c.b.Name()
}

// Guarded reports whether the run uses an upstream (not Free).
func (c Choice) Guarded() bool { return c.Name() != "" }

// Probe reports whether the run probes its upstream after a cooldown or
// pause, and the upstream's stops in a row before it.
func (c Choice) Probe() (bool, int) { return c.probe, c.level }

// Unclaim queues the give-back of the probe the run claimed. It queues
// nothing when the run claimed none.
func (c Choice) Unclaim(ctx context.Context, t *store.Trip, token store.Token) store.Reply[bool] {
	if !c.probe {
		return store.Reply[bool]{}
	}
	return c.b.unclaim(ctx, t, token)
}

// Wave reports whether a permanent failure of job with reason is part of
// a wave in the upstream, and whether it started it. It costs one round
// trip, never for Free.
func (c Choice) Wave(ctx context.Context, st *store.Store, reason, job string) (in, started bool, err error) {
	return c.b.wave(ctx, st, reason, job)
}

// Record queues the run's end w on t, for the run holding token.
func (c Choice) Record(ctx context.Context, t *store.Trip, w Write, token store.Token) Record {
	return c.b.record(ctx, t, w, token)
}

// Recorded reads what Record sent: the upstream's status after it, and
// whether this run cooled or paused it. A 5xx that fills the window
// cools the upstream, in one more round trip.
func (c Choice) Recorded(ctx context.Context, st *store.Store, r Record, token store.Token) (Status, bool, error) {
	u := Status{Name: c.Name()}
	s, err := c.b.recorded(ctx, st, r, token)
	if err != nil {
		return u, false, err
	}
	if s.Present {
		u = refusal(c.Name(), s.Value, s.Wait)
		// This process now knows. Its next acquires only read.
		c.b.remember(u)
	}
	return u, s.Wrote, nil
}
