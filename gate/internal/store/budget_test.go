package store

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A call that does not say its tokens is judged by its share of the token
// limit, as given (0.25 of 1,000 is 250, not a share rounded to 0.2 or
// 0.3): with 240 tokens left it waits; with that share at 0.24 it is
// admitted.
func TestAdmitKeepsTheTokenShareAsGiven(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	k := budgetKeys("up")
	tr := s.Trip()
	rec := tr.RecordBudget(ctx, k, "", Reading{Tokens: Quota{Reported: true, Remaining: 240, Limit: 1000, ResetIn: time.Minute}}, time.Minute)
	tr.Send(ctx)
	if n, err := rec.Result(); err != nil || n != 1 {
		t.Fatalf("record: %d, %v; want one limit written", n, err)
	}
	for _, tc := range []struct {
		share    float64
		admitted bool
	}{{0.25, false}, {0.24, true}} {
		tr := s.Trip()
		a := tr.Admit(ctx, Admission{Keys: k, Reserve: BudgetReserve{TokenShare: tc.share}})
		tr.Send(ctx)
		got, err := a.Result()
		if err != nil || !got.Judged || got.Admitted != tc.admitted || got.Tokens != 240 {
			t.Fatalf("share %v of 1,000 with 240 left: %+v, %v; want judged, admitted %v, 240 tokens left", tc.share, got, err, tc.admitted)
		}
	}
}

// decodeAdmitted reads each reply budget_admit.lua documents and refuses
// any other shape with a bad-reply error.
func TestDecodeAdmitted(t *testing.T) {
	for _, tc := range []struct {
		reply []any
		want  Admitted
		bad   bool
	}{
		{reply: []any{int64(0)}, want: Admitted{}},
		{reply: []any{int64(1), int64(1), int64(5), int64(-1), int64(0)}, want: Admitted{Judged: true, Admitted: true, Reserved: "m", Requests: 5, Tokens: -1}},
		{reply: []any{int64(1), int64(0), int64(5), int64(7), int64(0)}, want: Admitted{Judged: true, Admitted: true, Requests: 5, Tokens: 7}},
		{reply: []any{int64(2), int64(1500), int64(0), int64(-1), int64(600)}, want: Admitted{Judged: true, Wait: 1500 * time.Millisecond, Tokens: -1, Gap: 600 * time.Millisecond}},
		{reply: []any{int64(3), int64(0), int64(-1), int64(9), int64(0)}, want: Admitted{Judged: true, Settles: true, Requests: -1, Tokens: 9}},
		{reply: []any{int64(3), int64(0), int64(-1), int64(-1), int64(0), int64(3)}, want: Admitted{Judged: true, Settles: true, Requests: -1, Tokens: -1, Unread: true}},
		{reply: []any{int64(1), int64(1), int64(5), int64(-1), int64(20), int64(1)}, want: Admitted{Judged: true, Admitted: true, Reserved: "m", Requests: 5, Tokens: -1, Gap: 20 * time.Millisecond, Learned: true, Unread: true}},
		{reply: []any{int64(2), int64(50), int64(0), int64(-1), int64(0), int64(2)}, want: Admitted{Judged: true, Wait: 50 * time.Millisecond, Tokens: -1, Unread: true}},
		{reply: []any{int64(1), int64(1), int64(-1), int64(-1), int64(0), int64(4)}, want: Admitted{Judged: true, Admitted: true, Reserved: "m", Requests: -1, Tokens: -1, Unread: true, Bounded: true}},
		{reply: []any{int64(1), int64(0), int64(5), int64(7), int64(0), int64(5)}, bad: true},
		{reply: []any{int64(1), int64(0), int64(5), int64(7), int64(0), int64(1), int64(1)}, bad: true},
		{reply: []any{int64(1), int64(0), int64(5)}, bad: true},
		{reply: []any{int64(1), int64(0), int64(5), int64(7)}, bad: true},
		{reply: []any{int64(0), int64(0), int64(5), int64(7)}, bad: true},
		{reply: []any{int64(4), int64(0), int64(5), int64(7)}, bad: true},
	} {
		cmd := redis.NewCmd(context.Background())
		cmd.SetVal(tc.reply)
		got, err := decodeAdmitted(cmd, "m")
		if tc.bad != (err != nil) || got != tc.want {
			t.Errorf("decodeAdmitted(%v): %+v, %v; want %+v (bad reply: %v)", tc.reply, got, err, tc.want, tc.bad)
		}
	}
}

