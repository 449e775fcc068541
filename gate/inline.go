package gate

import (
	"context"
	"sync"
	"time"

	"github.com/retrygate/retrygate/gate/internal/line"
	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/gate/internal/upstream"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/redisop"
)

// A call its upstream's budget refuses, whose caller can wait (AcquireWait,
// Options.Wait), takes a place in that upstream's line (gate/internal/line)
// instead of the refusal (as does one that meets the upstream's probe
// running: the probe's settle gives the turns, or cools it again): its
// class and tenant from its context (WithPriority, WithTenant), its
// deadline the wait's end. The budget and
// the line are one idea of whose turn it is (store/lua/budget_line.lua):
// while anyone waits, a call without a turn is not admitted past them, and
// a refused call without a wait is told its turn after theirs. Turns are
// given as the budget can serve them (line_give.lua, which reserves each
// turn's call): by a settle that releases a reservation, in its own round
// trip, and by each process with callers in line when the refill the
// budget predicts comes. A turn wakes its caller through the hub; its
// acquire takes the reservation over. A turn given in the caller's own
// join is taken there: on one node its acquire goes in the join's round
// trip (inTurn).

// inLine is one upstream's line, with the budget its turns are given by.
type inLine struct {
	g       *Gate
	of      int // the upstream's index among the gate's
	name    string
	line    *line.Line
	keys    store.LineKeys
	budget  store.BudgetKeys
	reserve store.BudgetReserve

	mu      sync.Mutex
	waiting int            // this process's callers in line
	jobs    map[string]int // of them, by job key (solo)
	giving  bool           // the giver runs
	kick    chan struct{}  // a caller joined
}

// newLines makes a line for each upstream with a budget; nil without.
func (g *Gate) newLines() []*inLine {
	var out []*inLine
	names := append([]string{g.opts.Upstream}, g.opts.UpstreamPolicy.Fallbacks...)
	for i := range g.ups.Len() {
		bk, reserve, ok := g.ups.Budget(i)
		if !ok {
			continue
		}
		q := &inLine{g: g, of: i, name: names[i], budget: bk, reserve: reserve, kick: make(chan struct{}, 1)}
		l, o, m, gr := keyspace.Line(g.opts.Prefix, names[i])
		q.keys = store.LineKeys{Line: l, Owners: o, Meta: m, Grants: gr}
		q.line = line.New(g.store, g.hub, g.opts.Prefix, names[i], line.Config{Lease: q.lease(), Timeout: g.opts.Redis.Timeout, Pass: q.pass,
			Hold: headroomHold, Give: func(ctx context.Context, t *store.Trip) { q.give(ctx, t, nil, false) }})
		out = append(out, q)
	}
	return out
}

// maxLineLease bounds how long the places of a process that died are
// kept, and the reservation of a turn given to one of its callers.
const maxLineLease = 10 * time.Second

// lease is how long a process's places, and a turn's reservation, are
// kept without it: the gate's lease, at most maxLineLease.
func (q *inLine) lease() time.Duration { return min(q.g.opts.Lease, maxLineLease) }

// lineOf is upstream i's line, nil for none.
func (g *Gate) lineOf(i int) *inLine {
	for _, q := range g.lines {
		if q.of == i {
			return q
		}
	}
	return nil
}

// lineNamed is the named upstream's line, nil for none.
func (g *Gate) lineNamed(name string) *inLine {
	for _, q := range g.lines {
		if q.name == name && name != "" {
			return q
		}
	}
	return nil
}

// Headroom: while a lower class has the head of the line, its turns
// leave two calls of the budget (beside its reserve) for a higher class
// that joined within the last headroomHold, so that class's next callers
// have their turns at once (a join gives the turns that fit in its own
// round trip) instead of a refill behind the lower class's. In-order
// turns alone give an interactive caller at 0.3 of the limit a p99 wait
// of 2.5 refills; one call of headroom left a p99 of 2.2-2.6 refills with
// both cores loaded, when two interactive callers came within a refill.
// The headroom is a level, not a rate: the budget refills as fast, and
// once no higher class asked for headroomHold the lower class takes it.
const (
	headroom     = 2
	headroomHold = 5 * time.Second
)

