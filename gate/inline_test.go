package gate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A call the budget refuses, whose caller can wait, takes a place in its
// upstream's line instead of the refusal, readable from any process
// (Status.Ahead, RetryAfter); a caller without a wait is not admitted past
// it and is told its turn after it; the room a settle releases goes to the
// caller in line, woken, not to whoever asks next.
func TestLineWaitsForItsTurn(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := budgetOptions(t)
			// On miniredis no request refills but by pass (its clock stands
			// still between steps); a real server's requests refill in real
			// time, slower than a busy machine holds a step.
			refill := slowRefill
			if tg.FastForward != nil {
				pass(tg, 0) // miniredis's clock still: it moves only by pass
				refill = time.Second
			}
			a, b, l1, l2 := spentPairRefilling(t, tg.Client, opts, refill)
			rec := newRecorder()
			opts.Observer = rec
			c := newGate(t, tg.Client, opts)
			defer func() { _ = l2.Release(ctx) }()
			wctx := gate.WithTenant(gate.WithPriority(ctx, gate.PriorityInteractive), "acme", 1)
			got := gatetest.AcquireWait(wctx, c, "j3", time.Minute)
			st := gatetest.InLine(t, a, "j3")
			if st.Ahead != 0 || st.RetryAfter <= refill/2 || st.RetryAfter > refill+refill/10 {
				t.Fatalf("the one caller in line, read from another process: %+v, want 0 ahead and one request's refill (%v) to wait", st, refill)
			}
			// Without the line it would be told one request's refill; in
			// line, its turn comes after the caller waiting (two).
			if bl := blocked(t, b, "j4"); !errors.Is(bl, gate.ErrUpstreamCooling) || bl.RetryAfter <= 3*refill/2 || bl.Ahead != 1 {
				t.Fatalf("a caller without a wait while one waits: %+v, want refused, one ahead, and told its turn after the line's (%v)", bl, 2*refill)
			}
			if tg.FastForward != nil {
				// A request refills: the room is the caller's in line, not
				// the next to ask (without the line it would be admitted:
				// 4 left, 2 in flight, a reserve of one).
				pass(tg, refill+refill/10)
				if bl := blocked(t, b, "j4"); !errors.Is(bl, gate.ErrUpstreamCooling) {
					t.Fatalf("a caller without a wait once a request refilled: %+v, want refused, the room the line's", bl)
				}
			}
			if err := l1.Succeed(ctx); err != nil {
				t.Fatal(err)
			}
			l3 := granted(t, got, "the caller in line, when a settle released room")
			defer func() { _ = l3.Release(ctx) }()
			if tg.FastForward != nil {
				// (A request refilled above: there is room for one more.)
			} else if bl := blocked(t, a, "j5"); !errors.Is(bl, gate.ErrUpstreamCooling) {
				t.Fatalf("after the turn took the room: %+v, want refused", bl)
			}
			if st, _ := a.Status(ctx, "j3"); st.InLine || st.Ahead != 0 || st.State != gate.Running {
				t.Fatalf("after its turn: %+v, want Running and no place", st)
			}
			var seen bool
			for _, e := range rec.drain() {
				if e.Kind == gate.EventAcquired && e.Job == "j3" {
					seen = true
					if e.Priority != gate.PriorityInteractive || e.Tenant != "acme" || e.Waited <= 0 {
						t.Fatalf("the acquired event of the caller in line: %+v, want its class, its tenant and the time it waited", e)
					}
				}
			}
			if !seen {
				t.Fatal("no acquired event for the caller in line")
			}
		})
	}
}

