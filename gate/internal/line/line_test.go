package line

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate/internal/hub"
	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// process is one gate process's view of an upstream's line: its own
// store, hub and owner.
func process(t testing.TB, rdb store.Client, prefix string, cfg Config) *Line {
	t.Helper()
	st := store.New(rdb, store.Config{Lease: time.Minute, WaitTimeout: time.Second, Timeout: time.Second})
	h := hub.New(hub.Config{Subscriptions: st.Subscriptions(), Timeout: time.Second})
	return New(st, h, prefix, "up", cfg)
}

func mustJoin(t *testing.T, l *Line, c Caller) *Ticket {
	t.Helper()
	tk, err := l.Join(context.Background(), c, time.Now().Add(time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// waitAll waits for every ticket's turn (each must come), bounded.
func waitAll(t *testing.T, tks ...*Ticket) {
	t.Helper()
	for i, tk := range tks {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := tk.Wait(ctx)
		cancel()
		if err != nil {
			t.Fatalf("ticket %d: %v, want its turn", i, err)
		}
	}
}

func turn(t *testing.T, l *Line, n int) []Turned {
	t.Helper()
	got, err := l.Turn(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func count(ts []Turned) map[string]int {
	m := map[string]int{}
	for _, x := range ts {
		m[fmt.Sprint(x.Class, "/", x.Tenant)]++
	}
	return m
}

// A turn given by one process wakes the caller waiting in another, on
// one node and on a cluster.
func TestTurnWakesTheWaiterInAnotherProcess(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.Prefix(t)
			a, b := process(t, tg.Client, prefix, Config{}), process(t, tg.Client, prefix, Config{})
			tk := mustJoin(t, a, Caller{Tenant: "t"})
			if got := turn(t, b, 5); len(got) != 1 || got[0].Tenant != "t" {
				t.Fatalf("turns: %+v, want one to t", got)
			}
			waitAll(t, tk)
		})
	}
}

// Two tenants in one class, one offering ten times the other from 4
// processes, the budget serving 4 calls per window: each tenant with demand gets at least 0.9
// of its max-min fair share of every window's turns (the light tenant
// all it asks, the heavy one the rest), and no turn goes unused while
// anyone waits.
func TestFairShareBetweenTenants(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.Prefix(t)
			var ls [4]*Line
			for i := range ls {
				ls[i] = process(t, tg.Client, prefix, Config{})
			}
			const capacity = 4
			var tks []*Ticket
			waiting := map[string]int{}
			for w := range 20 {
				for i := range 10 {
					tks = append(tks, mustJoin(t, ls[i%len(ls)], Caller{Tenant: "heavy"}))
				}
				waiting["0/heavy"] += 10
				tks = append(tks, mustJoin(t, ls[w%len(ls)], Caller{Tenant: "light"}))
				waiting["0/light"]++
				got := count(turn(t, ls[(w+1)%len(ls)], capacity))
				share := fairShares(capacity, waiting)
				for tn, fair := range share {
					if float64(got[tn]) < 0.9*fair {
						t.Fatalf("window %d: %s got %d turns, fair share %.1f (waiting %v, turns %v)", w, tn, got[tn], fair, waiting, got)
					}
				}
				for tn, n := range got {
					waiting[tn] -= n
				}
			}
			turn(t, ls[0], len(tks))
			waitAll(t, tks...)
		})
	}
}

// fairShares is the max-min fair share of capacity among demands.
func fairShares(capacity int, demand map[string]int) map[string]float64 {
	share := map[string]float64{}
	left, open := float64(capacity), map[string]bool{}
	for k, d := range demand {
		if d > 0 {
			open[k] = true
		}
	}
	for len(open) > 0 && left > 1e-9 {
		each := left / float64(len(open))
		for k := range open {
			give := min(each, float64(demand[k])-share[k])
			share[k] += give
			left -= give
			if share[k] >= float64(demand[k]) {
				delete(open, k)
			}
		}
	}
	return share
}