// give queues on t the turns the budget can serve now, after releasing
// the reservations of turns given and not used; timer names this process
// when its giver's timer asks.
func (q *inLine) give(ctx context.Context, t *store.Trip, unused []string, timer bool) store.Reply[store.LineGiven] {
	g := store.LineGive{Lease: q.lease(), Keep: 2 * q.lease(), Reservation: q.lease(), Reserve: q.reserve, Unused: unused, Headroom: headroom}
	if timer {
		g.Timer = q.line.Owner()
	}
	return t.GiveLine(ctx, q.keys, q.budget, g)
}

// pass gives back the reservations of turns given to callers that did
// not use them, and gives the turns on (line.Config.Pass).
func (q *inLine) pass(ctx context.Context, members []string) {
	unused := make([]string, 0, len(members))
	for _, m := range members {
		if u := store.TurnMember(m); u != "" {
			unused = append(unused, u)
		}
	}
	t := q.g.store.Trip()
	r := q.give(ctx, &t, unused, false)
	t.Send(ctx)
	if err := r.Err(); err != nil {
		q.g.emit(ctx, Event{Kind: EventRedisError, Upstream: q.name, Op: redisop.Upstream, Err: redisError(ctx, "line", err)})
	}
}

// enter counts a caller of this process into the line and starts the
// giver; leave counts it out.
func (q *inLine) enter(ctx context.Context) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waiting++
	if !q.giving {
		q.giving = true
		go q.giver(context.WithoutCancel(ctx))
	} else {
		select {
		case q.kick <- struct{}{}:
		default:
		}
	}
}

func (q *inLine) leave() {
	q.mu.Lock()
	q.waiting--
	q.mu.Unlock()
}

// solo counts a caller of the job whose key is key into this line until
// done, and reports whether it is the job's only caller here: the mark
// the join writes is then its own place, or another process's.
func (q *inLine) solo(key string) (alone bool, done func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.jobs == nil {
		q.jobs = make(map[string]int)
	}
	q.jobs[key]++
	return q.jobs[key] == 1, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.jobs[key]--; q.jobs[key] <= 0 {
			delete(q.jobs, key)
		}
	}
}

// inTurn is the acquire a caller sends in its join to the line, taking a
// turn given in that round trip (a higher class's headroom, a budget with
// room): its turn's call costs no round trip of its own.
type inTurn struct {
	gr   grant
	a    store.Acquire
	sent time.Time
}

// inTurn returns the acquire a caller of job (key, mark) sends in its
// join, and the function the join queues it with; nil, nil where none is
// sent: a cluster (the job is taken before its upstreams are asked,
// Store.Acquire), another caller of the job here, or its success not
// written yet (unwritten.go).
func (q *inLine) inTurn(ctx context.Context, job, key, mark string, alone bool) (*inTurn, func(*store.Trip)) {
	if !alone {
		return nil, nil
	}
	if b, _ := q.g.unwritten.refusal(job); b != nil {
		return nil, nil
	}
	it := &inTurn{gr: grant{job: job, key: key, token: store.NewToken(), tokens: tokensOf(ctx)}}
	it.a = q.g.acquireOf(ctx, &it.gr, nil)
	return it, func(t *store.Trip) {
		it.sent = time.Now()
		it.a.InTurn = t.AcquireInTurn(ctx, &it.a, q.of, mark, q.line.Owner())
	}
}

// take is the lease the join's acquire took with ticket's turn (with
// waited, the caller's time in line), and true; nil and false when it
// found no turn. The turn it found is the ticket's whether or not the
// join's own collection brought it: the acquire reads the mark the join
// wrote, for this process's one caller of the job (alone), so another
// collection here that took the grant first wakes nobody (TurnTaken).
// A turn found beside a join that failed is given back.
func (it *inTurn) take(ctx context.Context, q *inLine, t *line.Ticket, err error, waited time.Duration) (acquiredOr, bool) {
	if it == nil || it.a.InTurn == nil || !it.a.InTurn.Turned() {
		return acquiredOr{}, false
	}
	var member string
	if err == nil {
		member = store.TurnMember(t.Member())
	}
	tctx := context.WithValue(ctx, turnKey{}, turn{of: q.of, member: member, waited: waited})
	l, aerr := q.g.acquireAs(tctx, it.gr, nil, &it.a, it.sent)
	if err != nil {
		if l != nil {
			go func() {
				rctx, cancel := q.g.opCtx(ctx)
				defer cancel()
				_ = l.Release(rctx)
			}()
		}
		return acquiredOr{}, false
	}
	t.TurnTaken()
	return acquiredOr{l, aerr}, true
}

