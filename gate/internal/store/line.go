package store

import (
	"context"
	_ "embed"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/internal/keyspace"
)

// An upstream's line (lua/line_*.lua; gate/internal/line): the callers
// waiting for a turn when its budget is short, one script per step. Every
// script reads the line's three keys, which share the upstream's slot; a
// process's set of places and its list of grants are keys in the same
// slot, named after it; a turn is published on the list.

var (
	//go:embed lua/line_common.lua
	lineCommonLua string
	//go:embed lua/line_join.lua
	lineJoinLua string
	//go:embed lua/line_turn.lua
	lineTurnLua string
	//go:embed lua/line_leave.lua
	lineLeaveLua string
	//go:embed lua/line_place.lua
	linePlaceLua string
	//go:embed lua/line_renew.lua
	lineRenewLua string
	//go:embed lua/line_collect.lua
	lineCollectLua string
	//go:embed lua/line_give.lua
	lineGiveLua string
	//go:embed lua/line_place_job.lua
	linePlaceJobLua string

	lineJoinScript    = newScript(lineCommonLua + lineJoinLua)
	lineLeaveScript   = newScript(lineCommonLua + lineLeaveLua)
	linePlaceScript   = newScript(lineCommonLua + linePlaceLua)
	lineRenewScript   = newScript(lineCommonLua + lineRenewLua)
	lineCollectScript = newScript(lineCollectLua)
	// The turn publishes: PUBLISH on one node, SPUBLISH on a cluster.
	lineTurnNode    = newScript("local PUBLISH = 'PUBLISH'\n" + lineCommonLua + lineTurnLua)
	lineTurnCluster = newScript("local PUBLISH = 'SPUBLISH'\n" + lineCommonLua + lineTurnLua)
	// The budget's side of the line (budget_line.lua): a give reserves
	// each turn's call; a job's place reads the budget's refill.
	lineGiveNode       = newScript("local PUBLISH = 'PUBLISH'\n" + budgetLeftLua + budgetCostLua + budgetLearnedLua + budgetJudgeLua + budgetLineLua + lineCommonLua + upstreamValueLua + lineGiveLua)
	lineGiveCluster    = newScript("local PUBLISH = 'SPUBLISH'\n" + budgetLeftLua + budgetCostLua + budgetLearnedLua + budgetJudgeLua + budgetLineLua + lineCommonLua + upstreamValueLua + lineGiveLua)
	linePlaceJobScript = newScript(budgetLeftLua + budgetCostLua + budgetLearnedLua + budgetJudgeLua + budgetLineLua + linePlaceJobLua)
)

// LineKeys are an upstream's line keys (internal/keyspace.Line).
type LineKeys struct {
	Line, Owners, Meta string
	// Grants is the prefix of each owner's list of grants.
	Grants string
}

func (k LineKeys) keys() []string { return []string{k.Line, k.Owners, k.Meta} }

// GrantsOf is owner's list of grants, and the channel its turns are
// published on.
func (k LineKeys) GrantsOf(owner string) string { return k.Grants + owner }

// Classes: a line orders its entries by class, 0 to MaxClass, higher
// first.
const MaxClass = 255

// Quanta: a tenant's turn advances its finish tag by Quantum / weight,
// at least 1 and at most MaxQuantum.
const (
	Quantum    = 1000
	MaxQuantum = 1_000_000
)

// LineJoin is a caller asking for a place.
type LineJoin struct {
	Class   int
	Quantum int64
	// Owner names the process that waits (no ':'); Tenant the caller's
	// tenant.
	Owner, Tenant string
	// Lease is how long the owner's places are kept without its renewal;
	// Left the time until the caller's deadline, past which its place is
	// skipped; Keep the keys' TTL.
	Lease, Left, Keep time.Duration
	// Rate is the turns per second expected, 0 for unknown: the join is
	// refused when the turns ahead cannot come within Left.
	Rate float64
	// Mark is the key of the caller's job's mark (keyspace.LineMark), ""
	// for none: it holds the caller's place until Left ends.
	Mark string
	// Hold is how long the caller's class keeps the headroom of a give
	// (LineGive.Headroom) from the lower classes once it joined (0: not).
	Hold time.Duration
	// Again is the caller's place before it was dropped ("" for a first
	// join): the caller joins at its first arrival, ahead of those who
	// came later.
	Again string
}

