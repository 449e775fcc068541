package gate_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A turn given to a caller that left the line before its process took it
// goes on: the call it reserved in the budget is given back at once, and
// its room is the next caller's, with no Redis error reported. On
// miniredis, whose clock stands still, the reservation never lapses by
// itself: without the give-back the next caller would wait for ever.
func TestLineTurnOfACallerThatLeftGoesOn(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0) // its clock still: nothing refills or lapses
	ctx := context.Background()
	opts := budgetOptions(t)
	a, b := newGate(t, rdb, opts), newGate(t, rdb, opts)
	own, sent := counted(t, m.Addr())
	cut := &flaky{Client: own}
	rec := newRecorder()
	copts := opts
	copts.Observer = rec
	c := newGate(t, cut, copts)
	l1, l2 := spend(t, a, b)
	defer func() { _ = l2.Release(ctx) }()

	ctx3, cancel3 := context.WithCancel(ctx)
	defer cancel3()
	got3 := gatetest.AcquireWait(ctx3, c, "j3", time.Hour)
	gatetest.InLine(t, a, "j3")
	got4 := gatetest.AcquireWait(ctx, c, "j4", time.Hour)
	if st := gatetest.InLine(t, a, "j4"); st.Ahead != 1 {
		t.Fatalf("the second caller in line: %+v, want one ahead", st)
	}
	// c's process cannot reach Redis: the turn l1's settle gives j3 (and
	// the call it reserves) is granted in Redis, not taken by c. First c
	// goes quiet (the join's give woke its collector), so that no collect
	// sent before the cut reaches Redis after the settle.
	quiet(t, sent, 100*time.Millisecond)
	cut.Down.Store(true)
	if err := l1.Succeed(ctx); err != nil {
		t.Fatal(err)
	}
	cancel3()
	if r := gatetest.Answer(t, got3, "j3 not answered when its caller left"); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("j3, its caller gone: %v, want context.Canceled", r.Err)
	}
	rec.drain()
	cut.Down.Store(false)
	l4 := granted(t, got4, "j4, once the turn of the caller that left went on")
	if err := l4.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range rec.drain() {
		if e.Kind == gate.EventRedisError {
			t.Fatalf("a Redis error reported with Redis reachable: %+v", e)
		}
	}
}

// Once nobody in this process waits in a line, the process stops giving
// its turns: a gate whose callers have all left the line sends nothing
// more (its giver would otherwise send a give every check, for ever).
func TestLineGiverStopsWhenNobodyWaits(t *testing.T) {
	ctx := context.Background()
	_, c, _, sent := spentCounted(t, budgetOptions(t))
	const check = 20 * time.Millisecond
	gate.SetGiveCheck(c, check)
	_, err := c.AcquireWait(ctx, "j3", 300*time.Millisecond)
	if !errors.Is(err, gate.ErrUpstreamCooling) {
		t.Fatalf("a wait in line that no turn meets: %v, want ErrUpstreamCooling", err)
	}
	quiet(t, sent, 25*check) // 25 give checks
}

// quiet waits, 10 s at most, until the client sent has sent nothing for
// d; it fails t after 10 s.
func quiet(t *testing.T, sent *roundTrips, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	last, since := sent.n.Load(), time.Now()
	for time.Since(since) < d {
		if time.Now().After(deadline) {
			t.Fatalf("the gate still sends round trips (%d) after 10 s, want none for %v", sent.n.Load(), d)
		}
		time.Sleep(d / 25)
		if n := sent.n.Load(); n != last {
			last, since = n, time.Now()
		}
	}
}

// counted is a client of addr whose round trips sent counts.
func counted(t *testing.T, addr string) (*redis.Client, *roundTrips) {
	own := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = own.Close() })
	sent := &roundTrips{}
	own.AddHook(sent)
	return own, sent
}

// spentCounted is a budget spent by two gates, a and another, on a
// miniredis whose clock stands still (no request refills), and a gate c
// on a client of its own whose round trips sent counts (hooks see c's
// commands after sent). The two leases are given back at the test's end.
func spentCounted(t *testing.T, opts gate.Options, hooks ...redis.Hook) (a, c *gate.Gate, l1 *gate.Lease, sent *roundTrips) {
	t.Helper()
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0)
	a, b := newGate(t, rdb, opts), newGate(t, rdb, opts)
	own, sent := counted(t, m.Addr())
	for _, h := range hooks {
		own.AddHook(h)
	}
	c = newGate(t, own, opts)
	l1, l2 := spend(t, a, b)
	t.Cleanup(func() { _ = l1.Release(context.Background()); _ = l2.Release(context.Background()) })
	return a, c, l1, sent
}