// A higher class is served first however much a lower one floods; what it
// leaves goes to the lower class (work-conserving).
func TestClassesAndWorkConservation(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			l := process(t, tg.Client, redistest.Prefix(t), Config{})
			var tks []*Ticket
			for range 50 {
				tks = append(tks, mustJoin(t, l, Caller{Class: 0, Tenant: "batch"}))
			}
			for range 3 {
				tks = append(tks, mustJoin(t, l, Caller{Class: 9, Tenant: "user"}))
			}
			got := turn(t, l, 5)
			if c := count(got); c["9/user"] != 3 || c["0/batch"] != 2 {
				t.Fatalf("5 turns with 3 interactive waiting: %v; want 3 interactive, then 2 batch", c)
			}
			if got[0].Class != 9 || got[3].Class != 0 {
				t.Fatalf("turns in order %+v; interactive first", got)
			}
			turn(t, l, 100)
			waitAll(t, tks...)
		})
	}
}

// A tenant of weight 3 gets three turns for each of a weight-1 tenant's.
func TestWeights(t *testing.T) {
	l := process(t, miniClient(t), "w", Config{})
	for range 30 {
		mustJoin(t, l, Caller{Tenant: "gold", Weight: 3})
		mustJoin(t, l, Caller{Tenant: "free"})
	}
	c := count(turn(t, l, 20))
	if c["0/gold"] != 15 || c["0/free"] != 5 {
		t.Fatalf("20 turns: %v, want 15 gold, 5 free", c)
	}
}

func miniClient(t *testing.T) *redis.Client {
	_, c := redistest.Miniredis(t)
	return c
}

// A process that dies holding a place loses it within its lease: the turn
// goes to the live caller behind it.
func TestDeadPlaceExpiresWithinItsLease(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0)
	live := process(t, rdb, "d", Config{Lease: time.Minute})
	dead := process(t, rdb, "d", Config{Lease: time.Second})
	// The dead process joined, then stopped: its place is never renewed.
	tr := dead.st.Trip()
	tr.JoinLine(context.Background(), dead.keys, dead.join(&waiter{caller: Caller{Tenant: "a"}, quantum: store.Quantum}, time.Hour, 0))
	tr.Send(context.Background())
	tk := mustJoin(t, live, Caller{Tenant: "b"})
	redistest.Advance(m, 1100*time.Millisecond)
	if p, err := tk.Place(context.Background(), 0); err != nil || p.Ahead != 0 || p.Of != 1 {
		t.Fatalf("after the dead place's lease: %+v, %v; want nobody ahead", p, err)
	}
	if got := turn(t, live, 1); len(got) != 1 || got[0].Tenant != "b" {
		t.Fatalf("after the dead place's lease: turns %+v, want b's", got)
	}
	waitAll(t, tk)
}

// A caller whose turn cannot come before its deadline is told at once,
// with the expected wait, and takes no place.
func TestJoinRefusesAnUnmeetableDeadline(t *testing.T) {
	l := process(t, miniClient(t), "r", Config{})
	for range 9 {
		mustJoin(t, l, Caller{Tenant: "a"})
	}
	_, err := l.Join(context.Background(), Caller{Tenant: "a"}, time.Now().Add(time.Second), 5)
	var tl *TooLongError
	if !errors.As(err, &tl) || !errors.Is(err, ErrTooLong) || tl.Ahead != 9 || tl.Wait != 2*time.Second {
		t.Fatalf("10th in line at 5 turns/s with 1 s left: %v; want TooLongError, 9 ahead, 2 s", err)
	}
	if n := len(turn(t, l, 20)); n != 9 {
		t.Fatalf("%d turns given, want 9", n)
	}
}

