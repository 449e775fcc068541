package line

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/retrygate/retrygate/gate/internal/hub"
	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/keyspace"
)

// Config is a line's settings; zero values mean the defaults.
type Config struct {
	// Lease is how long a place is kept without renewal: a process that
	// dies loses its callers' places within it (default: 10s). A live
	// process renews every Lease/3.
	Lease time.Duration
	// Timeout bounds the line's own commands (renewals, collections, a
	// leave after the caller's context ended) and the wait for a
	// subscription (default: 1s).
	Timeout time.Duration
	// Pass, when set, passes on the turns given to callers that did not
	// use them (their members), instead of Turn: a line whose turns
	// reserve calls in a budget gives them back there.
	Pass func(ctx context.Context, members []string)
	// Hold is how long a caller's class, once it joined, keeps from the
	// lower classes the headroom of the turns Give gives (0: none).
	Hold time.Duration
	// Give, when set, queues a give of the turns that fit in each join's
	// round trip, after the join: a caller that joins where its turn fits
	// (the headroom kept for its class) has it at once.
	Give func(ctx context.Context, t *store.Trip)
}

func (c Config) withDefaults() Config {
	if c.Lease <= 0 {
		c.Lease = 10 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Second
	}
	return c
}

// keep is the keys' TTL: renewals come every Lease/3, so a line outlives
// its last live waiter by at most this.
func (c Config) keep() time.Duration { return 2 * c.Lease }

// Caller is who asks for a turn.
type Caller struct {
	// Class orders callers first, 0 to 255, higher first (default: 0).
	Class int
	// Tenant shares its class's turns with the others asking, max-min
	// fairly; "" is a tenant too.
	Tenant string
	// Weight is the tenant's share against a weight of 1 (default: 1),
	// from 0.001 to 1000.
	Weight float64
}

// quantum is how far one turn advances the caller's tenant.
func (c Caller) quantum() (int64, error) {
	w := c.Weight
	if w == 0 {
		w = 1
	}
	if math.IsNaN(w) || w < 0.001 || w > 1000 {
		return 0, fmt.Errorf("line: weight %v is outside 0.001 to 1000", c.Weight)
	}
	if c.Class < 0 || c.Class > store.MaxClass {
		return 0, fmt.Errorf("line: class %d is outside 0 to %d", c.Class, store.MaxClass)
	}
	return min(max(int64(math.Round(store.Quantum/w)), 1), store.MaxQuantum), nil
}

// Line is one upstream's line, as one process sees it. Make it with New.
type Line struct {
	st    *store.Store
	h     *hub.Hub
	keys  store.LineKeys
	owner string
	cfg   Config

	mu      sync.Mutex
	waiting map[string]*waiter // by member
	// early are turns collected for no caller known here while a join was
	// on its way (its caller's, before its Join registered it); a turn
	// for nobody (a join whose answer was lost) is passed on.
	early map[string]time.Time
	// leaving are callers that left, by member, until their leave's
	// answer: a turn collected for one meanwhile is passed on.
	leaving map[string]time.Time
	// taken are callers that took their turn in their join's round trip
	// before this process collected it (TurnTaken), by member: that turn,
	// when a collection brings it, was used and is dropped.
	taken   map[string]time.Time
	running bool          // the collector runs
	kick    chan struct{} // tells the collector a waiter left
	check   chan struct{} // asks the collector to collect: a new token
	token   string        // the owner's token, as last read
	joining int           // joins sent and not yet registered
}

// waiter is one caller in line from this process.
type waiter struct {
	caller   Caller
	quantum  int64
	deadline time.Time
	mark     string        // the key of its job's mark, "" for none
	granted  chan struct{} // closed when the turn is collected
	gone     chan struct{} // closed when the caller leaves
	// Guarded by Line.mu. token is the owner's when the place was taken.
	member, token string
	done          bool // answered: its turn used, or left
	took          bool // its turn taken in its join's round trip (TurnTaken)
	// rejoining: a rejoin of its lost place is in flight; other
	// collections that find it lost meanwhile leave it to that one.
	rejoining bool
}

// New returns upstream's line under the gate's key prefix, over the
// gate's store and hub.
func New(st *store.Store, h *hub.Hub, prefix, upstream string, cfg Config) *Line {
	l, o, m, g := keyspace.Line(prefix, upstream)
	var id [6]byte
	_, _ = rand.Read(id[:])
	return &Line{
		st: st, h: h, cfg: cfg.withDefaults(),
		keys:    store.LineKeys{Line: l, Owners: o, Meta: m, Grants: g},
		owner:   hex.EncodeToString(id[:]),
		waiting: make(map[string]*waiter),
		early:   make(map[string]time.Time),
		leaving: make(map[string]time.Time),
		taken:   make(map[string]time.Time),
		kick:    make(chan struct{}, 1),
		check:   make(chan struct{}, 1),
	}
}

// Owner names this process in the line.
func (l *Line) Owner() string { return l.owner }