// While a caller waits in line, its process gives turns at most once a
// second (giveCheck) between the pushes that wake it: a wait of 2 s costs
// a handful of round trips, not a give in a loop.
func TestLineGiverPacesItsGives(t *testing.T) {
	ctx := context.Background()
	_, c, _, sent := spentCounted(t, budgetOptions(t))
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := c.AcquireWait(wctx, "j3", time.Minute)
	if err == nil {
		t.Fatal("a wait in line that no turn meets before its context's deadline: admitted, want refused")
	}
	n := sent.n.Load()
	t.Logf("a wait in line of 2 s: %d round trips", n)
	if n > 100 {
		t.Fatalf("a wait in line of 2 s sent %d round trips, want a handful", n)
	}
}

// While its caller's join has not landed, Redis says none waits in line:
// the giver looks again every joinLands (50 ms), so the turn is given as
// soon as the place is there, neither in a loop nor once a giveCheck.
func TestLineGiverLooksAgainSoonWhileAJoinLands(t *testing.T) {
	ctx := context.Background()
	join := &jobTrips{job: "j3", mark: true}
	join.delay.Store(int64(time.Second))
	a, c, _, sent := spentCounted(t, budgetOptions(t), join) // a join is counted before it stalls
	gate.SetGiveCheck(c, 10*time.Second)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := gatetest.AcquireWait(wctx, c, "j3", time.Minute)
	waitUntil(t, 10*time.Second, "j3's join sent", func() bool { return join.n.Load() > 0 })
	before := sent.n.Load()
	waitUntil(t, 10*time.Second, "j3's join answered", func() bool { return join.back.Load() > 0 })
	gives := sent.n.Load() - before
	join.delay.Store(0)
	t.Logf("%d round trips while j3's join took 1 s", gives)
	if gives < 4 || gives > 60 {
		t.Errorf("%d round trips while j3's join took 1 s, want a give every 50 ms (about 20)", gives)
	}
	gatetest.InLine(t, a, "j3")
	cancel()
	if r := gatetest.Answer(t, got, "j3 not answered once its context ended"); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("j3 answered %v with no room, want its context's end", r.Err)
	}
}

// A caller in line while its upstream cools, or is paused, is the probe
// once that ends: nothing else calls it, and the head of the line is given
// the one turn whose acquire claims the probe; the next caller's turn
// comes with the probe's success. The giver looks again at the
// cooldown's end, not at its key's (a lease later) nor at its check's (30
// s here). Before, the line was given nothing while the upstream's key
// lived: the callers waited out their 20 s and were refused.
func TestLineProbesWhenItsUpstreamsCooldownEnds(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		for _, stop := range []struct {
			name     string
			stop     func(context.Context, *gate.Lease) error // for 2 s
			upstream string                                   // Options.Upstream
		}{
			{"cooldown", func(ctx context.Context, l *gate.Lease) error { return l.Fail(ctx, errRateLimited) }, "openai:prod-key"},
			// A systemic failure pauses it for UpstreamPolicy.Cooldown. (An
			// operator's pause ends with its key: no probe follows it.)
			{"pause", func(ctx context.Context, l *gate.Lease) error { return l.Fail(ctx, errQuota) }, "openai:prod-key"},
			// The Quickstart's wiring: no Upstream named.
			{"default", func(ctx context.Context, l *gate.Lease) error { return l.Fail(ctx, errRateLimited) }, ""},
		} {
			t.Run(tg.Name+"/"+stop.name, func(t *testing.T) {
				ctx := context.Background()
				opts := budgetOptions(t)
				opts.Upstream = stop.upstream
				opts.Classify = upstreamClassifier(2 * time.Second)
				opts.UpstreamPolicy.Cooldown = 2 * time.Second
				a, b, c := newGate(t, tg.Client, opts), newGate(t, tg.Client, opts), newGate(t, tg.Client, opts)
				l1, l2 := spend(t, a, b)
				defer func() { _ = l2.Release(ctx) }()
				gate.SetGiveCheck(c, 30*time.Second)
				first := gatetest.AcquireWait(ctx, c, "j3", 20*time.Second)
				gatetest.InLine(t, a, "j3")
				second := gatetest.AcquireWait(ctx, c, "j4", 20*time.Second)
				gatetest.InLine(t, a, "j4")
				stopped := time.Now()
				if err := stop.stop(ctx, l1); err != nil {
					t.Fatal(err)
				}
				r := gatetest.Answer(t, first, "j3 not answered within its wait")
				if r.Err != nil {
					t.Fatalf("j3 answered %v, want a lease once the upstream's 2 s %s ended", r.Err, stop.name)
				}
				if waited := time.Since(stopped); waited < 1900*time.Millisecond {
					t.Fatalf("j3 admitted %v into the upstream's 2 s %s", waited, stop.name)
				}
				if st, err := a.Upstreams(ctx); err != nil || len(st) != 1 || !st[0].Probing {
					t.Fatalf("upstreams %+v (%v), want j3's call the probe", st, err)
				}
				select {
				case r := <-second: // a turn given with j3's meets the probe: refused
					t.Fatalf("j4 answered %v while the probe ran, want it in line until the probe's success", r.Err)
				case <-time.After(300 * time.Millisecond):
				}
				if err := r.Lease.Succeed(ctx); err != nil {
					t.Fatal(err)
				}
				r = gatetest.Answer(t, second, "j4 not answered within its wait")
				if r.Err != nil {
					t.Fatalf("j4 answered %v, want a lease after the probe's success", r.Err)
				}
				_ = r.Lease.Release(ctx)
			})
		}
	}
}