// Turns go in the line's order, across processes: an interactive caller
// that joined after a batch one has the first turn. No request refills
// during the test: the turns are the settles'.
func TestLineGivesTheHigherClassFirst(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := budgetOptions(t)
			a, b, l1, l2 := spentPairRefilling(t, tg.Client, opts, slowRefill)
			batch := gatetest.AcquireWait(gate.WithPriority(ctx, gate.PriorityBatch), a, "batch", time.Minute)
			gatetest.InLine(t, b, "batch")
			inter := gatetest.AcquireWait(gate.WithPriority(ctx, gate.PriorityInteractive), b, "inter", time.Minute)
			if st := gatetest.InLine(t, a, "inter"); st.Ahead != 0 {
				t.Fatalf("the interactive caller: %+v, want first in line", st)
			}
			if st := gatetest.InLine(t, a, "batch"); st.Ahead != 1 {
				t.Fatalf("the batch caller: %+v, want one ahead of it", st)
			}
			if err := l1.Succeed(ctx); err != nil {
				t.Fatal(err)
			}
			var r gatetest.Acquired
			select {
			case r = <-inter:
			case r = <-batch:
				t.Fatalf("the batch caller had the first turn: %v", r.Err)
			case <-time.After(20 * time.Second):
				t.Fatal("nobody woken")
			}
			if r.Err != nil {
				t.Fatalf("the interactive caller: %v", r.Err)
			}
			// Its room goes to the batch caller once no interactive caller
			// asked for the headroom hold (5 s; before a refill).
			_ = r.Lease.Release(ctx)
			if r = gatetest.Answer(t, batch, "the batch caller was not given the room released"); r.Err != nil {
				t.Fatalf("the batch caller, once the interactive one released its room: %v", r.Err)
			}
			_ = r.Lease.Release(ctx)
			_ = l2.Release(ctx)
		})
	}
}

// A caller whose deadline its turn cannot meet is refused at once, with
// the callers ahead of it and the expected wait, and takes no place.
func TestLineRefusesAnUnmeetableDeadline(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opts := budgetOptions(t)
			a, b, l1, l2 := spentPairRefilling(t, tg.Client, opts, slowRefill)
			rec := newRecorder()
			opts.Observer = rec
			c := newGate(t, tg.Client, opts)
			defer func() { _ = l1.Release(ctx); _ = l2.Release(ctx) }()
			first := gatetest.AcquireWait(ctx, a, "w1", time.Minute)
			gatetest.InLine(t, c, "w1")
			second := gatetest.AcquireWait(ctx, b, "w2", time.Minute)
			gatetest.InLine(t, c, "w2")
			// Two ahead at a request every slowRefill: its turn is three
			// refills from the spend, less the time the steps took (far
			// above two refills, the turn of one ahead).
			_, err := c.AcquireWait(ctx, "w3", 3*slowRefill/2)
			var bl *gate.BlockedError
			if !errors.As(err, &bl) || bl.State != gate.UpstreamCooling || bl.Ahead != 2 ||
				bl.RetryAfter < 5*slowRefill/2 || bl.RetryAfter > 3*slowRefill+100*time.Millisecond {
				t.Fatalf("a wait of 1.5 refills behind two callers: %v (%+v), want refused with 2 ahead and 3 refills (%v) to wait", err, bl, 3*slowRefill)
			}
			if want := "retry in " + bl.RetryAfter.String(); !strings.Contains(err.Error(), want) {
				t.Fatalf("its text %q, want the wait RetryAfter tells (%q)", err, want)
			}
			if st, _ := c.Status(ctx, "w3"); st.InLine || st.Ahead != 0 || st.RetryAfter != 0 {
				t.Fatalf("the refused caller: %+v, want no place", st)
			}
			for _, e := range rec.drain() {
				if e.Kind == gate.EventRefused && e.Job == "w3" && (e.Priority != gate.PriorityNormal || e.Waited != 0) {
					t.Fatalf("its refusal event: %+v, want PriorityNormal and no wait", e)
				}
			}
			cancel()
			<-first
			<-second
		})
	}
}

// Nobody waits behind the dead: once the lease of every process with
// callers in line has ended, a caller is admitted as if the line were
// empty (on miniredis, whose clock the test moves past the line's lease,
// the waiting process cut off from Redis).
func TestLineOfTheDeadIsNoLine(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0) // its clock still: no request refills but by Advance
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := budgetOptions(t)
	a, b := newGate(t, rdb, opts), newGate(t, rdb, opts)
	cut := &flaky{Client: rdb}
	c := newGate(t, cut, opts)
	l1, l2 := spend(t, a, b)
	defer func() { _ = l1.Release(ctx); _ = l2.Release(ctx) }()
	got := gatetest.AcquireWait(ctx, c, "j3", time.Hour)
	gatetest.InLine(t, a, "j3")
	// c's process is cut off from Redis, as if it died: its timers neither
	// renew its place nor give it a turn while the test moves the clock.
	cut.Down.Store(true)
	// A request refills, but the line holds j3's place: refused.
	redistest.Advance(m, 1100*time.Millisecond)
	if bl := blocked(t, a, "j4"); !errors.Is(bl, gate.ErrUpstreamCooling) {
		t.Fatalf("behind a live caller in line: %+v, want refused", bl)
	}
	// The line's lease (at most 10 s) passes with no renewal: as if c died.
	redistest.Advance(m, 11*time.Second)
	if err := a.Do(ctx, "j5", okFn); err != nil {
		t.Fatalf("behind a line of callers whose processes' leases ended: %v, want admitted", err)
	}
	cancel()
	<-got
}