// Ticket is a caller's place in line: Wait for the turn, or Leave.
type Ticket struct {
	l     *Line
	w     *waiter
	ahead int
}

// Ahead counts the turns that came before the ticket's when it joined.
func (t *Ticket) Ahead() int { return t.ahead }

// Member is the ticket's place in the line (it changes when the caller
// joins again after its process's places were dropped).
func (t *Ticket) Member() string {
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	return t.w.member
}

// Join takes a place in line for c until deadline. rate is the turns per
// second the upstream's budget is expected to give (0: unknown); when the
// turns ahead cannot come before the deadline at that rate, Join takes no
// place and returns a *TooLongError with the expected wait.
func (l *Line) Join(ctx context.Context, c Caller, deadline time.Time, rate float64) (*Ticket, error) {
	return l.JoinMarked(ctx, c, deadline, rate, "", nil)
}

// JoinMarked is Join for a caller whose place is also written at mark
// (keyspace.LineMark), until its deadline, so that any process can read
// it (store.Trip.PlaceOfJob). then, when set (with Config.Give), queues
// on the join's round trip, after its give and before its collection,
// what the caller does with a turn given there (store.Trip.AcquireInTurn):
// the turn's call costs no round trip of its own.
func (l *Line) JoinMarked(ctx context.Context, c Caller, deadline time.Time, rate float64, mark string, then func(t *store.Trip)) (*Ticket, error) {
	q, err := c.quantum()
	if err != nil {
		return nil, err
	}
	left := time.Until(deadline)
	if left <= 0 {
		return nil, ErrDeadline
	}
	w := &waiter{caller: c, quantum: q, deadline: deadline, mark: mark, granted: make(chan struct{}), gone: make(chan struct{})}
	l.mu.Lock()
	l.joining++
	l.mu.Unlock()
	tr := l.st.Trip()
	r := tr.JoinLine(ctx, l.keys, l.join(w, left, rate))
	var cr store.Reply[store.LineCollected]
	if l.cfg.Give != nil {
		// The turns that fit, and this process's turns collected, in the
		// join's round trip: a caller whose turn fits now (the headroom
		// kept for its class) has it without a wake-up and a collection.
		l.cfg.Give(ctx, &tr)
		if then != nil {
			then(&tr)
		}
		cr = tr.CollectLine(ctx, l.keys, l.owner)
	}
	tr.Send(ctx)
	j, err := r.Result()
	t, err := l.joined(ctx, w, j, err)
	if c, cerr := cr.Result(); cerr == nil && l.cfg.Give != nil {
		// Whatever the join's answer, the grants collected are taken: this
		// caller's among them is woken at once, and the turns passed on or
		// the places joined again cost no round trip in its path.
		if rest := l.wake(c); rest.pass != nil || rest.lost != nil {
			go func() {
				bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.Timeout)
				defer cancel()
				l.settle(bctx, rest)
			}()
		}
	}
	return t, err
}

// joined registers w, whose join answered j.
func (l *Line) joined(ctx context.Context, w *waiter, j store.LineJoined, err error) (*Ticket, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.joining--
	if err != nil {
		return nil, err
	}
	if !j.Joined {
		return nil, &TooLongError{Ahead: int(j.Ahead), Wait: j.Wait}
	}
	w.member, w.token = j.Member, j.Token
	if j.Token != l.token {
		// The process's places were dropped (its lease ended, the line
		// was lost): its other callers join again.
		l.token = j.Token
		if len(l.waiting) > 0 {
			signal(l.check)
		}
	}
	l.registerLocked(ctx, w)
	return &Ticket{l: l, w: w, ahead: int(j.Ahead)}, nil
}

func (l *Line) join(w *waiter, left time.Duration, rate float64) store.LineJoin {
	return store.LineJoin{Class: w.caller.Class, Quantum: w.quantum, Owner: l.owner, Tenant: w.caller.Tenant,
		Lease: l.cfg.Lease, Left: left, Keep: l.cfg.keep(), Rate: rate, Mark: w.mark, Hold: l.cfg.Hold}
}

// registerLocked puts w among the waiters (its turn may have been
// collected already) and starts the collector; l.mu must be held.
func (l *Line) registerLocked(ctx context.Context, w *waiter) {
	if _, ok := l.early[w.member]; ok {
		delete(l.early, w.member)
		close(w.granted)
		return
	}
	l.waiting[w.member] = w
	if !l.running {
		l.running = true
		go l.collector(context.WithoutCancel(ctx))
	}
}

// TurnTaken tells the ticket that its caller took its turn in its join's
// round trip (JoinMarked's then), which found the turn at the place the
// join gave it: Wait returns nil at once. Another collection of this
// process (the collector, another caller's join) may have taken the
// grant from the list between the join's give and the join's own
// collection, and wake nobody yet; when it does, that turn is dropped, not
// passed on: its call is the caller's, who gives it back (not Leave).
func (t *Ticket) TurnTaken() {
	l, w := t.l, t.w
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.done {
		return
	}
	w.took = true
	if isClosed(w.granted) {
		return
	}
	delete(l.waiting, w.member)
	l.taken[w.member] = time.Now()
	close(w.granted)
}

