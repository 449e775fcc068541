package upstream

import (
	"context"
	"github.com/redis/go-redis/v9"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
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
	return f.set.Judge(values, nil, nil, now)
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
// probe's answer recovers it for everyone.
func TestCoolProbeReopen(t *testing.T) {
	f := newFixture(t, []string{"a"}, Policy{FailWindow: time.Minute})
	run := store.NewToken()
	c, refusal := f.choose(f.judge(), run)
	if refusal != nil || c.Name() != "a" || !c.Guarded() {
		t.Fatalf("ready upstream: %+v, %v; want a chosen", c, refusal)
	}
	st, wrote := f.record(c, Write{Op: Throttle, Reason: "rate_limited", TTL: time.Second}, run)
	if !wrote || st.Mode != store.ModeCooling || st.Reason != "rate_limited" || st.RetryAfter != time.Second {
		t.Fatalf("after Throttle: %+v, wrote %v; want cooling a second", st, wrote)
	}
	ss, refusing := f.judge().Refusal()
	if !refusing || ss[0].Mode != store.ModeCooling {
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
	f.record(c, Write{Op: Recover}, probe)
	if _, refusing := f.judge().Refusal(); refusing {
		t.Fatal("after the probe recovered it: still refused")
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
		if st, wrote := f.record(c, w, run); wrote != want || (want && st.Mode != store.ModeCooling) {
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

// Reset recovers every upstream and forgets the refusal this process saw.
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
	for i, st := range f.read() {
		if st.Mode != store.ModeReady || st.Refusing() {
			t.Fatalf("upstream %d after Reset: %+v, want ready", i, st)
		}
	}
	for _, b := range f.set.all {
		if b.knownRefusing() {
			t.Fatalf("%s: this process still knows it refusing after Reset", b.Name())
		}
	}
}

// read reads every upstream as Gate.Upstreams does.
func (f *fixture) read() []Status {
	f.t.Helper()
	ctx := context.Background()
	t := f.st.Trip()
	reads := f.set.Read(ctx, &t)
	t.Send(ctx)
	ss, err := reads.Result()
	if err != nil {
		f.t.Fatal(err)
	}
	return ss
}

// Status reads: each upstream in order, judged with Redis's clock, both
// read alone (Read) and as Status reads them beside a job (Peek); none
// for Free.
func TestReadAndPeek(t *testing.T) {
	f := newFixture(t, []string{"a", "b"}, Policy{FailWindow: time.Minute})
	run := store.NewToken()
	c, _ := f.choose(f.judge(), run)
	f.record(c, Write{Op: Suspend, Reason: "quota_exhausted", TTL: time.Minute}, run)
	ss := f.read()
	if len(ss) != 2 || ss[0].Name != "a" || ss[0].Mode != store.ModePaused || ss[0].RetryAfter != time.Minute || ss[1].Name != "b" || ss[1].Mode != store.ModeReady {
		t.Fatalf("Read: %+v, want a paused a minute, b ready", ss)
	}
	ctx := context.Background()
	tr := f.st.Trip()
	peeks := f.set.Peek(ctx, &tr)
	tr.Send(ctx)
	if ps, err := peeks.Judge(); err != nil || len(ps) != 2 || ps[0] != ss[0] || ps[1] != ss[1] {
		t.Fatalf("Peek: %+v, %v; want what Read read", ps, err)
	}
	free := NewSet("p", nil, Policy{})
	tr = f.st.Trip()
	if ss, err := free.Read(ctx, &tr).Result(); err != nil || ss != nil {
		t.Fatalf("Free's Read: %+v, %v; want none", ss, err)
	}
	if ss, err := free.Peek(ctx, &tr).Judge(); err != nil || ss != nil {
		t.Fatalf("Free's Peek: %+v, %v; want none", ss, err)
	}
}

// A wave is joined at once when the upstream is already paused or probed
// for its reason, not for another; PermanentWave 0 or below is off.
func TestWaveOfAPausedReason(t *testing.T) {
	f := newFixture(t, []string{"a"}, Policy{FailWindow: time.Minute, PermanentWave: 5})
	run := store.NewToken()
	c, _ := f.choose(f.judge(), run)
	f.record(c, Write{Op: Suspend, Reason: "bad_template", TTL: time.Second}, run)
	ctx := context.Background()
	if in, started, err := c.Wave(ctx, f.st, "bad_template", "j1"); err != nil || !in || started {
		t.Fatalf("paused for the reason: in %v started %v (%v), want in, not started", in, started, err)
	}
	if in, _, err := c.Wave(ctx, f.st, "other_reason", "j1"); err != nil || in {
		t.Fatalf("paused for another reason: in %v (%v), want not", in, err)
	}
	redistest.Advance(f.m, time.Second)
	probe := store.NewToken()
	c, _ = f.choose(f.judge(), probe)
	if in, _, err := c.Wave(ctx, f.st, "bad_template", "j2"); err != nil || !in {
		t.Fatalf("probed for the reason: in %v (%v), want in", in, err)
	}
	for _, size := range []int{0, -1} {
		g := newFixture(t, []string{"a"}, Policy{FailWindow: time.Minute, PermanentWave: size})
		c, _ := g.choose(g.judge(), store.NewToken())
		if in, started, err := c.Wave(ctx, g.st, "bad_template", "j"); err != nil || in || started {
			t.Fatalf("PermanentWave %d: in %v started %v (%v), want off", size, in, started, err)
		}
	}
}

// A value no gate wrote, found where this process knew a cooldown, is
// foreign: it refuses for its key's time left.
func TestPeekKnownHoldsAForeignValue(t *testing.T) {
	f := newFixture(t, []string{"a"}, Policy{FailWindow: time.Minute})
	run := store.NewToken()
	c, _ := f.choose(f.judge(), run)
	f.record(c, Write{Op: Throttle, Reason: "overloaded", TTL: time.Hour}, run)
	f.m.Set(f.set.Keys()[0], "held by an operator")
	f.m.SetTTL(f.set.Keys()[0], 5*time.Second)
	ss, err := f.set.PeekKnown(context.Background(), f.st)
	if err != nil || len(ss) != 1 || ss[0].RetryAfter != 5*time.Second || !ss[0].Refusing() {
		t.Fatalf("PeekKnown: %+v, %v; want refused for the key's 5s", ss, err)
	}
}

// An operator's read gives each upstream's budget beside its state; with
// budgets off it reads none.
func TestReadGivesTheBudget(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  bool
		exp  store.BudgetLeft
	}{
		{"on", false, store.BudgetLeft{Reported: true, Left: 50, Limit: 60, Reset: time.Hour}},
		{"off", true, store.BudgetLeft{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []string{"a"}, Policy{FailWindow: time.Minute, Budget: BudgetPolicy{Off: tc.off, Margin: time.Minute}})
			f.setBudget(0, 50)
			ss := f.read()
			if len(ss) != 1 || ss[0].Mode != store.ModeReady || ss[0].Limits.Requests != tc.exp || ss[0].Limits.Tokens.Reported {
				t.Fatalf("Read: %+v, want a ready with requests %+v", ss, tc.exp)
			}
		})
	}
}

// A failure counted in a wave's window is judged with the upstream's value
// of the same moment. Here the pause that another failure started (and
// the window it cleared) comes between a trip's commands: Redis has lost
// the count's script, so the trip sends it again after the rest. The
// failure is in the wave, not a job's own failure in a new window.
func TestWaveSeenWithTheCountItLeaves(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0)
	pause := &noScriptThen{}
	rdb.AddHook(pause)
	f := &fixture{t: t, m: m, st: store.New(rdb, store.Config{Lease: time.Minute}),
		set: NewSet(redistest.UniqueKey(t), []string{"a"}, Policy{FailWindow: time.Minute, PermanentWave: 2})}
	ctx := context.Background()
	run := store.NewToken()
	c, _ := f.choose(f.judge(), run)
	if in, _, err := c.Wave(ctx, f.st, "bad_template", "j1"); err != nil || in {
		t.Fatalf("the first failure: in %v (%v), want not", in, err)
	}
	pause.then = func() {
		f.record(c, Write{Op: Suspend, Reason: "bad_template", TTL: time.Hour}, run)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	pause.armed.Store(true)
	in, _, err := c.Wave(ctx, f.st, "bad_template", "j2")
	if pause.armed.Load() {
		t.Fatal("the trip never met a lost script: the test no longer tests the order")
	}
	if err != nil || !in {
		t.Fatalf("a failure counted after the wave's pause cleared its window: in %v (%v), want in the wave", in, err)
	}
}

// noScriptThen runs then once, right after the first command or pipeline
// with an EVALSHA (armed once Redis's scripts are flushed: answered
// NOSCRIPT), before the trip sends the script again.
type noScriptThen struct {
	armed atomic.Bool
	then  func()
}

func (h *noScriptThen) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *noScriptThen) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.after([]redis.Cmder{cmd})
		return err
	}
}

func (h *noScriptThen) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.after(cmds)
		return err
	}
}

func (h *noScriptThen) after(cmds []redis.Cmder) {
	for _, c := range cmds {
		if c.Name() == "evalsha" && h.armed.CompareAndSwap(true, false) {
			h.then()
			return
		}
	}
}
