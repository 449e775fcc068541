package upstream

import (
	"context"
	"sync"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/keyspace"
)

// An upstream's budget is the rate limits its provider reports on every
// response (classify.Budget). It is kept beside the breaker in Redis. So
// every process reads what any process's last response said. An acquire
// asks it, in the acquire's own round trip, whether one more call fits.
// It counts the calls admitted and not yet settled. Reserve, don't mirror:
// concurrent processes cannot all see "enough left". The settle releases
// the call and records what its responses said, in the settle's round
// trip.

// BudgetPolicy is how every upstream admits calls by its budget.
type BudgetPolicy struct {
	// Off: no budget is read, written or judged.
	Off bool
	// Reserve is what admission keeps unspent of each limit.
	Reserve store.BudgetReserve
	// Margin is how long a budget outlives its last reset. It is dropped
	// then. The upstream admits without it until a response reports one
	// again.
	Margin time.Duration
}

func budgetKeys(prefix, name, key string) store.BudgetKeys {
	budget, calls := keyspace.Budget(prefix, name)
	return store.BudgetKeys{Upstream: key, Budget: budget, Calls: calls}
}

// Admissions are what an acquire of the run holding token asks the
// upstreams' budgets, as Keys. They are nil when budgets are off or the
// gate has no upstream. Every budget judges the call. The upstream that
// takes it reserves it.
//
// On one node the store judges them all with the job (store.Acquire). It
// reserves in the one that takes the call, whichever asks. On a cluster
// they answer side by side. So the member asks the first upstream this
// process does not know to refuse, by its breaker or by its budget within
// the wait it gave. Choose reserves the call in another that takes it, in
// one more round trip.
//
// turn is the reservation of the turn upstream turnOf's line gave the
// caller ("" for none). That upstream's budget takes it over.
func (s *Set) Admissions(token store.Token, tokens int64, turnOf int, turn string) []store.Admission {
	if s.budget.Off || len(s.keys) == 0 {
		return nil
	}
	out := make([]store.Admission, len(s.all))
	ask := 0
	for i := len(s.all) - 1; i >= 0; i-- {
		if !s.all[i].(*guarded).passing() {
			ask = i
		}
	}
	if turn != "" && turnOf >= 0 && turnOf < len(s.all) {
		ask = turnOf
	}
	for i, b := range s.all {
		out[i] = store.Admission{Keys: b.(*guarded).bk, Reserve: s.budget.Reserve, Tokens: tokens}
	}
	out[ask].Member = store.ReserveMember(token, tokens)
	if turn != "" && turnOf >= 0 && turnOf < len(s.all) {
		out[turnOf].Turn = turn
	}
	return out
}

// Budget returns upstream i's budget keys and what admission keeps in
// reserve. It returns false when budgets are off or i is not a guarded
// upstream.
func (s *Set) Budget(i int) (store.BudgetKeys, store.BudgetReserve, bool) {
	if s.budget.Off || i < 0 || i >= len(s.keys) {
		return store.BudgetKeys{}, store.BudgetReserve{}, false
	}
	return s.all[i].(*guarded).bk, s.budget.Reserve, true
}

// passing reports whether this process last saw the upstream refuse, by
// its breaker or by its budget, and that refusal has not ended by the
// local clock. A call is then not expected to go there.
func (b *guarded) passing() bool {
	return b.knownRefusing() || time.Now().UnixNano() < b.spentUntil.Load()
}

// spent notes that the upstream's budget refused a call for wait.
func (b *guarded) spent(wait time.Duration) {
	b.spentUntil.Store(time.Now().Add(wait).UnixNano())
}

// judgeBudget judges a budget's answer for an upstream its breaker
// permits (p: Permitted, or MayProbe once its wait is over).
func judgeBudget(name string, p Permit, a store.Admitted) (Permit, Status, bool) {
	if !a.Judged || a.Admitted {
		return p, Status{Name: name}, false
	}
	return Refused, Status{Name: name, Mode: store.ModeCooling, Reason: classify.ReasonRateLimited, RetryAfter: a.Wait, Budget: true,
		Gap: a.Gap, Limits: leftOf(a)}, true
}

