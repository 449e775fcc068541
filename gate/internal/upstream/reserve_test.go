package upstream

import (
	"context"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// asked sends an acquire's admissions as a cluster does, each on its own
// beside the others (one trip here), and judges them with the
// upstreams' values.
func (f *fixture) asked(token store.Token) (Judgement, int) {
	f.t.Helper()
	return f.askedAround(token, nil)
}

// askedAround is asked with between run after the budgets answered and
// before the upstreams' values are read (nil: one trip for both): another
// process's write that lands between the commands of a cluster's acquire.
func (f *fixture) askedAround(token store.Token, between func()) (Judgement, int) {
	f.t.Helper()
	ctx := context.Background()
	asks := f.set.Admissions(token, 0, -1, "")
	ask := -1
	t := f.st.Trip()
	replies := make([]store.Reply[store.Admitted], len(asks))
	reads := make([]store.Reply[store.UpstreamRead], len(asks))
	for i, a := range asks {
		if a.Member != "" {
			ask = i
		}
		replies[i] = t.Admit(ctx, a)
	}
	if between != nil {
		t.Send(ctx)
		between()
		t = f.st.Trip()
	}
	for i, a := range asks {
		reads[i] = t.ReadUpstream(ctx, a.Keys.Upstream)
	}
	t.Send(ctx)
	admitted := make([]store.Admitted, len(asks))
	values := make([]store.Upstream, len(asks))
	var now int64
	for i := range asks {
		var err error
		if admitted[i], err = replies[i].Result(); err != nil {
			f.t.Fatal(err)
		}
		r, err := reads[i].Result()
		if err != nil {
			f.t.Fatal(err)
		}
		values[i], now = r.Upstream, r.Now
	}
	return f.set.Judge(values, asks, admitted, now), ask
}

// setBudget writes a budget of left requests of 60, whole in an hour.
func (f *fixture) setBudget(i int, left int64) {
	f.t.Helper()
	ctx := context.Background()
	t := f.st.Trip()
	t.RecordBudget(ctx, f.set.all[i].(*guarded).bk, "", store.Reading{Requests: store.Quota{Reported: true, Remaining: left,
		Limit: 60, ResetIn: time.Hour}}, time.Minute)
	t.Send(ctx)
}

// inFlight is the calls admitted and not settled in each upstream's
// budget.
func (f *fixture) inFlight() []int64 {
	f.t.Helper()
	ctx := context.Background()
	t := f.st.Trip()
	var rs []store.Reply[store.BudgetRead]
	for _, b := range f.set.all {
		rs = append(rs, t.ReadBudget(ctx, b.(*guarded).bk))
	}
	t.Send(ctx)
	var out []int64
	for _, r := range rs {
		v, err := r.Result()
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, v.Calls)
	}
	return out
}