// Wait blocks until the ticket's turn comes (nil), its deadline passes
// (ErrDeadline) or ctx ends (ctx.Err()). Either way but the first, the
// caller leaves the line, after Wait returns; a turn given meanwhile is
// passed on.
func (t *Ticket) Wait(ctx context.Context) error {
	w := t.w
	timer := time.NewTimer(time.Until(w.deadline))
	defer timer.Stop()
	var err error
	select {
	case <-w.granted:
		if !time.Now().Before(w.deadline) {
			// Collected as the deadline passed: not answered late, the
			// turn goes on (Leave).
			err = ErrDeadline
			break
		}
		t.l.mu.Lock()
		used := !w.done
		w.done = true
		t.l.mu.Unlock()
		if used {
			return nil
		}
		return ErrLeft
	case <-w.gone:
		return ErrLeft
	case <-timer.C:
		err = ErrDeadline
	case <-ctx.Done():
		err = ctx.Err()
	}
	// Answered now; its place is given up meanwhile, so that a deadline
	// is never passed waiting for Redis (a turn given to it goes on).
	go func() {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.l.cfg.Timeout)
		defer cancel()
		_ = t.Leave(lctx)
	}()
	return err
}

// Leave gives up the ticket's place. A turn it was given and did not use
// goes to the next caller in line. Leaving twice, or after Wait, does
// nothing.
func (t *Ticket) Leave(ctx context.Context) error {
	l, w := t.l, t.w
	l.mu.Lock()
	if w.done {
		l.mu.Unlock()
		return nil
	}
	w.done = true
	close(w.gone)
	member := w.member
	granted := isClosed(w.granted)
	delete(l.waiting, member)
	if !granted {
		l.leaving[member] = time.Now()
	}
	took := w.took
	l.mu.Unlock()
	signal(l.kick)
	if took {
		return nil // its call is its caller's to give back
	}
	if !granted {
		tr := l.st.Trip()
		r := tr.LeaveLine(ctx, l.keys, l.owner, member)
		tr.Send(ctx)
		left, err := r.Result()
		if err == nil && left != store.NotInLine {
			// Not in the list of grants: no collect can find it. (Not in
			// line: a collect in flight may, and passes it on.)
			l.mu.Lock()
			delete(l.leaving, member)
			l.mu.Unlock()
		}
		if err != nil || left != store.TurnTaken {
			return err
		}
	}
	return l.pass(ctx, []string{member})
}

// pass passes on the turns given to members that did not use them.
func (l *Line) pass(ctx context.Context, members []string) error {
	if l.cfg.Pass != nil {
		l.cfg.Pass(ctx, members)
		return nil
	}
	_, err := l.Turn(ctx, len(members))
	return err
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Place is where a ticket stands.
type Place struct {
	// Waiting: the ticket still waits for its turn; Ahead counts the
	// turns before it, Of the callers waiting in all.
	Waiting   bool
	Ahead, Of int
	// Wait is the expected wait at the rate given (0: unknown).
	Wait time.Duration
}

// Place reads where the ticket stands now; rate is the turns per second
// expected (0: unknown). Turns to callers who join later in a less served
// tenant may still come first: that is the fair share.
func (t *Ticket) Place(ctx context.Context, rate float64) (Place, error) {
	l := t.l
	l.mu.Lock()
	member := t.w.member
	l.mu.Unlock()
	tr := l.st.Trip()
	r := tr.PlaceInLine(ctx, l.keys, member)
	tr.Send(ctx)
	p, err := r.Result()
	if err != nil || p.Ahead < 0 {
		return Place{Of: int(p.Waiting)}, err
	}
	return Place{Waiting: true, Ahead: int(p.Ahead), Of: int(p.Waiting), Wait: expected(p.Ahead, rate)}, nil
}

// expected is the wait for the turn after ahead others at rate per
// second.
func expected(ahead int64, rate float64) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(float64(ahead+1) * float64(time.Second) / rate))
}

// Turned is a turn given.
type Turned struct {
	Class  int
	Tenant string
}

// Turn gives up to n turns to the callers in line, in its order (class,
// then each tenant's fair share, then arrival), and wakes them wherever
// they wait. Call it when the upstream's budget can serve n more calls;
// it returns the turns given, fewer than n when fewer wait.
func (l *Line) Turn(ctx context.Context, n int) ([]Turned, error) {
	if n <= 0 {
		return nil, nil
	}
	tr := l.st.Trip()
	r := tr.TurnLine(ctx, l.keys, n, l.cfg.Lease, l.cfg.keep())
	tr.Send(ctx)
	es, err := r.Result()
	if err != nil {
		return nil, err
	}
	out := make([]Turned, len(es))
	for i, e := range es {
		out[i] = Turned{Class: e.Class, Tenant: e.Tenant}
	}
	return out, nil
}