// ReadBudget reads back what a response reported: the tokens left, the
// limit and the time to its reset; a limit not reported reads as such.
func TestReadBudget(t *testing.T) {
	s, _, _ := newStore(t) // Redis's clock stands still: nothing refills
	ctx := context.Background()
	k := budgetKeys("up")
	tr := s.Trip()
	tr.RecordBudget(ctx, k, "", Reading{Tokens: Quota{Reported: true, Remaining: 240, Limit: 1000, ResetIn: time.Minute}}, time.Minute)
	read := tr.ReadBudget(ctx, k)
	tr.Send(ctx)
	got, err := read.Result()
	want := BudgetRead{Tokens: BudgetLeft{Reported: true, Left: 240, Limit: 1000, Reset: time.Minute}}
	if err != nil || got != want {
		t.Fatalf("ReadBudget: %+v, %v; want %+v", got, err, want)
	}
}

// A reading's limit goes to budget_record.lua as {left, limit, reset ms,
// age ms}: -1 for what was not reported or not said, a reset due now as 0.
func TestQuotaArgs(t *testing.T) {
	for _, tc := range []struct {
		q    Quota
		want []any
	}{
		{Quota{}, []any{-1, 0, -1, 0}},
		{Quota{Reported: true, Remaining: 5, Limit: 10, ResetIn: -1}, []any{int64(5), int64(10), int64(-1), int64(0)}},
		{Quota{Reported: true, Remaining: 5, ResetIn: 0, Age: 3 * time.Millisecond}, []any{int64(5), int64(0), int64(0), int64(3)}},
	} {
		got := tc.q.args()
		if len(got) != len(tc.want) {
			t.Fatalf("%+v: %v, want %v", tc.q, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%+v: %v, want %v", tc.q, got, tc.want)
				break
			}
		}
	}
}

// decodeBudgetRead reads budget_read.lua's {left, limit, reset ms} per
// limit, the calls in flight, whether the provider sends no budget and the
// rate learned of it: a limit is reported unless its size reads -1 (a size
// of 0 is reported, not said); a reset of -1 is not said, 0 is due now; a
// rate of -1 is none known. Anything but 0 or 1 for "sends none" is a bad
// reply.
func TestDecodeBudgetRead(t *testing.T) {
	cmd := redis.NewCmd(context.Background())
	cmd.SetVal([]any{int64(5), int64(0), int64(-1), int64(7), int64(100), int64(0), int64(2), int64(0), int64(-1)})
	got, err := decodeBudgetRead(cmd)
	want := BudgetRead{
		Requests: BudgetLeft{Reported: true, Left: 5, Limit: 0, Reset: -1},
		Tokens:   BudgetLeft{Reported: true, Left: 7, Limit: 100, Reset: 0},
		Calls:    2,
	}
	if err != nil || got != want {
		t.Fatalf("decodeBudgetRead: %+v, %v; want %+v", got, err, want)
	}
	cmd = redis.NewCmd(context.Background())
	cmd.SetVal([]any{int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(3), int64(1), int64(2915)})
	if got, err := decodeBudgetRead(cmd); err != nil || got != (BudgetRead{Calls: 3, Unreported: true, Learned: 2915}) {
		t.Fatalf("decodeBudgetRead of a provider that sends no budget: %+v, %v; want unreported, 2915 a minute learned", got, err)
	}
	for _, bad := range [][]any{
		{int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(0)},                      // the reply before the learned rate
		{int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(0), int64(2), int64(-1)}, // "sends none" not a flag
	} {
		cmd = redis.NewCmd(context.Background())
		cmd.SetVal(bad)
		if got, err := decodeBudgetRead(cmd); err == nil {
			t.Fatalf("decodeBudgetRead(%v): %+v, want a bad reply", bad, got)
		}
	}
	cmd = redis.NewCmd(context.Background())
	cmd.SetVal([]any{int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(0), int64(0), int64(-1)})
	if got, err := decodeBudgetRead(cmd); err != nil || got != (BudgetRead{}) {
		t.Fatalf("decodeBudgetRead of nothing reported: %+v, %v; want none", got, err)
	}
}