// On a cluster the upstreams' budgets answer side by side, so the acquire
// asks one to reserve its call: the first this process does not know to
// refuse. When the call goes elsewhere, the upstream that takes it
// reserves it then and the one asked gives its reservation back: every
// call is counted once, where it runs.
func TestTheUpstreamThatTakesTheCallReservesIt(t *testing.T) {
	f := newFixture(t, []string{"a", "b"}, Policy{FailWindow: time.Minute, Budget: BudgetPolicy{
		Reserve: store.BudgetReserve{Requests: 1}, Margin: time.Minute}})
	f.setBudget(0, 0) // a spent
	f.setBudget(1, 4) // b: three calls and the reserve

	// Nothing known yet: a is asked, refuses; b takes the call and reserves it.
	j, ask := f.asked(store.NewToken())
	c, refusal := f.choose(j, store.NewToken())
	if ask != 0 || refusal != nil || c.Name() != "b" || c.member == "" {
		t.Fatalf("first call: asked %d, chose %q (reserved %q), refused %v; want a asked, b chosen and reserved", ask, c.Name(), c.member, refusal)
	}
	if exp, got := []int64{0, 1}, f.inFlight(); got[0] != exp[0] || got[1] != exp[1] {
		t.Fatalf("in flight: %v, want %v", got, exp)
	}

	// a's refusal is known now: b is asked and reserves in the first trip.
	j, ask = f.asked(store.NewToken())
	if h, _ := j.reservation(); ask != 1 || h != 1 {
		t.Fatalf("second call: asked %d, reserved in %d; want b for both", ask, h)
	}
	if c, _ := f.choose(j, store.NewToken()); c.Name() != "b" || c.member == "" {
		t.Fatalf("second call ran on %q reserved %q, want b, reserved", c.Name(), c.member)
	}

	// a has room again while this process still expects it to refuse: b
	// reserved, a takes the call, reserves it, and b's is given back.
	f.m.Del(f.set.all[0].(*guarded).bk.Budget) // its budget lapsed
	f.setBudget(0, 50)
	j, ask = f.asked(store.NewToken())
	c, _ = f.choose(j, store.NewToken())
	if ask != 1 || c.Name() != "a" || c.member == "" {
		t.Fatalf("after a refilled: asked %d, chose %q reserved %q; want b asked, a chosen and reserved", ask, c.Name(), c.member)
	}
	if exp, got := []int64{1, 2}, f.inFlight(); got[0] != exp[0] || got[1] != exp[1] {
		t.Fatalf("in flight: %v, want %v (b's third reservation given back)", got, exp)
	}

	// a with no budget (it lapsed) and a call of its own in flight: with
	// nothing known its calls go one at a time, so b, asked and reserved,
	// takes the call.
	f.m.Del(f.set.all[0].(*guarded).bk.Budget)
	j, ask = f.asked(store.NewToken())
	c, _ = f.choose(j, store.NewToken())
	if h, _ := j.reservation(); ask != 1 || c.Name() != "b" || c.member == "" || h != 1 {
		t.Fatalf("a unread: asked %d, chose %q reserved %q, reserved in %d; want b asked, chosen and reserved", ask, c.Name(), c.member, h)
	}
	if exp, got := []int64{1, 3}, f.inFlight(); got[0] != exp[0] || got[1] != exp[1] {
		t.Fatalf("in flight: %v, want %v (b's reservation kept)", got, exp)
	}
	tr := f.st.Trip() // that call settles
	c.Release(context.Background(), &tr)
	tr.Send(context.Background())

	// a spent and expected to take the call again: b judges the call
	// without reserving it, then fills (another process's call) before
	// it reserves: the reservation refuses it, and so does every upstream.
	f.m.Del(f.set.all[0].(*guarded).bk.Budget)
	f.setBudget(0, 0)
	f.set.all[0].(*guarded).spentUntil.Store(0)
	j, ask = f.asked(store.NewToken())
	if h, _ := j.reservation(); ask != 0 || h != -1 || !j.admitted[1].Admitted {
		t.Fatalf("asked %d, reserved in %d, b admitted %v; want a asked, nothing reserved, b admitting", ask, h, j.admitted[1].Admitted)
	}
	f.m.Del(f.set.all[1].(*guarded).bk.Budget)
	f.setBudget(1, 3) // two in flight and the reserve
	if c, refusal := f.choose(j, store.NewToken()); refusal == nil || !refusal[1].Budget {
		t.Fatalf("b full: chose %q, refused %+v; want b's budget to refuse when it reserves", c.Name(), refusal)
	}
	if exp, got := []int64{1, 2}, f.inFlight(); got[0] != exp[0] || got[1] != exp[1] {
		t.Fatalf("in flight: %v, want %v", got, exp)
	}
}

// An acquire that gives its job up releases the call its upstream
// reserved, the first upstream's included.
func TestReleaseGivesTheReservationBack(t *testing.T) {
	f := newFixture(t, []string{"a"}, Policy{FailWindow: time.Minute, Budget: BudgetPolicy{Margin: time.Minute}})
	f.setBudget(0, 50)
	j, ask := f.asked(store.NewToken())
	if h, _ := j.reservation(); ask != 0 || h != 0 {
		t.Fatalf("asked %d, reserved in %d; want a for both", ask, h)
	}
	if exp, got := int64(1), f.inFlight()[0]; got != exp {
		t.Fatalf("in flight after the acquire: %d, want %d", got, exp)
	}
	ctx := context.Background()
	tr := f.st.Trip()
	r := j.Release(ctx, &tr)
	tr.Send(ctx)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if exp, got := int64(0), f.inFlight()[0]; got != exp {
		t.Fatalf("in flight after the job was given up: %d, want %d", got, exp)
	}
}