// A caller whose deadline passes is answered then, leaves the line, and
// takes no turn. It leaves after Wait answers (Wait's doc): a turn given
// before is passed on, so the test waits for its place to go first.
func TestWaitEndsAtTheDeadline(t *testing.T) {
	l := process(t, miniClient(t), "dl", Config{})
	tk, err := l.Join(context.Background(), Caller{}, time.Now().Add(50*time.Millisecond), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Wait(context.Background()); !errors.Is(err, ErrDeadline) {
		t.Fatalf("Wait: %v, want ErrDeadline", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		p, err := tk.Place(context.Background(), 0)
		if err == nil && !p.Waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("place %+v (%v) 10 s after the deadline, want none", p, err)
		}
	}
	if got := turn(t, l, 1); len(got) != 0 {
		t.Fatalf("turns after the deadline: %+v, want none", got)
	}
}

// A caller that leaves after its turn was given passes the turn on to the
// next in line.
func TestLeavePassesAnUnusedTurnOn(t *testing.T) {
	rdb := miniClient(t)
	a, b := process(t, rdb, "p", Config{}), process(t, rdb, "p", Config{})
	first := mustJoin(t, a, Caller{Tenant: "x"})
	second := mustJoin(t, b, Caller{Tenant: "x"})
	turn(t, b, 1)
	if err := first.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitAll(t, second)
}

// Place counts the turns ahead and the wait they take at a rate.
func TestPlace(t *testing.T) {
	l := process(t, miniClient(t), "pl", Config{})
	for range 4 {
		mustJoin(t, l, Caller{Tenant: "a"})
	}
	tk := mustJoin(t, l, Caller{Tenant: "a"})
	p, err := tk.Place(context.Background(), 2)
	if exp := (Place{Waiting: true, Ahead: 4, Of: 5, Wait: 2500 * time.Millisecond}); err != nil || p != exp {
		t.Fatalf("Place: %+v, %v; want %+v", p, err, exp)
	}
}

// Joins from several processes at once, each its own client: every
// caller gets exactly one turn, and no turn is given twice.
func TestConcurrentJoinsFromSeveralProcesses(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.Prefix(t)
			const procs, callers = 4, 25
			ls := make([]*Line, procs)
			for i := range ls {
				ls[i] = process(t, tg.Client, prefix, Config{})
			}
			var wg sync.WaitGroup
			errs := make(chan error, procs*callers)
			for _, l := range ls {
				for c := range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						defer cancel()
						tk, err := l.Join(ctx, Caller{Tenant: fmt.Sprint(c % 3)}, time.Now().Add(30*time.Second), 0)
						if err == nil {
							err = tk.Wait(ctx)
						}
						errs <- err
					}()
				}
			}
			given := 0
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			for i := 0; ; i++ {
				select {
				case <-done:
				default:
					given += len(turn(t, ls[i%procs], 3))
					continue
				}
				break
			}
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if given != procs*callers {
				t.Fatalf("%d turns given for %d callers", given, procs*callers)
			}
		})
	}
}

// A Redis restart loses the line; its callers join again and are woken
// when their turns come: no wake-up is lost.
func TestNoLostWakeUpAcrossARedisRestart(t *testing.T) {
	srv := redistest.Server(t)
	a, b := process(t, srv.Client(t), "rs", Config{}), process(t, srv.Client(t), "rs", Config{})
	tks := []*Ticket{mustJoin(t, a, Caller{Tenant: "x"}), mustJoin(t, a, Caller{Tenant: "y"})}
	srv.Restart(t)
	turnUntilServed(t, b, tks...)
}

// A live process renews its callers' places: they outlive many leases.
// The lease leaves a renewal (every lease/3) late by up to 2/3 of it: a
// busy machine held one past 200 ms of a 300 ms lease.
func TestLivePlacesAreRenewed(t *testing.T) {
	srv := redistest.Server(t)
	const lease = 1500 * time.Millisecond
	l := process(t, srv.Client(t), "renew", Config{Lease: lease})
	tk := mustJoin(t, l, Caller{Tenant: "a"})
	for end := time.Now().Add(3 * lease); time.Now().Before(end); {
		p, err := tk.Place(context.Background(), 0)
		if err != nil || !p.Waiting {
			t.Fatalf("place: %+v, %v; a live caller's place must be renewed", p, err)
		}
		time.Sleep(lease / 10)
	}
	turn(t, l, 1)
	waitAll(t, tk)
}

// A process whose lease ended while it lived (paused past it, cut off
// from Redis) finds its places dropped at its next renewal, and its
// callers join again and get their turns.
func TestPlacesDroppedWhileTheProcessLivesJoinAgain(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0)
	l := process(t, rdb, "lost", Config{Lease: 300 * time.Millisecond})
	other := process(t, rdb, "lost", Config{})
	tk := mustJoin(t, l, Caller{Tenant: "a"})
	redistest.Advance(m, time.Second) // Redis's clock passes the lease; no renewal came
	turnUntilServed(t, other, tk)
}

// A Redis paused past the places' leases (a long fork, a stalled VM)
// drops them when it resumes; their live callers join again and get
// their turns.
func TestPlacesSurviveARedisPausedPastTheirLease(t *testing.T) {
	srv := redistest.Server(t)
	const lease = 300 * time.Millisecond
	a, b := process(t, srv.Client(t), "pause", Config{Lease: lease}), process(t, srv.Client(t), "pause", Config{Lease: lease})
	tks := []*Ticket{mustJoin(t, a, Caller{Tenant: "x"}), mustJoin(t, a, Caller{Tenant: "y"})}
	srv.Pause(4 * lease)
	turnUntilServed(t, b, tks...)
}