// aclLine is what an upstream's line needs beyond the budget's rules, as
// docs/upstreams.md lists it.
var aclLine = []string{"+hget", "+hdel", "+zlexcount", "+zpopmin", "+zscore", "+zrank", "+zcard", "+zcount",
	"+sadd", "+srem", "+spop", "+smembers", "+scard", "+rpush", "+lrange", "+lrem", "+exists", "+set", "+get"}

// Under the documented ACL a caller waits in line and is woken, with no
// command refused; a user with only the budget's rules still has its
// calls admitted in the acquire's one script (the line's check of the
// admission needs nothing more while nobody waits).
func TestLineUnderTheDocumentedACL(t *testing.T) {
	ctx := context.Background()
	t.Run("line", func(t *testing.T) {
		prefix := "aclline"
		s := redistest.ACLServer(t, prefix, slices.Concat([]string{"&" + prefix + ":*"}, redistest.ACLUpstream, redistest.ACLPubSub, aclLine))
		rdb := s.Client(t)
		rec := newRecorder()
		opts := gate.Options{Prefix: prefix, Upstream: "openai:prod-key", Observer: rec}
		a, b := newGate(t, rdb, opts), newGate(t, rdb, opts)
		// A request refilled would admit j3 at once, not in line: the
		// turn must be the settle's.
		l1, l2 := spendRefilling(t, a, b, slowRefill)
		defer func() { _ = l2.Release(ctx) }()
		got := gatetest.AcquireWait(ctx, b, "j3", time.Minute)
		gatetest.InLine(t, a, "j3")
		if err := l1.Succeed(ctx); err != nil {
			t.Fatal(err)
		}
		_ = granted(t, got, "the caller in line under the documented ACL").Release(ctx)
		for _, e := range rec.drain() {
			if e.Kind == gate.EventRedisError {
				t.Fatalf("a command refused under the documented ACL: %+v", e)
			}
		}
	})
	t.Run("budget only", func(t *testing.T) {
		prefix := "aclbudgetonly"
		s := redistest.ACLServer(t, prefix, redistest.ACLUpstream)
		rdb := s.Client(t)
		rt := &roundTrips{}
		rdb.AddHook(rt)
		names := &redistest.Commands{}
		rdb.AddHook(names)
		rec := newRecorder()
		g := newGate(t, rdb, gate.Options{Prefix: prefix, Upstream: "openai:prod-key", Observer: rec})
		report(t, g, "first", openAIHeader(50, 60, "10s"))
		if err := g.Do(ctx, "warm", okFn); err != nil { // loads the settle's scripts
			t.Fatal(err)
		}
		before := rt.n.Load()
		names.Take()
		if err := g.Do(ctx, "second", okFn); err != nil {
			t.Fatal(err)
		}
		if got := rt.n.Load() - before; got != 2 {
			t.Fatalf("a call the budget admits: %d round trips (%v), want 2 (acquire, settle)", got, names.Take())
		}
		for _, e := range rec.drain() {
			if e.Kind == gate.EventRedisError {
				t.Fatalf("a command refused under the budget's ACL: %+v", e)
			}
		}
	})
}

// A provider-wide failure cools the upstream while callers wait in its
// line: when the cooldown ends, the probe is not held behind the line
// (which gives no turn while the upstream cools), and its success gives
// the callers in line their turns. The probe is either a new call's or,
// woken first, the caller in line's own: both end the cooldown.
func TestLineWaitsOutACooldown(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := budgetOptions(t)
			opts.Classify = upstreamClassifier(300 * time.Millisecond)
			a, b, l1, l2 := spentPair(t, tg.Client, opts)
			defer func() { _ = l2.Release(ctx) }()
			got := gatetest.AcquireWait(ctx, b, "j3", time.Minute)
			gatetest.InLine(t, a, "j3")
			// l1's call meets a 429: the upstream cools for 300 ms.
			if err := l1.Fail(ctx, errRateLimited); err != nil {
				t.Fatal(err)
			}
			pass(tg, 400*time.Millisecond)
			deadline := time.Now().Add(20 * time.Second)
			for probed := false; !probed; {
				select {
				case r := <-got:
					// The caller in line claimed the probe: its success
					// ends the cooldown for the next call.
					if r.Err != nil {
						t.Fatalf("the caller in line, the cooldown over: %v, want its call (the probe) to run", r.Err)
					}
					if err := r.Lease.Succeed(ctx); err != nil {
						t.Fatal(err)
					}
					return
				default:
				}
				switch err := a.Do(ctx, "probe", okFn); {
				case err == nil:
					probed = true
				case time.Now().After(deadline):
					t.Fatalf("the cooldown over, with a caller in line: %v, want the probe to run", err)
				default:
					time.Sleep(10 * time.Millisecond)
				}
			}
			_ = granted(t, got, "the caller in line, after the probe succeeded").Release(ctx)
		})
	}
}

