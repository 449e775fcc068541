package upstream

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/redistest"
)

// fixture is one Set over a fresh miniredis, with its clock.
type fixture struct {
	t   *testing.T
	m   *miniredis.Miniredis
	st  *store.Store
	set *Set
}

func newFixture(t *testing.T, names []string, p Policy) *fixture {
	t.Helper()
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0) // scripts read TIME: it moves with Advance only
	return &fixture{t: t, m: m, st: store.New(rdb, store.Config{Lease: time.Minute}),
		set: NewSet(redistest.UniqueKey(t), names, p)}
}

// judge reads every upstream as an acquire does and judges it.
func (f *fixture) judge() Judgement {
	f.t.Helper()
	ctx := context.Background()
	t := f.st.Trip()
	reads := make([]store.Reply[store.UpstreamRead], len(f.set.Keys()))
	for i, k := range f.set.Keys() {
		reads[i] = t.ReadUpstream(ctx, k)
	}
	t.Send(ctx)
	values := make([]store.Upstream, len(reads))
	var now int64
	for i, r := range reads {
		v, err := r.Result()
		if err != nil {
			f.t.Fatal(err)
		}
		values[i], now = v.Upstream, v.Now
	}
	return f.set.Judge(values, now)
}

// record settles a run that used c with w.
func (f *fixture) record(c Choice, w Write, token store.Token) (Status, bool) {
	f.t.Helper()
	ctx := context.Background()
	t := f.st.Trip()
	r := c.Record(ctx, &t, w, token)
	t.Send(ctx)
	st, wrote, err := c.Recorded(ctx, f.st, r, token)
	if err != nil {
		f.t.Fatal(err)
	}
	return st, wrote
}

func (f *fixture) choose(j Judgement, token store.Token) (Choice, []Status) {
	f.t.Helper()
	c, refusal, err := f.set.Choose(context.Background(), f.st, token, j)
	if err != nil {
		f.t.Fatal(err)
	}
	return c, refusal
}

// An upstream cooled by a run refuses every call until its wait ends;
// then one call claims the probe while the others stay refused, and the
// probe's answer reopens it for everyone.
func TestCoolProbeReopen(t *testing.T) {
	f := newFixture(t, []string{"a"}, Policy{FailWindow: time.Minute})
	run := store.NewToken()
	c, refusal := f.choose(f.judge(), run)
	if refusal != nil || c.Name() != "a" || !c.Guarded() {
		t.Fatalf("open upstream: %+v, %v; want a chosen", c, refusal)
	}
	st, wrote := f.record(c, Write{Op: Throttle, Reason: "rate_limited", TTL: time.Second}, run)
	if !wrote || st.State != Cooling || st.Reason != "rate_limited" || st.RetryAfter != time.Second {
		t.Fatalf("after Throttle: %+v, wrote %v; want cooling a second", st, wrote)
	}
	ss, refusing := f.judge().Refusal()
	if !refusing || ss[0].State != Cooling {
		t.Fatalf("during the cooldown: %+v, %v; want refused", ss, refusing)
	}
	if known, err := f.set.PeekKnown(context.Background(), f.st); err != nil || known == nil {
		t.Fatalf("PeekKnown: %+v, %v; want the refusal this process saw", known, err)
	}

	redistest.Advance(f.m, time.Second)
	probe := store.NewToken()
	c, refusal = f.choose(f.judge(), probe)
	if p, level := c.Probe(); refusal != nil || !p || level != 1 {
		t.Fatalf("after the wait: %+v, %v; want the probe claimed at level 1", c, refusal)
	}
	if _, refusal := f.choose(f.judge(), store.NewToken()); len(refusal) != 1 || !refusal[0].Probing {
		t.Fatalf("a second call during the probe: %+v; want refused, probing", refusal)
	}
	f.record(c, Write{Op: Reopen}, probe)
	if _, refusing := f.judge().Refusal(); refusing {
		t.Fatal("after the probe reopened it: still refused")
	}
}

// A probe that does not reach the upstream gives the probe back: the
// next call claims it at once.
func TestUnclaimGivesTheProbeBack(t *testing.T) {
	f := newFixture(t, []string{"a"}, Policy{FailWindow: time.Minute})
	run := store.NewToken()
	c, _ := f.choose(f.judge(), run)
	f.record(c, Write{Op: Suspend, Reason: "quota_exhausted", TTL: time.Second}, run)
	redistest.Advance(f.m, time.Second)
	probe := store.NewToken()
	c, _ = f.choose(f.judge(), probe)
	f.record(c, Write{Op: Unclaim}, probe)
	next := store.NewToken()
	if c, refusal := f.choose(f.judge(), next); refusal != nil {
		t.Fatalf("after the probe was given back: refused %+v", refusal)
	} else if p, _ := c.Probe(); !p {
		t.Fatal("the next call runs without probing, want it to probe")
	}
}

// More than AllowedFails 5xx in the window cool the upstream; no more
// does not.
func TestCountCoolsPastAllowedFails(t *testing.T) {
	f := newFixture(t, []string{"a"}, Policy{AllowedFails: 1, FailWindow: time.Minute})
	w := Write{Op: Count, Reason: "upstream_5xx", TTL: time.Minute}
	for i, want := range []bool{false, true} {
		run := store.NewToken()
		c, _ := f.choose(f.judge(), run)
		if st, wrote := f.record(c, w, run); wrote != want || (want && st.State != Cooling) {
			t.Fatalf("5xx %d: %+v, wrote %v; want cooled %v", i+1, st, wrote, want)
		}
	}
}

// PermanentWave distinct jobs failing with one reason make a wave; the
// one that fills the window starts it.
func TestWave(t *testing.T) {
	f := newFixture(t, []string{"a"}, Policy{FailWindow: time.Minute, PermanentWave: 2})
	c, _ := f.choose(f.judge(), store.NewToken())
	ctx := context.Background()
	for i, want := range [][2]bool{{false, false}, {true, true}, {true, false}} {
		in, started, err := c.Wave(ctx, f.st, "bad_template", "job-"+string(rune('a'+i)))
		if err != nil || in != want[0] || started != want[1] {
			t.Fatalf("job %d: in %v started %v (%v), want %v", i+1, in, started, err, want)
		}
	}
}

// Reset reopens every upstream and forgets the refusal this process saw.
func TestResetReopensEvery(t *testing.T) {
	f := newFixture(t, []string{"a", "b"}, Policy{FailWindow: time.Minute})
	for range 2 {
		run := store.NewToken()
		c, _ := f.choose(f.judge(), run)
		f.record(c, Write{Op: Throttle, Reason: "overloaded", TTL: time.Hour}, run)
	}
	if _, refusing := f.judge().Refusal(); !refusing {
		t.Fatal("both cooled: not refused")
	}
	if err := f.set.Reset(context.Background(), f.st); err != nil {
		t.Fatal(err)
	}
	if _, refusing := f.judge().Refusal(); refusing {
		t.Fatal("after Reset: refused")
	}
	if known, _ := f.set.PeekKnown(context.Background(), f.st); known != nil {
		t.Fatalf("after Reset PeekKnown still answers %+v", known)
	}
}