// leftOf is what an admission's answer says is left, as a read's.
func leftOf(a store.Admitted) store.BudgetRead {
	left := func(n int64) store.BudgetLeft {
		if n < 0 {
			return store.BudgetLeft{} // not reported
		}
		return store.BudgetLeft{Reported: true, Left: n, Reset: -1}
	}
	return store.BudgetRead{Requests: left(a.Requests), Tokens: left(a.Tokens)}
}

// Left is what the run's upstream's budget had left after admitting its
// call. Limits and resets are not known. It is zero when the budget
// judged nothing.
func (c Choice) Left() store.BudgetRead {
	if !c.judged {
		return store.BudgetRead{}
	}
	return leftOf(c.admitted)
}

// reservation is the upstream whose budget holds the call a judgement
// reserved (-1 for none), and its member.
func (j Judgement) reservation() (int, string) {
	for i, a := range j.admitted {
		if a.Reserved != "" {
			return i, a.Reserved
		}
	}
	return -1, ""
}

// asked is the member the acquire asked to reserve its call with, "" for
// none.
func (j Judgement) asked() string {
	for _, a := range j.asks {
		if a.Member != "" {
			return a.Member
		}
	}
	return ""
}

// unreserved reports whether upstream i's budget judged the call without
// reserving it, when the acquire asked to reserve it. Then another
// upstream was asked: a cluster's acquire asks one.
func (j Judgement) unreserved(i int) bool {
	return i < len(j.admitted) && j.admitted[i].Judged && j.admitted[i].Reserved == "" && j.asked() != ""
}

// Release queues on t the release of the call the acquire reserved, for
// an acquire that gives its job up. It queues nothing when the acquire
// reserved none.
func (j Judgement) Release(ctx context.Context, t *store.Trip) store.Reply[int64] {
	i, m := j.reservation()
	if i < 0 {
		return store.Reply[int64]{}
	}
	return t.RecordBudget(ctx, j.set.all[i].(*guarded).bk, m, store.Reading{}, j.set.budget.Margin)
}

// reserve reserves the call in upstream i's budget, which judged it
// without reserving it. The same round trip releases the reservation the
// acquire made elsewhere. j's answers follow.
func (s *Set) reserve(ctx context.Context, st *store.Store, j Judgement, i int) (store.Admitted, error) {
	a := j.asks[i]
	a.Member = j.asked()
	t := st.Trip()
	r := t.Admit(ctx, a)
	released := j.Release(ctx, &t)
	t.Send(ctx)
	if released.Err() == nil {
		// Else it lapses with its lease, which no renewal keeps.
		if h, _ := j.reservation(); h >= 0 {
			j.admitted[h].Reserved = ""
		}
	}
	got, err := r.Result()
	if err == nil {
		j.admitted[i] = got
	}
	return got, err
}

// drop releases the reservation the acquire made in another upstream
// than the one the call uses, in a round trip of its own. That happens to
// a cluster's acquire that expected another upstream to take the call.
func (s *Set) drop(ctx context.Context, st *store.Store, j Judgement, used int) {
	h, _ := j.reservation()
	if h < 0 || h == used {
		return
	}
	t := st.Trip()
	r := j.Release(ctx, &t)
	t.Send(ctx)
	if r.Err() == nil { // else it lapses with its lease
		j.admitted[h].Reserved = ""
	}
}

// Release queues on t the release of the call the run reserved. It
// queues nothing when the run reserved none.
func (c Choice) Release(ctx context.Context, t *store.Trip) store.Reply[int64] {
	if c.member == "" {
		return store.Reply[int64]{}
	}
	return t.RecordBudget(ctx, c.b.(*guarded).bk, c.member, store.Reading{}, c.margin)
}

// Reserved reports whether the run's call is reserved in its upstream's
// budget, where a reading judges calls: its settle releases room there,
// which the upstream's line gives. A call the bound before the first 429
// admitted (store.Admitted.Bounded) is reserved too, but no line waits
// for it: no reading judges the upstream's calls yet.
func (c Choice) Reserved() bool { return c.member != "" && !c.admitted.Bounded }