// While a batch caller has the head of the line and an interactive one
// joined lately, the budget's last call beside its reserve is kept for
// the interactive class: a settle that frees it gives the batch caller
// nothing, and the next interactive caller has it at once, in its join's
// round trip, while the batch caller waits for more room than the
// headroom (two calls beside the reserve), or for the interactive class's
// hold to end. No request refills during the test's steps: one that came
// before the interactive caller joined would be the batch caller's (the
// test's steps held past a 1 s refill on a busy machine: 2 in 1000).
func TestLineKeepsHeadroomForAHigherClass(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := budgetOptions(t)
			refill := slowRefill
			if tg.FastForward != nil {
				pass(tg, 0) // miniredis's clock still: it moves only by pass
				refill = time.Second
			}
			a, b, l1, l2 := spentPairRefilling(t, tg.Client, opts, refill)
			batch, head := interactiveAtTheHead(t, a, b, l1)
			defer func() { _ = head.Release(ctx) }()
			// l2's settle frees the last call beside the reserve: the batch
			// caller at the head does not have it.
			if err := l2.Succeed(ctx); err != nil {
				t.Fatal(err)
			}
			again, err := b.AcquireWait(gate.WithPriority(ctx, gate.PriorityInteractive), "inter2", time.Minute)
			if err != nil {
				t.Fatalf("an interactive caller while a batch caller has the head: %v, want the headroom at once", err)
			}
			defer func() { _ = again.Release(ctx) }()
			select {
			case r := <-batch:
				t.Fatalf("the batch caller was answered (%v) before the interactive caller that came after the headroom was freed", r.Err)
			default:
			}
			if st := gatetest.InLine(t, a, "batch"); st.Ahead != 0 {
				t.Fatalf("the batch caller: %+v, want still at the head of the line", st)
			}
			if tg.FastForward != nil {
				// Two requests refill and a settle gives: more room than
				// the headroom.
				pass(tg, 2*refill+refill/10)
				if err := again.Succeed(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				// The interactive calls' settles free the headroom, the
				// batch caller's once no interactive caller joined for the
				// hold (5 s).
				for _, l := range []*gate.Lease{again, head} {
					if err := l.Succeed(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			_ = grantedWithin(t, batch, 40*time.Second, "the batch caller once the room outgrew the headroom").Release(ctx)
		})
	}
}

// interactiveAtTheHead puts a batch caller of a in line, then an
// interactive one of b, which has the head; l1's settle gives the room to
// the interactive one. It returns the batch caller's answer to come and
// the interactive one's lease.
func interactiveAtTheHead(t *testing.T, a, b *gate.Gate, l1 *gate.Lease) (<-chan gatetest.Acquired, *gate.Lease) {
	t.Helper()
	ctx := context.Background()
	batch := gatetest.AcquireWait(gate.WithPriority(ctx, gate.PriorityBatch), a, "batch", time.Minute)
	gatetest.InLine(t, b, "batch")
	inter := gatetest.AcquireWait(gate.WithPriority(ctx, gate.PriorityInteractive), b, "inter", time.Minute)
	gatetest.InLine(t, a, "inter")
	if err := l1.Succeed(ctx); err != nil {
		t.Fatal(err)
	}
	return batch, granted(t, inter, "the interactive caller at the head, given the room")
}

// The headroom is work-conserving: with no higher class asking, a batch
// caller has the budget's last call beside its reserve. No request
// refills during the test: the turn is the settle's.
func TestLineGivesTheLowerClassEverythingAlone(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := budgetOptions(t)
			a, b, l1, l2 := spentPairRefilling(t, tg.Client, opts, slowRefill)
			defer func() { _ = l2.Release(ctx) }()
			batch := gatetest.AcquireWait(gate.WithPriority(ctx, gate.PriorityBatch), a, "batch", time.Minute)
			gatetest.InLine(t, b, "batch")
			if err := l1.Succeed(ctx); err != nil {
				t.Fatal(err)
			}
			// The settle gave the turn in its own round trip: the caller no
			// longer waits in line (a refill would come ten seconds later).
			if st, err := b.Status(ctx, "batch"); err != nil || st.InLine {
				t.Fatalf("the batch caller alone in line after a settle freed the last call: %+v (%v), want its turn given", st, err)
			}
			_ = granted(t, batch, "the batch caller alone in line, the room the settle freed").Release(ctx)
		})
	}
}