// LineJoined is line_join.lua's answer.
type LineJoined struct {
	Joined bool
	// Ahead counts the turns before the caller's.
	Ahead int64
	// Member is the caller's place; Token its owner's (Joined): a new
	// token means the owner's earlier places were dropped.
	Member, Token string
	// Wait is the expected wait of a refused caller.
	Wait time.Duration
}

// JoinLine queues line_join.lua.
func (t *Trip) JoinLine(ctx context.Context, k LineKeys, j LineJoin) Reply[LineJoined] {
	cmd := t.eval(ctx, lineJoinScript, k.keys(), j.Class, j.Quantum, j.Owner, j.Tenant,
		max(ms(j.Lease), 1), max(ms(j.Left), 0), max(ms(j.Keep), 1), strconv.FormatFloat(max(j.Rate, 0), 'f', -1, 64), j.Mark, max(ms(j.Hold), 0), j.Again)
	return Reply[LineJoined]{cmd, decodeLineJoined}
}

// decodeLineJoined reads {1, ahead, member, epoch} or {0, ahead, wait ms}.
func decodeLineJoined(c redis.Cmder) (LineJoined, error) {
	v, err := slice(c)
	if err != nil {
		return LineJoined{}, err
	}
	kind, ok1 := replyInt(v, 0)
	ahead, ok2 := replyInt(v, 1)
	switch {
	case ok1 && ok2 && kind == 1 && len(v) == 4:
		m, ok3 := replyString(v, 2)
		e, ok4 := replyString(v, 3)
		if ok3 && ok4 {
			return LineJoined{Joined: true, Ahead: ahead, Member: m, Token: e}, nil
		}
	case ok1 && ok2 && kind == 0 && len(v) == 3:
		if w, ok := replyInt(v, 2); ok {
			return LineJoined{Ahead: ahead, Wait: time.Duration(w) * time.Millisecond}, nil
		}
	}
	return LineJoined{}, badReply("line join", v)
}

// LineEntry is a member of a line, decoded.
type LineEntry struct {
	Member        string
	Class         int
	Owner, Tenant string
}

// ParseLineEntry decodes a member line_join.lua made (its layout's one
// reading is keyspace.ParseLineMember, which the CLI shares).
func ParseLineEntry(m string) (LineEntry, bool) {
	e, ok := keyspace.ParseLineMember(m)
	if !ok {
		return LineEntry{}, false
	}
	return LineEntry{Member: m, Class: e.Class, Owner: e.Owner, Tenant: e.Tenant}, true
}

// TurnLine queues line_turn.lua: give up to n turns. The reply is the
// entries given one, in order.
func (t *Trip) TurnLine(ctx context.Context, k LineKeys, n int, lease, keep time.Duration) Reply[[]LineEntry] {
	s := lineTurnCluster
	if t.s.scripts == nodeScripts {
		s = lineTurnNode
	}
	cmd := t.eval(ctx, s, k.keys(), n, k.Grants, max(ms(lease), 1), max(ms(keep), 1))
	return Reply[[]LineEntry]{cmd, decodeTurned}
}

func decodeTurned(c redis.Cmder) ([]LineEntry, error) {
	v, err := slice(c)
	if err != nil {
		return nil, err
	}
	out := make([]LineEntry, 0, len(v))
	for i := range v {
		m, _ := replyString(v, i)
		e, ok := ParseLineEntry(m)
		if !ok {
			return nil, badReply("line turn", v)
		}
		out = append(out, e)
	}
	return out, nil
}