// turnUntilServed gives a turn every few milliseconds, as a budget
// refilling would, until every ticket's Wait returned its turn.
func turnUntilServed(t *testing.T, by *Line, tks ...*Ticket) {
	t.Helper()
	got := make(chan error, len(tks))
	for _, tk := range tks {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got <- tk.Wait(ctx)
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; n < len(tks); {
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("%v, want the turn", err)
			}
			n++
		case <-time.After(20 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d callers had no turn", len(tks)-n, len(tks))
			}
			_, _ = by.Turn(context.Background(), 1)
		}
	}
}

// The collector runs only while this process has callers in line: once
// they have had their turns it ends, and its subscription with it.
func TestCollectorEndsWhenNobodyWaits(t *testing.T) {
	l := process(t, miniClient(t), "idle", Config{})
	tk := mustJoin(t, l, Caller{})
	turn(t, l, 1)
	waitAll(t, tk)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		l.mu.Lock()
		running := l.running
		l.mu.Unlock()
		if !running && l.h.Listeners() == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("collector running %v, %d hub listeners, after every turn", running, l.h.Listeners())
		}
	}
}

// A turn collected as the caller's deadline passes is not answered late:
// Wait says the deadline passed, and the turn goes to the next caller.
// The deadline is far from the joins, turn and collection before it (a
// few round trips): a busy machine held them past 100 ms, and the turn
// then went on before it was collected.
func TestATurnPastTheDeadlineGoesOn(t *testing.T) {
	l := process(t, miniClient(t), "late", Config{})
	late, err := l.Join(context.Background(), Caller{Tenant: "a"}, time.Now().Add(2*time.Second), 0)
	if err != nil {
		t.Fatal(err)
	}
	next := mustJoin(t, l, Caller{Tenant: "a"})
	turn(t, l, 1)
	select {
	case <-late.w.granted: // collected before the deadline
	case <-time.After(time.Until(late.w.deadline)):
		t.Fatal("the turn was not collected before the caller's deadline: the test proves nothing")
	}
	time.Sleep(time.Until(late.w.deadline))
	if err := late.Wait(context.Background()); !errors.Is(err, ErrDeadline) {
		t.Fatalf("Wait past the deadline: %v, want ErrDeadline", err)
	}
	waitAll(t, next)
}

// On a cluster, the master that holds the line restarts (empty, as one
// that persists nothing does): the callers join again through their
// sharded subscriptions' resubscription and get their turns.
func TestNoLostWakeUpAcrossAClusterMasterRestart(t *testing.T) {
	c := redistest.Cluster(t, 3, 0)
	a, b := process(t, c.Client(t), "crs", Config{}), process(t, c.Client(t), "crs", Config{})
	tks := []*Ticket{mustJoin(t, a, Caller{Tenant: "x"}), mustJoin(t, a, Caller{Tenant: "y"})}
	m, err := c.Client(t).MasterForKey(context.Background(), a.keys.Line)
	if err != nil {
		t.Fatal(err)
	}
	c.Server(m.Options().Addr).Restart(t)
	c.WaitOK(t)
	turnUntilServed(t, b, tks...)
}

// A turn given to a place this process took but does not know (a join
// whose answer was lost on the way back) is passed on to the next caller.
func TestATurnForNobodyGoesOn(t *testing.T) {
	l := process(t, miniClient(t), "nobody", Config{Lease: time.Hour}) // not when its memory of the turn ends
	tr := l.st.Trip()
	tr.JoinLine(context.Background(), l.keys, l.join(&waiter{caller: Caller{Tenant: "a"}, quantum: store.Quantum}, time.Hour, 0))
	tr.Send(context.Background())
	next := mustJoin(t, l, Caller{Tenant: "a"})
	if got := turn(t, l, 1); len(got) != 1 {
		t.Fatalf("turns %+v, want one (to the unknown place)", got)
	}
	waitAll(t, next)
}

// Where the client cannot subscribe, the hub says so and the collector
// polls: the turn still comes.
func TestTurnComesWithoutPubSub(t *testing.T) {
	rdb := miniClient(t)
	st := store.New(rdb, store.Config{Lease: time.Minute, WaitTimeout: time.Second, Timeout: time.Second})
	polling := New(st, hub.New(hub.Config{Timeout: time.Second}), "nosub", "up", Config{Lease: time.Hour}) // no renewal meanwhile
	tk := mustJoin(t, polling, Caller{})
	time.Sleep(100 * time.Millisecond) // the collector has collected nothing and waits: only a poll finds the turn
	turn(t, process(t, rdb, "nosub", Config{}), 1)
	waitAll(t, tk)
}