// stallCmds is a go-redis hook that stalls every command match picks
// before it is sent, until release closes: a round trip Redis is slow to
// answer.
type stallCmds struct {
	match         func(args []any) bool
	release       chan struct{}
	stalled, sent atomic.Int64
}

// stallOn adds a stallCmds to rdb, a client not used yet (a cluster's
// nodes get it as they are made: a gate may send to a node's client);
// its commands go on at the test's end.
func stallOn(t *testing.T, rdb redis.UniversalClient, match func(args []any) bool) *stallCmds {
	h := &stallCmds{match: match, release: make(chan struct{})}
	rdb.AddHook(h)
	if c, ok := rdb.(*redis.ClusterClient); ok {
		c.OnNewNode(func(n *redis.Client) { n.AddHook(h) })
	}
	t.Cleanup(h.free)
	return h
}

// stalledGate is a gate c on a client of its own, whose commands match
// picks are stalled (h), beside a pair that spent the budget, a request
// refilling every refill (spentPairRefilling on tg's client): its gate a
// and lease l1, whose settle frees room; its l2 is released at the test's
// end. hooks see c's commands too (hookClient).
func stalledGate(t *testing.T, tg redistest.Target, opts gate.Options, refill time.Duration, match func(args []any) bool, hooks ...redis.Hook) (c *gate.Gate, h *stallCmds, a *gate.Gate, l1 *gate.Lease) {
	t.Helper()
	slow := tg.OwnClient(t)
	h = stallOn(t, slow, match)
	for _, k := range hooks {
		hookClient(slow, k)
	}
	c = newGate(t, slow, opts)
	a, _, l1, l2 := spentPairRefilling(t, tg.Client, opts, refill)
	t.Cleanup(func() { _ = l2.Release(context.Background()) })
	return c, h, a, l1
}

// free lets the stalled commands go on (once).
func (h *stallCmds) free() {
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

// carriesTurn picks a command that carries a turn of the line (its
// reservation, "turn:…").
func carriesTurn(args []any) bool {
	for _, a := range args {
		if s, ok := a.(string); ok && strings.HasPrefix(s, "turn:") {
			return true
		}
	}
	return false
}

func (h *stallCmds) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *stallCmds) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		stalled := h.stall(cmd)
		err := next(ctx, cmd)
		if stalled {
			h.sent.Add(1)
		}
		return err
	}
}

func (h *stallCmds) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		stalled := false
		for _, c := range cmds {
			stalled = h.stall(c) || stalled
		}
		err := next(ctx, cmds)
		if stalled {
			h.sent.Add(1)
		}
		return err
	}
}

func (h *stallCmds) stall(cmd redis.Cmder) bool {
	if !h.match(cmd.Args()) {
		return false
	}
	h.stalled.Add(1)
	<-h.release
	return true
}