// A renewal keeps a reservation for one more lease from now; one that
// lapsed (its lease ended without a renewal) or was released is not
// brought back: its call is no longer counted.
func TestRenewReservation(t *testing.T) {
	s, m, _ := newStore(t) // lease: a minute
	ctx := context.Background()
	k := budgetKeys("up")
	recordReading(t, s, k, Reading{Requests: Quota{Reported: true, Remaining: 50, Limit: 60, ResetIn: time.Hour}})
	member, other := ReserveMember(NewToken(), 0), ReserveMember(NewToken(), 0)
	admit := func(member string) {
		t.Helper()
		tr := s.Trip()
		a := tr.Admit(ctx, Admission{Keys: k, Member: member})
		tr.Send(ctx)
		got, err := a.Result()
		if err != nil || got.Reserved != member {
			t.Fatalf("admit: %+v, %v; want reserved", got, err)
		}
	}
	renew := func() bool {
		t.Helper()
		tr := s.Trip()
		r := tr.RenewReservation(ctx, k, member)
		tr.Send(ctx)
		kept, err := r.Result()
		if err != nil {
			t.Fatal(err)
		}
		return kept
	}
	inFlight := func() int64 {
		t.Helper()
		tr := s.Trip()
		r := tr.ReadBudget(ctx, k)
		tr.Send(ctx)
		got, err := r.Result()
		if err != nil {
			t.Fatal(err)
		}
		return got.Calls
	}
	admit(member)
	redistest.Advance(m, 50*time.Second)
	if !renew() {
		t.Fatal("a reservation renewed within its lease: not kept")
	}
	redistest.Advance(m, 50*time.Second) // 100 s after the admission
	if n := inFlight(); n != 1 {
		t.Fatalf("a lease after its renewal's lease began: %d calls in flight, want the renewed one", n)
	}
	admit(other)                         // keeps the calls' key alive
	redistest.Advance(m, 11*time.Second) // a lease after the renewal
	if renew() || inFlight() != 1 {
		t.Fatalf("a lapsed reservation: kept or counted (%d in flight), want it lapsed for good beside the other", inFlight())
	}
	admit(member)
	tr := s.Trip()
	tr.RecordBudget(ctx, k, member, Reading{}, time.Minute)
	tr.Send(ctx)
	if renew() || inFlight() != 1 {
		t.Fatal("a released reservation: brought back by a renewal")
	}
}

// The calls' key outlives every reservation in it, and a reservation
// sets its TTL only when less than a lease is left: two leases then, so
// calls admitted one after another cost no PEXPIRE each. (A lease's
// PEXPIRE at every reservation kept the key at exactly a lease; without
// one the key would never lapse.)
func TestReservationKeepsTheCallsKeyOnceALease(t *testing.T) {
	s, m, rdb := newStore(t) // lease: a minute; Redis's clock stands still
	ctx := context.Background()
	k := budgetKeys("up")
	tr := s.Trip()
	tr.RecordBudget(ctx, k, "", Reading{Requests: Quota{Reported: true, Remaining: 50, Limit: 60, ResetIn: time.Hour}}, time.Hour)
	tr.Send(ctx)
	admitAfter := func(d time.Duration) time.Duration {
		t.Helper()
		redistest.Advance(m, d)
		member := ReserveMember(NewToken(), 0)
		tr := s.Trip()
		a := tr.Admit(ctx, Admission{Keys: k, Member: member})
		tr.Send(ctx)
		if got, err := a.Result(); err != nil || got.Reserved != member {
			t.Fatalf("admit: %+v, %v; want reserved", got, err)
		}
		ttl, err := rdb.PTTL(ctx, k.Calls).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl < time.Minute {
			t.Fatalf("the calls' key lives %v after a reservation of a minute: it would lapse before the call", ttl)
		}
		return ttl
	}
	for _, tc := range []struct {
		after, ttl time.Duration
	}{
		{0, 2 * time.Minute},                 // a new key: two leases
		{30 * time.Second, 90 * time.Second}, // more than a lease left: not set again
		{29 * time.Second, 61 * time.Second},
		{2 * time.Second, 2 * time.Minute}, // less than a lease left: two again
	} {
		if exp, got := tc.ttl, admitAfter(tc.after); exp != got {
			t.Fatalf("%v later: exp the calls' key to live %v, got %v", tc.after, exp, got)
		}
	}
}