// A line lost with its server (a restart of a master that persists
// nothing, on one node or a cluster) drops every place; a caller who
// arrives before the callers who waited join again does not go ahead of
// them: they join at their first arrival, in their order.
func TestJoinAgainKeepsTheFirstArrival(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			prefix := redistest.UniqueKey(t)
			a, b := process(t, tg.Client, prefix, Config{}), process(t, tg.Client, prefix, Config{})
			// a's collections are the test's, so that a learns of the loss
			// only after the later caller joined.
			collectedByTest(a)
			first := mustJoin(t, a, Caller{Tenant: "x"})
			second := mustJoin(t, a, Caller{Tenant: "y"})
			loseLine(t, tg.Client, a)
			for t0 := time.Now(); time.Since(t0) < 5*time.Millisecond; { // a later millisecond
				time.Sleep(time.Millisecond)
			}
			later := mustJoin(t, b, Caller{Tenant: "z"})
			if !a.collect(ctx, false) { // a learns the line was lost: its callers join again
				t.Fatal("a's collection was not answered")
			}
			got := turn(t, b, 3)
			var order string
			for _, x := range got {
				order += x.Tenant
			}
			if order != "xyz" {
				t.Fatalf("turns after the line was lost went to %q, want %q: the callers who waited first, then the later arrival", order, "xyz")
			}
			a.collect(ctx, false) // their turns
			waitAll(t, first, second, later)
		})
	}
}

// Every collection after a line was lost (each join's and the
// collector's) finds the same callers lost. Each caller has one rejoin
// in flight at a time: a collection meanwhile leaves it to that one, so
// the line holds one place a caller, not one a collection (after a
// cluster master's restart in a storm, four a caller: the places ahead
// of a join, and the waits told, were three to four times too many). A
// rejoin that was not answered is tried again by the next collection.
func TestALostCallerRejoinsOnceAtATime(t *testing.T) {
	ctx := context.Background()
	rdb := miniClient(t)
	a, tk := lostCaller(t, rdb, "once")
	b := process(t, rdb, "once", Config{})
	first, second := a.wake(store.LineCollected{}), a.wake(store.LineCollected{})
	if len(first.lost) != 1 || len(second.lost) != 0 {
		t.Fatalf("lost: %d, then %d while its rejoin is in flight, want 1 then 0", len(first.lost), len(second.lost))
	}
	// Not answered (its round trip never sent): the next collection
	// finds it lost again.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if a.rejoin(gone, first.lost) {
		t.Fatal("a rejoin that was never sent reported answered")
	}
	again := a.wake(store.LineCollected{})
	if len(again.lost) != 1 {
		t.Fatalf("after an unanswered rejoin: %d lost, want the caller again", len(again.lost))
	}
	if !a.rejoin(ctx, again.lost) {
		t.Fatal("rejoin not answered")
	}
	if n, err := rdb.ZCard(ctx, a.keys.Line).Result(); err != nil || n != 1 {
		t.Fatalf("%d places in line (%v), want the caller's one", n, err)
	}
	if got := turn(t, b, 1); len(got) != 1 {
		t.Fatalf("%d turns for the caller that joined again, want 1", len(got))
	}
	a.collect(ctx, false)
	waitAll(t, tk)
}

// A rejoin answered after its caller left gives its new place up.
func TestARejoinOfACallerThatLeftLeaves(t *testing.T) {
	ctx := context.Background()
	rdb := miniClient(t)
	a, tk := lostCaller(t, rdb, "left")
	lost := a.wake(store.LineCollected{}).lost
	if len(lost) != 1 {
		t.Fatalf("%d lost, want the caller", len(lost))
	}
	if err := tk.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if !a.rejoin(ctx, lost) {
		t.Fatal("rejoin not answered")
	}
	if n, err := rdb.ZCard(ctx, a.keys.Line).Result(); err != nil || n != 0 {
		t.Fatalf("%d places left in line (%v), want none: the caller left", n, err)
	}
}