// LineLeft is what line_leave.lua found.
type LineLeft int

const (
	// NotInLine: the member was dropped with its owner's lease, or the
	// line lost.
	NotInLine LineLeft = iota
	// LeftLine: the member waited and no longer does.
	LeftLine
	// TurnTaken: the member had been given a turn, not yet collected,
	// and it is taken back; its owner passes it on.
	TurnTaken
)

// LeaveLine queues line_leave.lua for owner's member.
func (t *Trip) LeaveLine(ctx context.Context, k LineKeys, owner, member string) Reply[LineLeft] {
	cmd := t.eval(ctx, lineLeaveScript, append(k.keys(), k.GrantsOf(owner)), member)
	return Reply[LineLeft]{cmd, func(c redis.Cmder) (LineLeft, error) {
		n, err := c.(*redis.Cmd).Int64()
		if err == nil && (n < 0 || n > 2) {
			return 0, badReply("line leave", []any{n})
		}
		return LineLeft(n), err
	}}
}

// LinePlace is line_place.lua's answer.
type LinePlace struct {
	// Ahead counts the turns before member's; -1 when it does not wait.
	Ahead   int64
	Waiting int64
}

// PlaceInLine queues line_place.lua.
func (t *Trip) PlaceInLine(ctx context.Context, k LineKeys, member string) Reply[LinePlace] {
	return Reply[LinePlace]{t.eval(ctx, linePlaceScript, k.keys(), member), func(c redis.Cmder) (LinePlace, error) {
		v, err := slice(c)
		if err != nil {
			return LinePlace{}, err
		}
		a, ok1 := replyInt(v, 0)
		n, ok2 := replyInt(v, 1)
		if !ok1 || !ok2 || len(v) != 2 {
			return LinePlace{}, badReply("line place", v)
		}
		return LinePlace{Ahead: a, Waiting: n}, nil
	}}
}

// RenewLine queues line_renew.lua: extend owner's lease, which keeps all
// its places. The reply is the owner's token, a new one when its places
// were dropped (its lease had ended, or the line was lost).
func (t *Trip) RenewLine(ctx context.Context, k LineKeys, owner string, lease, keep time.Duration) Reply[string] {
	cmd := t.eval(ctx, lineRenewScript, k.keys(), owner, max(ms(lease), 1), max(ms(keep), 1))
	return Reply[string]{cmd, func(c redis.Cmder) (string, error) { return c.(*redis.Cmd).Text() }}
}

// decodeTokenAnd reads {token, member...}.
func decodeTokenAnd(c redis.Cmder, script string) (string, []string, error) {
	v, err := slice(c)
	if err != nil {
		return "", nil, err
	}
	if len(v) == 0 {
		return "", nil, badReply(script, v)
	}
	e, ok := replyString(v, 0)
	rest := make([]string, 0, len(v)-1)
	for i := 1; i < len(v) && ok; i++ {
		var m string
		m, ok = replyString(v, i)
		rest = append(rest, m)
	}
	if !ok {
		return "", nil, badReply(script, v)
	}
	return e, rest, nil
}

// LineCollected is line_collect.lua's answer.
type LineCollected struct {
	Token   string // the owner's; "" when it has none (the line lost)
	Granted []string
}

// CollectLine queues line_collect.lua: take the turns given to owner's
// callers.
func (t *Trip) CollectLine(ctx context.Context, k LineKeys, owner string) Reply[LineCollected] {
	cmd := t.eval(ctx, lineCollectScript, []string{k.GrantsOf(owner), k.Meta}, owner)
	return Reply[LineCollected]{cmd, func(c redis.Cmder) (LineCollected, error) {
		e, granted, err := decodeTokenAnd(c, "line collect")
		return LineCollected{Token: e, Granted: granted}, err
	}}
}