// A caller whose turn's acquire Redis does not answer before its
// deadline (a loaded server, a round trip sent just before it) is
// answered at its deadline, refused with its upstream's wait, not when
// Redis answers; the lease that acquire takes afterwards is given back,
// not left to run out its lease with nobody to run the call.
func TestLineAnswersAtTheDeadlineWhateverRedisTakes(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := budgetOptions(t)
			joins := &jobTrips{job: "j3", mark: true}
			c, h, a, l1 := stalledGate(t, tg, opts, time.Second, carriesTurn, joins)
			const wait = 3 * time.Second
			start := time.Now()
			got := gatetest.AcquireWait(ctx, c, "j3", wait)
			gatetest.InLine(t, a, "j3")
			// Its join's round trip answered: a settle while it is on its
			// way (its place is read before the acquire it carries runs)
			// gives the turn that acquire takes, stalled nowhere.
			waitUntil(t, 10*time.Second, "j3's join answered", func() bool { return joins.back.Load() > 0 })
			if err := l1.Succeed(ctx); err != nil { // the room goes to j3's turn
				t.Fatal(err)
			}
			var r gatetest.Acquired
			select {
			case r = <-got:
			case <-time.After(wait + 10*time.Second):
				t.Fatalf("no answer %v after the deadline: the caller waits for Redis", 10*time.Second)
			}
			past := time.Since(start) - wait
			if h.stalled.Load() == 0 {
				t.Fatal("no turn's acquire was stalled: the test proves nothing")
			}
			var bl *gate.BlockedError
			if !errors.As(r.Err, &bl) || !errors.Is(r.Err, gate.ErrUpstreamCooling) || bl.RetryAfter <= 0 {
				t.Fatalf("answered %v: %v, want refused by the upstream with a wait", past, r.Err)
			}
			// Far from the 10 s the stalled acquire would add.
			if past > 2*time.Second {
				t.Fatalf("answered %v after the deadline, want at it (a scheduling slack)", past)
			}
			t.Logf("answered %v after the deadline", past)
			h.free()
			waitUntil(t, 10*time.Second, "the stalled acquire answered", func() bool { return h.sent.Load() > 0 })
			waitUntil(t, 10*time.Second, "j3 given back", func() bool {
				st, err := a.Status(ctx, "j3")
				return err == nil && st.State != gate.Running
			})
		})
	}
}

// A caller given its turn in its join's round trip (the headroom its class
// keeps while a batch caller has the head of the line) acquires the job in
// that same trip: on one node its call costs two round trips (the acquire
// the line refused, the join that takes the turn and the job), not three
// (then the turn's own acquire). A cluster takes the job before it asks
// its upstreams (Store.Acquire), so its join cannot: counted, not bounded.
// The join's round trip is time in line: its acquired event says so.
func TestLineTakesTheTurnInTheJoinsRoundTrip(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := budgetOptions(t)
			own := tg.OwnClient(t)
			trips := &jobTrips{job: "inter2"}
			hookClient(own, trips) // a cluster's: once per node a trip reaches
			// No request refills during the test: the turn is the headroom.
			a, b, l1, l2 := spentPairRefilling(t, tg.Client, opts, slowRefill)
			rec := newRecorder()
			copts := opts
			copts.Observer = rec
			c := newGate(t, own, copts)
			batch, head := interactiveAtTheHead(t, a, b, l1)
			defer func() { _ = head.Release(ctx) }()
			// l2's settle frees the last call beside the reserve: headroom.
			if err := l2.Succeed(ctx); err != nil {
				t.Fatal(err)
			}
			trips.n.Store(0)
			const slow = 30 * time.Millisecond
			trips.delay.Store(int64(slow)) // each of its round trips
			again, err := c.AcquireWait(gate.WithPriority(ctx, gate.PriorityInteractive), "inter2", time.Minute)
			got := trips.n.Load()
			if err != nil {
				t.Fatalf("an interactive caller while a batch caller has the head: %v, want the headroom at once", err)
			}
			defer func() { _ = again.Release(ctx) }()
			t.Logf("round trips of the interactive call given its turn in its join: %d", got)
			if want := int64(2); !tg.IsCluster && got != want {
				t.Fatalf("the interactive call given its turn in its join: %d round trips, want %d (acquire, join)", got, want)
			}
			if st, err := c.Status(ctx, "inter2"); err != nil || st.State != gate.Running || st.InLine {
				t.Fatalf("after the call took its turn: %+v (%v), want Running and no place", st, err)
			}
			var waited []time.Duration
			for _, e := range rec.drain() {
				if e.Kind == gate.EventAcquired && e.Job == "inter2" {
					waited = append(waited, e.Waited)
				}
			}
			if len(waited) != 1 || waited[0] < slow {
				t.Fatalf("the acquired events of the call given its turn in its join: waited %v, want one, at least the join's round trip (%v)", waited, slow)
			}
			_ = batch
		})
	}
}