// Renew queues on t the renewal of the run's reservation for one more
// lease, beside its lease's renewal. A call that runs longer than a lease
// stays counted while it holds its lease. Nothing is queued when it
// reserved none, or when the bound before the first 429 reserved it: that
// bound only spreads a queue over turns, and a call longer than a lease
// that lapses from it leaves room for one more.
func (c Choice) Renew(ctx context.Context, t *store.Trip) store.Reply[bool] {
	if c.member == "" || c.admitted.Bounded {
		return store.Reply[bool]{}
	}
	return t.RenewReservation(ctx, c.b.(*guarded).bk, c.member)
}

// Budget queues on t the settle of the run's call in its upstream's
// budget, in one script. The script writes:
//   - the release of its reservation;
//   - what its responses said (seen, read at now);
//   - for a call that settled with no reading, what it teaches the
//     upstream's learned rate (lesson). Learns decides; lesson.Teach is
//     the caller's wish.
//
// Nothing is queued for Free, with budgets off, or when there is nothing
// to write.
func (c Choice) Budget(ctx context.Context, t *store.Trip, seen *Seen, now time.Time, lesson store.Lesson) store.Reply[int64] {
	g, ok := c.b.(*guarded)
	if !ok || c.off {
		return store.Reply[int64]{}
	}
	r, ok := seen.reading(now)
	if !lesson.Teach || !c.Learns(seen) {
		lesson = store.Lesson{}
	}
	r.Lesson = lesson
	if !ok && c.member == "" && !lesson.Teach {
		return store.Reply[int64]{}
	}
	return t.RecordBudget(ctx, g.bk, c.member, r, c.margin)
}

// Unjudged reports whether the run's upstream had no reading its call was
// judged by, with budgets on. None was reported yet, or its last one
// lapsed. Until one is written, every process's calls go one at a time,
// or by a learned rate. So the first reading is worth writing at once
// (Early) rather than at the settle.
func (c Choice) Unjudged() bool {
	_, ok := c.b.(*guarded)
	return ok && !c.off && (!c.judged || c.admitted.Unread)
}

// learned reports whether a learned rate (from accepted calls, or
// starting slowly after a 429) judged the call upstream i takes, or the
// bound in flight before the first 429 (its 429 starts the rate, as an
// unjudged call's does: it does not cool the upstream for
// UpstreamPolicy.Cooldown).
func (j Judgement) learned(i int) bool {
	if i >= len(j.admitted) {
		return false
	}
	a := j.admitted[i]
	return a.Learned || a.Bounded || a.Unread && (a.Requests >= 0 || a.Tokens >= 0)
}

// Learned reports whether a rate learned from the provider's answers
// judged the run's call. After a 429 it is learned from accepted calls,
// or starts slowly.
func (c Choice) Learned() bool { return c.learned }

// Learns reports whether the run's call teaches its upstream's learned
// rate (Budget's lesson). It does when budgets are on, no reading judged
// the call, and its responses reported none. A call whose admission
// failed (an ACL without the budget's commands) teaches nothing: the
// lesson's script would fail too.
func (c Choice) Learns(seen *Seen) bool {
	_, ok := c.b.(*guarded)
	_, read := seen.reading(time.Now())
	return ok && !c.off && !read && !c.admitted.Failed && (!c.judged || c.admitted.Unread)
}

// Early queues on t what the run's responses said so far (seen, read at
// now), before its settle. It queues nothing when they said nothing.
func (c Choice) Early(ctx context.Context, t *store.Trip, seen *Seen, now time.Time) store.Reply[int64] {
	g, ok := c.b.(*guarded)
	r, seenAny := seen.reading(now)
	if !ok || c.off || !seenAny {
		return store.Reply[int64]{}
	}
	return t.RecordBudget(ctx, g.bk, "", r, c.margin)
}

// Seen is what one run's responses said about its upstream's budget: the
// newest reading of each limit, and the last response's. It is safe for
// concurrent use: a client may make concurrent requests in one run.
type Seen struct {
	mu       sync.Mutex
	req, tok seenQuota
	last     classify.Budget
	// refused: the run's call was refused for the provider's rate limit
	// and spent nothing. fitsAt and size are its short wait, the job's
	// own. A call of size tokens (0: the learned cost) fits at fitsAt
	// (zero: none).
	refused bool
	fitsAt  time.Time
	size    int64
}