// TurnMember is the reservation in its upstream's budget of the turn
// given to the caller at line member m (budget_line.lua's turn_member).
func TurnMember(m string) string {
	if len(m) < 30 {
		return ""
	}
	return "turn:" + m[18:30] + ":0"
}

// LineGive is a give's settings (line_give.lua).
type LineGive struct {
	// Lease and Keep are the line's; Reservation a reserved call's lease
	// (the gate's lease).
	Lease, Keep, Reservation time.Duration
	Reserve                  BudgetReserve
	// Timer names the process whose timer asks ("" for a settle's
	// give): one process's timer gives the refills.
	Timer string
	// Headroom is the requests kept beside the reserve while a lower class
	// has the head of the line and a higher one joined within its
	// LineJoin.Hold: the higher class's next caller finds them at once.
	Headroom int
	// Unused are the reservations of turns given and not used, released
	// first.
	Unused []string
}

// LineGiven is line_give.lua's answer.
type LineGiven struct {
	Turns int
	// Wait is the time until one more call fits while callers still
	// wait, or until the upstream's cooldown, pause or probe ends; 0
	// when none wait or only a settle can tell. Once a cooldown or pause
	// is over and no call claimed the probe, the give gives one turn: the
	// probe.
	Wait time.Duration
}

// GiveLine queues line_give.lua: give turns to as many callers in line
// as the budget bk can serve now, reserving each one's call.
func (t *Trip) GiveLine(ctx context.Context, k LineKeys, bk BudgetKeys, g LineGive) Reply[LineGiven] {
	s := lineGiveCluster
	if t.s.scripts == nodeScripts {
		s = lineGiveNode
	}
	args := make([]any, 0, 8+len(g.Unused))
	args = append(args, k.Grants, max(ms(g.Lease), 1), max(ms(g.Keep), 1), max(ms(g.Reservation), 1),
		g.Reserve.Requests, strconv.FormatFloat(g.Reserve.TokenShare, 'f', -1, 64), g.Timer, max(g.Headroom, 0))
	for _, u := range g.Unused {
		args = append(args, u)
	}
	cmd := t.eval(ctx, s, append(k.keys(), bk.keys()...), args...)
	return Reply[LineGiven]{cmd, func(c redis.Cmder) (LineGiven, error) {
		v, err := slice(c)
		if err != nil {
			return LineGiven{}, err
		}
		n, ok1 := replyInt(v, 0)
		w, ok2 := replyInt(v, 1)
		if !ok1 || !ok2 || len(v) != 2 {
			return LineGiven{}, badReply("line give", v)
		}
		return LineGiven{Turns: int(n), Wait: time.Duration(w) * time.Millisecond}, nil
	}}
}

// JobPlace is line_place_job.lua's answer.
type JobPlace struct {
	// Waiting: the job's caller waits in the line, with Ahead turns
	// before its own; Gap is one call's refill (0: not known).
	Waiting bool
	Ahead   int64
	Gap     time.Duration
}

// PlaceOfJob queues line_place_job.lua: where the caller of the job
// whose mark is mark waits in the line, from any process.
func (t *Trip) PlaceOfJob(ctx context.Context, k LineKeys, mark string, bk BudgetKeys) Reply[JobPlace] {
	cmd := t.eval(ctx, linePlaceJobScript, append(k.keys(), mark, bk.Budget))
	return Reply[JobPlace]{cmd, func(c redis.Cmder) (JobPlace, error) {
		v, err := slice(c)
		if err != nil {
			return JobPlace{}, err
		}
		a, ok1 := replyInt(v, 0)
		g, ok2 := replyInt(v, 2)
		if !ok1 || !ok2 || len(v) != 3 {
			return JobPlace{}, badReply("line place", v)
		}
		if a < 0 {
			return JobPlace{}, nil
		}
		return JobPlace{Waiting: true, Ahead: a, Gap: time.Duration(g) * time.Millisecond}, nil
	}}
}