// A turn given in a caller's join and taken by the acquire that join
// carries is that caller's, whichever collection of its process takes the
// grant from the list: here its process's collector, woken by the give's
// message, collects it between the join's give and the join's own
// collection (other clients' commands may come between a pipeline's on
// any server; the hook splits the join's round trip there), and answers
// only after the join did. The caller is answered with the lease its join
// took, at once: not given back, and not refused by its own lease ("job is
// already running") when it acquires again with a turn that lease used.
// A cluster sends no acquire in a join (Trip.AcquireInTurn).
func TestLineTurnTakenInTheJoinIsTheCallersWhoeverCollectsIt(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		if tg.IsCluster {
			continue
		}
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := budgetOptions(t)
			if tg.FastForward != nil {
				pass(tg, 0) // miniredis's clock still: it moves only by pass
			}
			own := tg.OwnClient(t)
			race := newCollectBetween("inter2")
			own.AddHook(race)
			t.Cleanup(race.answer)
			// No request refills during the test: the turn is the headroom.
			a, b, l1, l2 := spentPairRefilling(t, tg.Client, opts, slowRefill)
			c := newGate(t, own, opts)
			// c's batch caller waits throughout: c's collector runs.
			batch, head := interactiveAtTheHead(t, c, b, l1)
			defer func() { _ = head.Release(ctx) }()
			if err := l2.Succeed(ctx); err != nil { // headroom for inter2
				t.Fatal(err)
			}
			r := gatetest.Answer(t, gatetest.AcquireWait(gate.WithPriority(ctx, gate.PriorityInteractive), c, "inter2", time.Minute),
				"the interactive caller given its turn in its join: no answer in 20 s")
			race.answer()
			if r.Lease != nil {
				defer func() { _ = r.Lease.Release(ctx) }()
			}
			if !race.between.Load() {
				t.Fatal("the collector did not collect between the join's give and its collection: the test proves nothing")
			}
			if r.Err != nil {
				t.Fatalf("the caller whose join took its turn, the grant collected by its collector: %v, want the lease its join took", r.Err)
			}
			waitUntil(t, 20*time.Second, "the collector's collection answered", func() bool { return race.late.Load() })
			if !race.first.Load() {
				t.Fatal("the caller was answered after its collector's collection of its turn, not at once: it waited for a wake-up its join made needless")
			}
			if st := mustStatus(t, a, "inter2"); st.State != gate.Running || st.InLine {
				t.Fatalf("inter2 after its answer, read from another process: %+v, want Running and no place", st)
			}
			// The batch caller still waits, at the head: the headroom's one
			// call is inter2's. (That the collector's late grant is dropped,
			// not passed on, is TestATurnTakenInTheJoinIsNotPassedOn's: a
			// pass here would give nothing, as nothing fits.)
			if st := gatetest.InLine(t, a, "batch"); st.Ahead != 0 {
				t.Fatalf("the batch caller: %+v, want still at the head of the line", st)
			}
			select {
			case r := <-batch:
				t.Fatalf("the batch caller was answered (%v) while the headroom's one call runs", r.Err)
			default:
			}
		})
	}
}

// collectBetween splits the round trip of job's join to a line (its mark
// names job; its last command is the collection) before that collection,
// and sends the rest only once another collection of the process's
// grants (its collector's) took a grant in Redis; that collection's answer
// is held until a round trip names the job's key again after the join (a
// give-back of the lease the join took; a renewal, a second later), or
// answer. That round trip is held until
// answer: an acquire meanwhile finds the job still held.
type collectBetween struct {
	job                   string
	joined, collected     chan struct{}
	again, answered       chan struct{}
	joinOnce, collectOnce sync.Once
	againOnce, answerOnce sync.Once
	between, late         atomic.Bool
	first                 atomic.Bool // answered before that collection
}

func newCollectBetween(job string) *collectBetween {
	return &collectBetween{job: job, joined: make(chan struct{}), collected: make(chan struct{}),
		again: make(chan struct{}), answered: make(chan struct{})}
}

// answer lets every held round trip go on (the caller was answered).
func (h *collectBetween) answer() { h.answerOnce.Do(func() { close(h.answered) }) }

// isCollect picks line_collect.lua: two keys, a list of grants first.
func isCollect(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 4 || (args[0] != "evalsha" && args[0] != "eval") {
		return false
	}
	k, _ := args[3].(string)
	return fmt.Sprint(args[2]) == "2" && strings.Contains(k, ":line:grant:")
}

func (h *collectBetween) names(cmd redis.Cmder, key string) bool {
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && strings.HasSuffix(s, key) {
			return true
		}
	}
	return false
}

func (h *collectBetween) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *collectBetween) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.trip(ctx, []redis.Cmder{cmd}, func(ctx context.Context, cmds []redis.Cmder) error { return next(ctx, cmds[0]) })
	}
}

func (h *collectBetween) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { return h.trip(ctx, cmds, next) }
}