// lostCaller is a process (whose collections are the test's) with one
// caller in line, and the line then lost.
func lostCaller(t *testing.T, rdb *redis.Client, prefix string) (*Line, *Ticket) {
	t.Helper()
	a := process(t, rdb, prefix, Config{})
	collectedByTest(a)
	tk := mustJoin(t, a, Caller{Tenant: "x"})
	loseLine(t, rdb, a)
	return a, tk
}

// collectedByTest makes l's collections the test's: no collector starts.
func collectedByTest(l *Line) {
	l.mu.Lock()
	l.running = true
	l.mu.Unlock()
}

// loseLine deletes l's line, as a server that lost its data does.
func loseLine(t *testing.T, c redis.Cmdable, l *Line) {
	t.Helper()
	if err := c.Del(context.Background(), l.keys.Line, l.keys.Owners, l.keys.Meta, l.keys.Owners+":"+l.owner).Err(); err != nil {
		t.Fatal(err)
	}
}

// A turn its caller took in its join's round trip (TurnTaken), before
// this process collected it, was used: Wait returns at once; the
// collection that brings it later drops it, and a Leave after it (Wait
// past the deadline) passes nothing on. Passed on, that turn would be
// given twice: a line without Config.Pass gives the next caller another
// (Turn), while the first caller's call runs.
func TestATurnTakenInTheJoinIsNotPassedOn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		taken func(tk *Ticket) // the caller's answer after TurnTaken
	}{
		{"waited", func(tk *Ticket) {
			if err := tk.Wait(context.Background()); err != nil {
				t.Fatalf("Wait after TurnTaken: %v, want nil at once", err)
			}
		}},
		{"left", func(tk *Ticket) {
			if err := tk.Leave(context.Background()); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var passed []string
			l := New(nil, nil, "p", "up", Config{Pass: func(_ context.Context, ms []string) { passed = append(passed, ms...) }})
			w := &waiter{deadline: time.Now().Add(time.Minute), granted: make(chan struct{}), gone: make(chan struct{}), member: "m1", token: "e1"}
			l.waiting[w.member] = w
			tk := &Ticket{l: l, w: w}
			tk.TurnTaken()
			tc.taken(tk)
			// A grant for nobody known here still goes on.
			got := l.wake(store.LineCollected{Token: "e1", Granted: []string{"m1", "m2"}})
			if exp := []string{"m2"}; fmt.Sprint(got.pass) != fmt.Sprint(exp) || len(got.lost) != 0 {
				t.Fatalf("collected after the turn was taken: passes %v, rejoins %d; want %v, 0", got.pass, len(got.lost), exp)
			}
			if len(passed) != 0 {
				t.Fatalf("the caller's answer passed %v on, want nothing", passed)
			}
		})
	}
}

// A caller's weight and class are checked at their documented edges:
// 0.001 to 1000 and 0 to store.MaxClass are accepted; a hair past
// either is refused.
func TestCallerEdges(t *testing.T) {
	for _, tc := range []struct {
		c  Caller
		ok bool
	}{
		{Caller{Weight: 0.001}, true},
		{Caller{Weight: 1000}, true},
		{Caller{Weight: 0.000999}, false},
		{Caller{Weight: 1000.001}, false},
		{Caller{Weight: math.NaN()}, false},
		{Caller{Class: store.MaxClass}, true},
		{Caller{Class: store.MaxClass + 1}, false},
		{Caller{Class: -1}, false},
	} {
		q, err := tc.c.quantum()
		if (err == nil) != tc.ok || (tc.ok && (q < 1 || q > store.MaxQuantum)) {
			t.Errorf("%+v: quantum %d, %v; want accepted %v", tc.c, q, err, tc.ok)
		}
	}
}

// Asked for no turns, Turn sends nothing (Redis unreachable here), and a
// place's expected wait at an unknown rate is none, not a division by
// zero.
func TestNothingAskedNothingSent(t *testing.T) {
	rdb := miniClient(t)
	l := process(t, rdb, "none", Config{})
	_ = rdb.Close()
	if got, err := l.Turn(context.Background(), 0); got != nil || err != nil {
		t.Fatalf("Turn(0): %v, %v; want nothing, and nothing sent", got, err)
	}
	if got := expected(3, 0); got != 0 {
		t.Fatalf("the wait behind 3 at an unknown rate: %v, want none", got)
	}
	if got := expected(3, 2); got != 2*time.Second {
		t.Fatalf("the wait behind 3 at 2 a second: %v, want 2s", got)
	}
}