// A caller that waits and meets its upstream's probe running waits in the
// upstream's line for the probe's end: its success gives the turn; its
// failure cools the upstream again, and the caller is the next probe.
// Before, it was refused at once ("being probed, retry in 1s") whatever
// its wait.
func TestLineWaitsOutARunningProbe(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		for _, end := range []struct {
			name  string
			probe func(context.Context, *gate.Lease) error
			// cooled is how long the upstream cools after it (on a real
			// server the time passes while the caller waits).
			cooled time.Duration
		}{
			{"success", func(ctx context.Context, l *gate.Lease) error { return l.Succeed(ctx) }, 0},
			{"failure", func(ctx context.Context, l *gate.Lease) error { return l.Fail(ctx, errRateLimited) }, 2 * time.Second},
		} {
			t.Run(tg.Name+"/"+end.name, func(t *testing.T) {
				ctx := context.Background()
				opts := budgetOptions(t)
				opts.Classify = upstreamClassifier(500 * time.Millisecond)
				a, c := newGate(t, tg.Client, opts), newGate(t, tg.Client, opts)
				l1, err := a.Acquire(ctx, "j1")
				if err != nil {
					t.Fatal(err)
				}
				if err := l1.Fail(ctx, errRateLimited); err != nil { // the upstream cools for 0.5 s
					t.Fatal(err)
				}
				pass(tg, 600*time.Millisecond)
				probe, err := a.Acquire(ctx, "probe")
				if err != nil {
					t.Fatalf("the first call after the cooldown: %v, want the probe", err)
				}
				got := gatetest.AcquireWait(ctx, c, "j2", 20*time.Second)
				gatetest.InLine(t, a, "j2")
				if err := end.probe(ctx, probe); err != nil {
					t.Fatal(err)
				}
				if tg.FastForward != nil {
					tg.FastForward(end.cooled)
				}
				_ = granted(t, got, "j2, after the probe's "+end.name).Release(ctx)
			})
		}
	}
}

// A caller in line whose probe turn's acquire meets a probe a call from
// outside the line claimed first goes back in line, and its turn comes
// with that probe's success (before, it was refused "being probed").
func TestLineTurnThatMeetsAProbeWaitsForIt(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			p := probeTurnOnItsWay(t, tg, "j3")
			probe, err := p.a.Acquire(ctx, "outsider")
			if err != nil {
				t.Fatalf("a call from outside the line, the cooldown over: %v, want the probe", err)
			}
			p.turns.free()
			gatetest.InLine(t, p.a, "j3")
			if err := probe.Succeed(ctx); err != nil {
				t.Fatal(err)
			}
			_ = granted(t, p.answers[0], "j3, after the outsider's probe").Release(ctx)
		})
	}
}

// probeTurn is a line whose upstream's 2 s cooldown just ended
// (probeTurnOnItsWay).
type probeTurn struct {
	// turns stalls the acquires with a turn of the line's gate, on a
	// client of its own; gives counts its gives.
	turns, gives *stallCmds
	a            *gate.Gate  // a gate of the pair that spent the budget
	l2           *gate.Lease // that pair's second call, held
	answers      []<-chan gatetest.Acquired
}

