package store

import (
	"context"
	_ "embed"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// An upstream's budget (lua/budget_*.lua) is the rate limits its provider
// last reported. It also holds the calls admitted against them and not
// yet settled. Every script reads the upstream's three keys, which share
// its slot.

var (
	//go:embed lua/budget_left.lua
	budgetLeftLua string
	//go:embed lua/budget_learned.lua
	budgetLearnedLua string
	//go:embed lua/budget_judge.lua
	budgetJudgeLua string
	//go:embed lua/budget_cost.lua
	budgetCostLua string
	//go:embed lua/budget_line.lua
	budgetLineLua string
	//go:embed lua/budget_admit.lua
	budgetAdmitLua string
	//go:embed lua/acquire_budget.lua
	acquireBudgetLua string
	//go:embed lua/budget_record.lua
	budgetRecordLua string
	//go:embed lua/budget_read.lua
	budgetReadLua string
	//go:embed lua/budget_renew.lua
	budgetRenewLua string
	//go:embed lua/budget_learn.lua
	budgetLearnLua string // teach, in budgetRecordScript
	//go:embed lua/budget_forget.lua
	budgetForgetLua string

	budgetAdmitScript = newScript(budgetLeftLua + budgetCostLua + budgetLearnedLua + budgetJudgeLua + budgetLineLua + budgetAdmitLua)
	// The acquire of a job and its upstreams' budgets in one script, on
	// one node (Store.Acquire).
	acquireBudgetScript = newScript(budgetLeftLua + budgetCostLua + budgetLearnedLua + budgetJudgeLua + budgetLineLua + jobTakeLua + upstreamValueLua + acquireBudgetLua)
	// A settle's record, in one script: the release, the reading and, for
	// a call with none, what it teaches the learned rate.
	budgetRecordScript = newScript(budgetLeftLua + budgetCostLua + budgetLearnedLua + budgetLearnLua + budgetRecordLua)
	budgetReadScript   = newScript(budgetLeftLua + budgetLearnedLua + budgetReadLua)
	budgetRenewScript  = newScript(budgetLeftLua + budgetRenewLua)
	budgetForgetScript = newScript(budgetForgetLua)
)

// BudgetKeys are an upstream's keys the budget scripts read. They are its
// state (internal/keyspace.Upstream), its budget and its calls in flight
// (internal/keyspace.Budget).
type BudgetKeys struct {
	Upstream, Budget, Calls string
}

func (k BudgetKeys) keys() []string { return []string{k.Upstream, k.Budget, k.Calls} }

// Admission is what an acquire asks of an upstream's budget.
type Admission struct {
	Keys BudgetKeys
	// Member reserves the call when it is admitted ("" judges only). The
	// settle releases it (Trip.RecordBudget).
	Member string
	// Tokens the call will spend, 0 when not said.
	Tokens int64
	// Reserve is what admission leaves of each limit. It is Requests
	// requests. For a call that does not say its Tokens, it is also
	// TokenShare of the token limit.
	Reserve BudgetReserve
	// Turn is the reservation of the turn the upstream's line gave the
	// caller (TurnMember), "" for none. While anyone waits in the line,
	// only a call with its turn is admitted.
	Turn string
}

// BudgetReserve is what admission keeps unspent of each limit.
type BudgetReserve struct {
	Requests   int64
	TokenShare float64
}

// ReserveMember is the member that reserves a call of token spending
// tokens.
func ReserveMember(token Token, tokens int64) string {
	return token.Token + ":" + strconv.FormatInt(max(tokens, 0), 10)
}

// Admitted is budget_admit.lua's answer.
type Admitted struct {
	// Judged: the upstream is ready and has a budget, which judged the call.
	Judged   bool
	Admitted bool
	// Reserved is the member that reserved the call, "" for none.
	Reserved string
	// Wait is, for a refused call, the time until the estimate fits it.
	// It is 0 when only a call in flight settling can tell (Settles).
	Wait    time.Duration
	Settles bool
	// Requests and Tokens are what the estimate leaves after the calls in
	// flight, and this one, reserved. They are -1 when not reported.
	Requests, Tokens int64
	// Gap is the time one call's request refills, 0 when not known. The
	// upstream's line gives turns at that rate.
	Gap time.Duration
	// Learned: no reading judged the call, but a learned rate did
	// (Lesson). The rate is learned of a provider that reports none, from
	// the calls it accepted. It is not set while the rate starts slowly
	// from one call at a time.
	Learned bool
	// Unread: no reading judged the call. One call at a time judged it,
	// before anything is known, or a learned rate did, or Bounded.
	Unread bool
	// Bounded: the provider sends no budget and refused nothing yet. No
	// rate judged the call, only the bound on its calls in flight, which
	// grows with each call it accepts. Its first 429 starts the learned
	// rate.
	Bounded bool
	// Failed: the admission's script failed (Acquired.AdmitErr): it judged
	// nothing, and what the call teaches cannot be written either.
	Failed bool
}

// Admit queues budget_admit.lua.
func (t *Trip) Admit(ctx context.Context, a Admission) Reply[Admitted] {
	return Reply[Admitted]{t.admit(ctx, a, t.s.lease), func(c redis.Cmder) (Admitted, error) { return decodeAdmitted(c, a.Member) }}
}

// admit queues budget_admit.lua. A call it reserves is held for lease
// (ms) unless renewed.
func (t *Trip) admit(ctx context.Context, a Admission, lease any) *redis.Cmd {
	return t.eval(ctx, budgetAdmitScript, a.Keys.keys(), a.Member, lease, max(a.Tokens, 0),
		a.Reserve.Requests, strconv.FormatFloat(a.Reserve.TokenShare, 'f', -1, 64), a.Turn)
}

// decodeAdmitted reads the reply to the admission that asked with member:
//
//	{0}
//	{1, reserved, requests, tokens}
//	{2, wait ms, requests, tokens}
//	{3, 0, requests, tokens}
//
// Each judged reply goes on with one call's refill (ms), then what judged
// the call:
//   - 0: a reading;
//   - 1: a learned rate;
//   - 2: one starting slowly;
//   - 3: one call at a time, before anything is known;
//   - 4: the bound on calls in flight before the first 429 of a provider
//     that sends no budget. Such a reply has 6 elements.
func decodeAdmitted(c redis.Cmder, member string) (Admitted, error) {
	v, err := slice(c)
	if err != nil {
		return Admitted{}, err
	}
	return admittedOf(v, member)
}

func admittedOf(v []any, member string) (Admitted, error) {
	kind, ok := replyInt(v, 0)
	if ok && kind == 0 && len(v) == 1 {
		return Admitted{}, nil
	}
	x, ok1 := replyInt(v, 1)
	r, ok2 := replyInt(v, 2)
	n, ok3 := replyInt(v, 3)
	g, ok4 := replyInt(v, 4)
	learned, ok5 := int64(0), true
	if len(v) == 6 {
		learned, ok5 = replyInt(v, 5)
	}
	if !ok || !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || len(v) < 5 || len(v) > 6 || kind < 1 || kind > 3 || learned < 0 || learned > 4 {
		return Admitted{}, badReply("admit", v)
	}
	a := Admitted{Judged: true, Requests: r, Tokens: n, Gap: time.Duration(max(g, 0)) * time.Millisecond,
		Learned: learned == 1, Unread: learned > 0, Bounded: learned == 4}
	switch kind {
	case 1:
		a.Admitted = true
		if x == 1 {
			a.Reserved = member
		}
	case 2:
		a.Wait = max(time.Duration(x)*time.Millisecond, time.Millisecond)
	case 3:
		a.Settles = true
	}
	return a, nil
}

// Reading is what a run's responses reported of its upstream's limits.
type Reading struct {
	Requests, Tokens Quota
	// Fits is for a call a 429 refused with a short stated wait. It is
	// the time from now until a call of Size tokens fits (0: none). Until
	// then the admission refuses calls of that size, each given its own
	// turn. Size 0 is the upstream's learned cost of a call.
	Fits time.Duration
	Size int64
	// Refused: the call was refused (a 429) and spent no tokens. The
	// learned cost does not count its reading as a call.
	Refused bool
	// Lesson is what a call that settled with no reading teaches the
	// rate learned of a provider that reports none. Zero teaches nothing.
	Lesson Lesson
}

// Lesson is what a call that settled with no reading teaches its
// upstream's learned rate. It holds its Answer and how long it Ran. Keep
// is how long what is learned is kept at least.
type Lesson struct {
	Teach     bool
	Answer    Answer
	Ran, Keep time.Duration
}

func (l Lesson) args() []any {
	if !l.Teach {
		return []any{"", 0, 0}
	}
	return []any{int(l.Answer), max(ms(l.Ran), 1), max(ms(l.Keep), 1)}
}

// Quota is one limit as a response reported it.
type Quota struct {
	Reported  bool
	Remaining int64
	Limit     int64 // 0: not said
	// ResetIn is the time from the reading until the limit is whole
	// again, -1 when not said. Age is how long before now it was read.
	ResetIn, Age time.Duration
}

func (q Quota) args() []any {
	if !q.Reported {
		return []any{-1, 0, -1, 0}
	}
	reset := int64(-1)
	if q.ResetIn >= 0 {
		reset = msCeil(q.ResetIn)
	}
	return []any{max(q.Remaining, 0), max(q.Limit, 0), reset, max(ms(q.Age), 0)}
}

// msCeil is d in whole milliseconds, rounded up. A reset is never early.
func msCeil(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// RecordBudget queues budget_record.lua. The script does three things:
//   - release member's reservation ("" for none);
//   - keep r where it is newer than what the budget holds;
//   - teach the learned rate r's Lesson.
//
// The budget outlives its last reset by margin. The reply is the number
// of limits written.
func (t *Trip) RecordBudget(ctx context.Context, k BudgetKeys, member string, r Reading, margin time.Duration) Reply[int64] {
	args := append([]any{member, ms(margin)}, r.Requests.args()...)
	args = append(args, r.Tokens.args()...)
	refused := 0
	if r.Refused {
		refused = 1
	}
	args = append(args, max(msCeil(r.Fits), 0), max(r.Size, 0), refused)
	args = append(args, r.Lesson.args()...)
	return Reply[int64]{t.eval(ctx, budgetRecordScript, k.keys(), args...), decodeCount}
}

// RenewReservation queues budget_renew.lua: keep member's reservation
// for one more lease, unless it lapsed or was released. The reply
// reports whether it was kept.
func (t *Trip) RenewReservation(ctx context.Context, k BudgetKeys, member string) Reply[bool] {
	return Reply[bool]{t.eval(ctx, budgetRenewScript, k.keys(), member, t.s.lease), decodeFlag}
}

// BudgetLeft is one limit of a budget as the admission estimates it now.
// It is zero when not reported.
type BudgetLeft struct {
	Reported bool
	// Left is the estimate after the calls in flight. It is -1 when
	// unknown: a limit of unknown size past its reset.
	Left  int64
	Limit int64 // 0: not said
	// Reset is the time until the limit is whole again. -1: not said.
	Reset time.Duration
}

// BudgetRead is budget_read.lua's answer.
type BudgetRead struct {
	Requests, Tokens BudgetLeft
	// Calls are the calls admitted and not yet settled.
	Calls int64
	// Unreported: a response without rate-limit headers settled. So the
	// provider reports none. It is unset while no response has come back.
	Unreported bool
	// Learned is the rate learned of such a provider from its answers,
	// in calls a minute. It is 0 while none is known. An operator's
	// reset forgets it, until a response settles again.
	Learned int64
}

// ReadBudget queues budget_read.lua.
func (t *Trip) ReadBudget(ctx context.Context, k BudgetKeys) Reply[BudgetRead] {
	return Reply[BudgetRead]{t.eval(ctx, budgetReadScript, k.keys()), decodeBudgetRead}
}

// decodeBudgetRead reads the reply. It holds {left, limit, reset ms} for
// requests and tokens. Then come the calls in flight, 1 when the provider
// sends no budget (else 0), and the learned rate a minute. -1 stands for
// what is not reported or known.
func decodeBudgetRead(c redis.Cmder) (BudgetRead, error) {
	v, err := slice(c)
	if err != nil {
		return BudgetRead{}, err
	}
	var n [9]int64
	for i := range n {
		x, ok := replyInt(v, i)
		if !ok || len(v) != len(n) {
			return BudgetRead{}, badReply("budget read", v)
		}
		n[i] = x
	}
	kind := func(o int) BudgetLeft {
		if n[o+1] < 0 {
			return BudgetLeft{} // not reported
		}
		reset := time.Duration(-1)
		if n[o+2] >= 0 {
			reset = time.Duration(n[o+2]) * time.Millisecond
		}
		return BudgetLeft{Reported: true, Left: n[o], Limit: n[o+1], Reset: reset}
	}
	if n[7] < 0 || n[7] > 1 {
		return BudgetRead{}, badReply("budget read", v)
	}
	return BudgetRead{Requests: kind(0), Tokens: kind(3), Calls: n[6], Unreported: n[7] == 1, Learned: max(n[8], 0)}, nil
}

// Answer is what a call that settled with no reading tells its
// upstream's learned rate (Lesson).
type Answer int8

const (
	AnswerRefused  Answer = iota // a 429
	AnswerAccepted               // a success
	AnswerOther                  // any other end: only that no budget came back
)

// ForgetLearned queues budget_forget.lua. An operator's reset forgets the
// rate learned of the upstream's provider (Lesson). The reply is 1 when
// something was learned.
func (t *Trip) ForgetLearned(ctx context.Context, k BudgetKeys) Reply[int64] {
	return Reply[int64]{t.eval(ctx, budgetForgetScript, k.keys()), decodeCount}
}