// giveCheck bounds the giver's sleep when the budget cannot say when the
// next call fits (a settle then gives the turn; this is the fallback for
// one lost with its process).
const giveCheck = time.Second

// joinLands is how soon the giver looks again when it found no caller in
// line while this process has callers joining.
const joinLands = 50 * time.Millisecond

// giver gives turns while this process has callers in line: at once, and
// then when the refill the budget predicts comes. Every process with
// callers in line runs one; one of them gives the refills, the others
// look again each second in case it died (line_give.lua). The give is one
// script, so two never give one call twice.
func (q *inLine) giver(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-q.kick:
		}
		q.mu.Lock()
		if q.waiting <= 0 {
			q.giving = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		gctx, cancel := q.g.opCtx(ctx)
		tr := q.g.store.Trip()
		r := q.give(gctx, &tr, nil, true)
		tr.Send(gctx)
		cancel()
		check := giveCheck
		if q.g.test.giveCheck > 0 {
			check = q.g.test.giveCheck
		}
		next := check
		if got, err := r.Result(); err == nil && got.Wait > 0 {
			next = min(got.Wait, check)
		} else if err == nil {
			// None waits, by Redis, while this process counts callers in
			// line: a join not landed yet (the giver starts before it).
			// Look again soon, when the join's place is there, instead of
			// sleeping the fallback through the wait it would report.
			next = min(joinLands, check)
		}
		t.Reset(next)
	}
}

// givesTurns reports whether a settle that does op to its upstream gives
// the line the calls that fit: not one that counts a failure against it,
// which may cool or pause it (a turn given then meets the cooldown).
func givesTurns(op upstream.Op) bool {
	return op == upstream.Keep || op == upstream.Recover || op == upstream.Unclaim
}

type turnKey struct{}

// turn is the turn a caller was given, on the context of its acquire.
type turn struct {
	of     int    // the upstream's index
	member string // its reservation (store.TurnMember)
	waited time.Duration
}

// lineRefusal is, on a budget's refusal, the upstream whose line a caller
// with a wait joins, and one call's refill there.
type lineRefusal struct {
	of  int
	gap time.Duration
	// undone, when set, closes once the job the refused acquire took is
	// given back (a cluster takes the job before it asks the upstreams):
	// for a caller that waits, that round trip goes beside its join
	// (take).
	undone chan struct{}
}

type waitsKey struct{}

// waits reports whether ctx's caller waits in line when its upstream's
// budget refuses it (AcquireWait with a wait).
func waits(ctx context.Context) bool { return ctx.Value(waitsKey{}) != nil }

// given returns once the job r's acquire took is given back, or ctx ends.
func (r *lineRefusal) given(ctx context.Context) {
	if r == nil || r.undone == nil {
		return
	}
	select {
	case <-r.undone:
	case <-ctx.Done():
	}
}

// turnOf is the turn on ctx: the upstream's index and its reservation;
// -1 and "" for none.
func turnOf(ctx context.Context) (int, string, time.Duration) {
	if t, ok := ctx.Value(turnKey{}).(turn); ok {
		return t.of, t.member, t.waited
	}
	return -1, "", 0
}

// mark is the key of the mark in this line of the job whose key is key
// (keyspace.LineMark).
func (q *inLine) mark(key string) string { return keyspace.LineMark(q.g.opts.Prefix, q.name, key) }

// placeOf queues on t a read of where the caller of the job whose key is
// key waits in each line.
func (g *Gate) placeOf(ctx context.Context, t *store.Trip, key string) []store.Reply[store.JobPlace] {
	out := make([]store.Reply[store.JobPlace], len(g.lines))
	for i, q := range g.lines {
		out[i] = t.PlaceOfJob(ctx, q.keys, q.mark(key), q.budget)
	}
	return out
}