// probeTurnOnItsWay sets up a line whose upstream's 2 s cooldown just
// ended: callers of jobs wait in its gate's line in that order (answers,
// in order), and the first's probe turn's acquire is sent and stalled.
func probeTurnOnItsWay(t *testing.T, tg redistest.Target, jobs ...string) probeTurn {
	t.Helper()
	ctx := context.Background()
	opts := budgetOptions(t)
	opts.Classify = upstreamClassifier(2 * time.Second)
	slow := tg.OwnClient(t)
	p := probeTurn{turns: stallOn(t, slow, carriesTurn), gives: stallOn(t, slow, isGive)}
	p.gives.free() // counted, not stalled
	c := newGate(t, slow, opts)
	var l1 *gate.Lease
	p.a, _, l1, p.l2 = spentPairRefilling(t, tg.Client, opts, time.Second)
	t.Cleanup(func() { _ = p.l2.Release(ctx) })
	for _, job := range jobs {
		p.answers = append(p.answers, gatetest.AcquireWait(ctx, c, job, 20*time.Second))
		gatetest.InLine(t, p.a, job)
	}
	if err := l1.Fail(ctx, errRateLimited); err != nil { // the upstream cools for 2 s
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, jobs[0]+"'s probe turn's acquire sent", func() bool { return p.turns.stalled.Load() > 0 })
	return p
}