// Refused notes that the run's call, of tokens tokens (0: not said), was
// refused for the provider's rate limit. fitsAt is when it fits, if that
// is a short wait that is the job's own (else zero). The settle writes it
// to the budget. The budget refuses calls of that size until then. It
// does not count the call as one whose reading shows what a call costs.
func (s *Seen) Refused(fitsAt time.Time, tokens int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused, s.fitsAt, s.size = true, fitsAt, max(tokens, 0)
}

// seenQuota is one limit's newest reading and when it was taken.
type seenQuota struct {
	q  classify.Quota
	at time.Time
}

// Observe keeps b where it is newer than what was seen, as the budget in
// Redis keeps it (budget_record.lua). Per limit it keeps the reading that
// leaves less at the later of the two, both refilled as they say. It
// keeps the later reading at equal levels. It also keeps the later one
// when either cannot say how it refills.
func (s *Seen) Observe(b classify.Budget) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.req.keep(b.Requests, b.At)
	s.tok.keep(b.Tokens, b.At)
	if !b.At.Before(s.last.At) {
		s.last = b
	}
}

func (s *seenQuota) keep(q classify.Quota, at time.Time) {
	if !q.Reported {
		return
	}
	cur := s.q
	newer := !cur.Reported
	if !newer {
		t := later(at, s.at)
		lq, ok1 := level(q, at, t)
		lc, ok2 := level(cur, s.at, t)
		newer = at.After(s.at)
		if ok1 && ok2 && lq != lc {
			newer = lq < lc
		}
	}
	if newer {
		s.q, s.at = q, at
	}
}

// level is what q, read at at, holds at t, refilled evenly to its size at
// its reset. It is false when q does not say how it refills.
func level(q classify.Quota, at, t time.Time) (float64, bool) {
	if q.Limit <= q.Remaining || !q.Reset.After(at) {
		return 0, false
	}
	if !t.Before(q.Reset) {
		return float64(q.Limit), true
	}
	return float64(q.Remaining) + float64(q.Limit-q.Remaining)*float64(t.Sub(at))/float64(q.Reset.Sub(at)), true
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// reading is what was seen, read at now; false when nothing was.
func (s *Seen) reading(now time.Time) (store.Reading, bool) {
	if s == nil {
		return store.Reading{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := store.Reading{Requests: s.req.quota(now), Tokens: s.tok.quota(now)}
	r.Refused = s.refused
	if s.fitsAt.After(now) {
		r.Fits, r.Size = s.fitsAt.Sub(now), s.size
	}
	return r, r.Requests.Reported || r.Tokens.Reported
}

func (s seenQuota) quota(now time.Time) store.Quota {
	if !s.q.Reported {
		return store.Quota{}
	}
	q := store.Quota{Reported: true, Remaining: s.q.Remaining, Limit: s.q.Limit, ResetIn: -1, Age: max(now.Sub(s.at), 0)}
	if !s.q.Reset.IsZero() {
		q.ResetIn = max(s.q.Reset.Sub(s.at), 0)
	}
	return q
}

// Fits is the wait, from now, until one call fits again as the run's last
// response said it. It is the wait the response's message stated
// (classify.Budget.RetryIn; stated is set). Else it is the refill of one
// request and the call's tokens at the rate its limits refill. The tokens
// are tokens when its caller said, else share of the token limit, as
// admission reserves. It is never the time until the limits are whole. ok
// is false when the run saw no response that tells. It is false too when
// its reading says the call fits already: that does not explain the
// refusal.
func (s *Seen) Fits(now time.Time, tokens int64, share float64) (wait time.Duration, stated, ok bool) {
	if s == nil {
		return 0, false, false
	}
	s.mu.Lock()
	b := s.last
	s.mu.Unlock()
	if b.At.IsZero() {
		return 0, false, false
	}
	if tokens <= 0 {
		tokens = int64(share * float64(b.Tokens.Limit))
	}
	at, ok := b.Fits(tokens)
	switch {
	case !ok:
		return 0, false, false
	case b.RetryIn > 0:
		return max(at.Sub(now), time.Millisecond), true, true
	case !at.After(b.At):
		return 0, false, false
	}
	return max(at.Sub(now), time.Millisecond), false, true
}