func (h *collectBetween) trip(ctx context.Context, cmds []redis.Cmder, next redis.ProcessPipelineHook) error {
	n := len(cmds)
	mark := slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return h.names(c, ":line:job:"+h.job) })
	if mark && n > 1 && isCollect(cmds[n-1]) && !isClosed(h.joined) {
		h.joinOnce.Do(func() { close(h.joined) })
		err := next(ctx, cmds[:n-1]) // the join, its give, the acquire it carries
		select {
		case <-h.collected:
			h.between.Store(true)
		case <-time.After(10 * time.Second): // the test fails: proves nothing
		}
		return errors.Join(err, next(ctx, cmds[n-1:]))
	}
	if i := slices.IndexFunc(cmds, isCollect); i >= 0 {
		// (Sent before the join, it may still run after its give.)
		err := next(ctx, cmds)
		if v, _ := cmds[i].(*redis.Cmd).Slice(); len(v) < 2 || !isClosed(h.joined) || isClosed(h.collected) {
			return err // nothing collected, or not the join's turn
		}
		h.collectOnce.Do(func() { close(h.collected) })
		select {
		case <-h.again:
		case <-h.answered:
			h.first.Store(true)
		}
		h.late.Store(true)
		return err
	}
	if !isClosed(h.joined) {
		return next(ctx, cmds)
	}
	if slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return h.names(c, "{"+h.job+"}:job") }) {
		first := false
		h.againOnce.Do(func() { first = true; close(h.again) })
		if first {
			<-h.answered
		}
	}
	return next(ctx, cmds)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// jobTrips counts the round trips that name job (its key, its done key,
// its mark in a line).
type jobTrips struct {
	job   string
	mark  bool // only its mark in a line
	n     atomic.Int64
	back  atomic.Int64 // the round trips it counts that were answered
	delay atomic.Int64 // added to each round trip it counts
}

func (h *jobTrips) names(cmd redis.Cmder) bool {
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && ((!h.mark && strings.Contains(s, "{"+h.job+"}")) || strings.HasSuffix(s, ":line:job:"+h.job)) {
			return true
		}
	}
	return false
}

func (h *jobTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *jobTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !h.names(cmd) {
			return next(ctx, cmd)
		}
		h.n.Add(1)
		time.Sleep(time.Duration(h.delay.Load()))
		defer h.back.Add(1)
		return next(ctx, cmd)
	}
}

func (h *jobTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !slices.ContainsFunc(cmds, h.names) {
			return next(ctx, cmds)
		}
		h.n.Add(1)
		time.Sleep(time.Duration(h.delay.Load()))
		defer h.back.Add(1)
		return next(ctx, cmds)
	}
}

// On a cluster the acquire takes the job before it asks the upstreams, so
// a call its upstream's line refuses gives the job back (Store.Acquire):
// for a caller that waits, that round trip goes beside its join instead of
// before it. With the give-back held, the caller is already in line; once
// it answers, the caller's turn takes the job (it was given back first).
// One node judges the upstreams before it takes the job: nothing to give
// back.
func TestLineJoinsBesideTheGiveBack(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		if !tg.IsCluster {
			continue
		}
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := budgetOptions(t)
			joins := &jobTrips{job: "j3", mark: true}
			// No request refills during the test: the turn is the settle's.
			c, h, a, l1 := stalledGate(t, tg, opts, slowRefill, undoOf("j3"), joins)
			got := gatetest.AcquireWait(ctx, c, "j3", time.Minute)
			// (Its job is held by the give-back: its Status says Running.)
			// Fails after 20 s where the join waits for the give-back, or
			// where there is no give-back to hold (the test would prove
			// nothing). The two go to their nodes at once: either may
			// reach its hook first.
			waitUntil(t, 20*time.Second, "j3's join sent while its give-back is held", func() bool {
				return joins.n.Load() > 0 && h.stalled.Load() > 0
			})
			h.free()
			gatetest.InLine(t, a, "j3")
			if err := l1.Succeed(ctx); err != nil { // the room goes to j3's turn
				t.Fatal(err)
			}
			_ = granted(t, got, "the caller in line, its give-back beside its join: its turn takes the job").Release(ctx)
		})
	}
}

// undoOf picks the give-back of job's key (job_undo.lua: one key, its
// token, value and TTL).
func undoOf(job string) func(args []any) bool {
	return func(args []any) bool {
		if len(args) != 7 || (args[0] != "evalsha" && args[0] != "eval") {
			return false
		}
		k, ok := args[3].(string)
		return ok && strings.HasSuffix(k, "{"+job+"}:job")
	}
}