// Once a line's upstream may be probed, one turn is given at a time: a
// give that comes before the probe turn's acquire lands (here a release's
// settle, while that acquire stalls) gives none, where a second turn
// would meet the probe and be refused.
func TestLineGivesOneProbeTurnAtATime(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			p := probeTurnOnItsWay(t, tg, "j3", "j4")
			looked := p.gives.stalled.Load()
			if err := p.l2.Release(ctx); err != nil { // its settle gives what fits
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			if n := p.turns.stalled.Load(); n != 1 {
				t.Fatalf("%d turns' acquires while the probe's was on its way, want 1", n)
			}
			// Its giver, having given the probe's turn, looks again a
			// second later, not when a join would have landed (50 ms).
			if n := p.gives.stalled.Load() - looked; n != 0 {
				t.Fatalf("c's giver looked %d times while the probe's turn was on its way, want none", n)
			}
			p.turns.free()
			for i, job := range []string{"j3", "j4"} {
				r := gatetest.Answer(t, p.answers[i], job+" not answered within its wait")
				if r.Err != nil {
					t.Fatalf("%s answered %v, want a lease: the probe's, then after its success", job, r.Err)
				}
				if err := r.Lease.Succeed(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// While the upstream cools, a caller waits in line without its process
// polling Redis: the probe's settle gives the turns, and the giver looks
// again when the cooldown ends or a giveCheck passes, not every joinLands.
func TestLineWaitsOutACooldownWithoutPolling(t *testing.T) {
	ctx := context.Background()
	opts := budgetOptions(t)
	opts.Classify = upstreamClassifier(time.Minute) // miniredis's clock stands still: it never ends
	a, c, l1, sent := spentCounted(t, opts)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	got := gatetest.AcquireWait(wctx, c, "j3", time.Minute)
	gatetest.InLine(t, a, "j3")
	if err := l1.Fail(ctx, errRateLimited); err != nil { // the upstream cools for a minute
		t.Fatal(err)
	}
	before := sent.n.Load()
	r := gatetest.Answer(t, got, "j3 not answered at its context's end")
	if r.Err == nil {
		t.Fatal("j3 admitted while the upstream cooled")
	}
	n := sent.n.Load() - before
	t.Logf("%d round trips in line while the upstream cooled", n)
	if n > 10 {
		t.Errorf("%d round trips in line while the upstream cooled, want a look a second at most", n)
	}
}

// A probe that ends without a failure gives the callers in line their
// turns in its own settle: a success (the upstream answered), and a
// release (its call never reached the upstream: the next call probes).
// Their process's giver, which looked at the cooling upstream just
// before, sleeps until the cooldown ends or its check (3 s) passes.
func TestLineProbeSuccessGivesTheTurns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		probe func(context.Context, *gate.Gate) error
	}{
		{"success", func(ctx context.Context, g *gate.Gate) error { return g.Do(ctx, "probe", okFn) }},
		{"release", func(ctx context.Context, g *gate.Gate) error {
			l, err := g.Acquire(ctx, "probe")
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, rdb := redistest.Miniredis(t)
			redistest.Advance(m, 0) // its clock still: it moves when the test says
			ctx := context.Background()
			opts := budgetOptions(t)
			opts.Classify = upstreamClassifier(5 * time.Second)
			a, b := newGate(t, rdb, opts), newGate(t, rdb, opts)
			own := redis.NewClient(&redis.Options{Addr: m.Addr()})
			t.Cleanup(func() { _ = own.Close() })
			gives := stallOn(t, own, isGive)
			gives.free() // counted, not stalled
			c := newGate(t, own, opts)
			gate.SetGiveCheck(c, 3*time.Second) // it looks at least every 3 s
			l1, l2 := spend(t, a, b)
			defer func() { _ = l2.Release(ctx) }()
			got := gatetest.AcquireWait(ctx, c, "j3", time.Minute)
			gatetest.InLine(t, a, "j3")
			if err := l1.Fail(ctx, errRateLimited); err != nil { // the upstream cools for 5 s
				t.Fatal(err)
			}
			// (Answered: a give still on its way would meet the cooldown's
			// end and give j3 the probe's turn, racing the test's probe.)
			n := gives.stalled.Load()
			waitUntil(t, 10*time.Second, "c's giver looked at the cooling upstream", func() bool { return gives.sent.Load() > n })
			redistest.Advance(m, 6*time.Second) // the cooldown over, by Redis's clock
			if err := tc.probe(ctx, a); err != nil {
				t.Fatalf("the probe, the cooldown over: %v", err)
			}
			_ = grantedWithin(t, got, 2*time.Second, "j3, its turn given by the probe's "+tc.name).Release(ctx)
		})
	}
}

// isGive picks line_give.lua: six keys, then the prefix of the lists of
// grants.
func isGive(args []any) bool {
	if len(args) < 10 || (args[0] != "evalsha" && args[0] != "eval") || fmt.Sprint(args[2]) != "6" {
		return false
	}
	g, _ := args[9].(string)
	return strings.HasSuffix(g, ":line:grant:")
}

// The process whose timer gives a line's refills stops giving once its
// callers have all left the line; another process's callers are given
// their turns when they fit, not when that timer was due back. Here the
// interactive caller's process (b) times the refill (10 s) before the
// batch caller (a's) joins; its turn taken, the headroom it asked for
// holds the batch caller out for 5 s. On miniredis the clock moves only
// when the test says: at 6 s the batch call fits, 4 s before b's timer
// was due. Before, a's giver was told to come back a second after it,
// and a slower machine's 20 s refill timed the batch caller out.
func TestLineTimerOfAProcessWithNoCallersLeft(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0) // its clock still: it moves when the test says
	ctx := context.Background()
	opts := budgetOptions(t)
	a, b, l1, l2 := spentPairRefilling(t, rdb, opts, slowRefill)
	defer func() { _ = l2.Release(ctx) }()
	inter := gatetest.AcquireWait(gate.WithPriority(ctx, gate.PriorityInteractive), b, "inter", time.Minute)
	gatetest.InLine(t, a, "inter")
	_, _, meta, _ := keyspace.Line(opts.Prefix, opts.Upstream)
	waitUntil(t, 10*time.Second, "b's giver times the line's refill", func() bool {
		return rdb.HGet(ctx, meta, "gw").Val() != ""
	})
	batch := gatetest.AcquireWait(gate.WithPriority(ctx, gate.PriorityBatch), a, "batch", time.Minute)
	gatetest.InLine(t, b, "batch")
	if err := l1.Succeed(ctx); err != nil {
		t.Fatal(err)
	}
	r := gatetest.Answer(t, inter, "the interactive caller was not given the room l1 released")
	if r.Err != nil {
		t.Fatalf("the interactive caller: %v", r.Err)
	}
	if err := r.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-batch:
		t.Fatalf("the batch caller answered within the headroom's hold: %v", r.Err)
	case <-time.After(1500 * time.Millisecond): // past a giveCheck
	}
	redistest.Advance(m, 6*time.Second)
	l := grantedWithin(t, batch, 5*time.Second, "the batch caller, once the hold ended, was not given the room (its giver waited for b's timer)")
	_ = l.Release(ctx)
}