// Another process cools the first upstream between its budget's
// admission (which reserved the call: it was ready) and the read of its
// value (a cluster's acquire sends them as separate commands): the call
// goes to the next upstream, which holds the call's only reservation,
// given back when the run settles; none is left behind in the first.
func TestACallCooledAwayIsCountedWhereItRuns(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bBudget  bool // b has a budget that judges the call (else it runs unjudged)
		expAfter []int64
	}{
		{"b judges the call and reserves it", true, []int64{0, 1}},
		// No reading yet: its calls go one at a time, reserved as well.
		{"b has no budget", false, []int64{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []string{"a", "b"}, Policy{FailWindow: time.Minute, Budget: BudgetPolicy{Margin: time.Minute}})
			f.setBudget(0, 50)
			if tc.bBudget {
				f.setBudget(1, 50)
			}
			ctx := context.Background()
			coolA := func() {
				tr := f.st.Trip()
				r := tr.StopUpstream(ctx, f.set.Keys()[0], store.NewToken(), store.Stop{Reason: "overloaded", TTL: time.Hour})
				tr.Send(ctx)
				if err := r.Err(); err != nil {
					t.Fatal(err)
				}
			}
			j, ask := f.askedAround(store.NewToken(), coolA)
			if h, _ := j.reservation(); ask != 0 || h != 0 {
				t.Fatalf("asked %d, reserved in %d; want a for both (ready when its budget answered)", ask, h)
			}
			c, refusal := f.choose(j, store.NewToken())
			if refusal != nil || c.Name() != "b" {
				t.Fatalf("chose %q, refused %+v; want b", c.Name(), refusal)
			}
			if got := f.inFlight(); got[0] != 0 || got[1] != tc.expAfter[1] {
				t.Fatalf("in flight after the choice: %v, want %v (a's reservation given back)", got, tc.expAfter)
			}
			tr := f.st.Trip()
			r := c.Release(ctx, &tr)
			tr.Send(ctx)
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			if got := f.inFlight(); got[0] != 0 || got[1] != 0 {
				t.Fatalf("in flight after the run settled: %v, want none", got)
			}
		})
	}
}

// The same, but the next upstream's wait is over: the call claims its
// probe, which is never reserved, and the first upstream's reservation is
// given back all the same (drop), so none is left behind.
func TestAProbeElsewhereGivesTheReservationBack(t *testing.T) {
	f := newFixture(t, []string{"a", "b"}, Policy{FailWindow: time.Minute, Budget: BudgetPolicy{Margin: time.Minute}})
	f.setBudget(0, 50)
	f.setBudget(1, 50)
	ctx := context.Background()
	stop := func(i int, ttl time.Duration) {
		tr := f.st.Trip()
		r := tr.StopUpstream(ctx, f.set.Keys()[i], store.NewToken(), store.Stop{Reason: "overloaded", TTL: ttl})
		tr.Send(ctx)
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
	}
	stop(1, time.Second)
	redistest.Advance(f.m, 2*time.Second) // b's wait is over; its key outlives it by a lease
	j, ask := f.askedAround(store.NewToken(), func() { stop(0, time.Hour) })
	if h, _ := j.reservation(); ask != 0 || h != 0 {
		t.Fatalf("asked %d, reserved in %d; want a for both (ready when its budget answered)", ask, h)
	}
	c, refusal := f.choose(j, store.NewToken())
	if probe, _ := c.Probe(); refusal != nil || c.Name() != "b" || !probe {
		t.Fatalf("chose %q (probe %v), refused %+v; want b's probe", c.Name(), probe, refusal)
	}
	if got := f.inFlight(); got[0] != 0 || got[1] != 0 {
		t.Fatalf("in flight after the choice: %v, want none (a's given back, a probe not reserved)", got)
	}
}

// A budget's refusal says what its admission left, 0 included, with no
// reset known; a limit not reported is not.
func TestBudgetRefusalSaysWhatIsLeft(t *testing.T) {
	f := newFixture(t, []string{"a"}, Policy{FailWindow: time.Minute, Budget: BudgetPolicy{Margin: time.Minute}})
	f.setBudget(0, 0)
	j, _ := f.asked(store.NewToken())
	ss, refusing := j.Refusal()
	exp := store.BudgetRead{Requests: store.BudgetLeft{Reported: true, Left: 0, Reset: -1}}
	if !refusing || !ss[0].Budget || ss[0].Limits != exp {
		t.Fatalf("refusal %+v (%v), want the budget's, with limits %+v", ss, refusing, exp)
	}
	f.m.Del(f.set.all[0].(*guarded).bk.Budget)
	f.setBudget(0, 50)
	f.set.all[0].(*guarded).spentUntil.Store(0)
	j, _ = f.asked(store.NewToken())
	c, refusal := f.choose(j, store.NewToken())
	exp = store.BudgetRead{Requests: store.BudgetLeft{Reported: true, Left: 49, Reset: -1}}
	if refusal != nil || c.Left() != exp {
		t.Fatalf("admitted: left %+v, refused %+v; want %+v", c.Left(), refusal, exp)
	}
}
