package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func newStore(t *testing.T) (*Store, *miniredis.Miniredis, *redis.Client) {
	t.Helper()
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0)
	return New(rdb, Config{Lease: time.Minute, WaitTimeout: 100 * time.Millisecond, Timeout: time.Second}), m, rdb
}

func acquire(t *testing.T, s *Store, key string) (*Acquire, *Acquired) {
	t.Helper()
	a := &Acquire{Key: key, Token: NewToken()}
	r := &Acquired{}
	if err := s.Acquire(context.Background(), a, r); err != nil {
		t.Fatal(err)
	}
	return a, r
}

// A free job is taken in one round trip with a fence from Redis's clock;
// a second acquire is refused by the running value, with its TTL.
func TestAcquireTakesAFreeJob(t *testing.T) {
	s, _, _ := newStore(t)
	_, r := acquire(t, s, "k")
	if !r.Taken || r.Fence <= 0 || r.Job.Kind != Foreign {
		t.Fatalf("first acquire: %+v, want taken with a fence and no history", r)
	}
	_, r2 := acquire(t, s, "k")
	if r2.Taken || r2.Job.Kind != Running || r2.TTL != time.Minute {
		t.Fatalf("second acquire: %+v, want refused by the running lease for a minute", r2)
	}
	// The first acquire recorded its fence beside its token, marked as
	// the acquire's own (no renewal yet): what Status and a late success
	// (unwritten.go's unrenewed) read.
	if exp, got := (Job{Kind: Running, Token: r2.Job.Token, Fence: r.Fence, Taken: true}), r2.Job; exp != got {
		t.Fatalf("the running value read: %+v, want %+v", got, exp)
	}
}

// A settled job whose state is over is taken over by the script, its
// history carried into the new run; the fence keeps increasing.
func TestTakeoverKeepsHistory(t *testing.T) {
	s, m, _ := newStore(t)
	ctx := context.Background()
	a, r := acquire(t, s, "k")
	tr := s.Trip()
	settled := tr.Settle(ctx, "k", a.Token, r.Fence, Settlement{Kind: Cooling, TTL: time.Second, Keep: time.Hour, Attempts: 2, Reason: "timeout"})
	tr.Send(ctx)
	if st, err := settled.Result(); err != nil || !st.Owned {
		t.Fatalf("settle: %+v, %v; want owned", st, err)
	}
	a2, r2 := acquire(t, s, "k")
	if r2.Taken || r2.Job.Kind != Cooling || r2.Job.Over(r2.Now) {
		t.Fatalf("during the cooldown: %+v, want refused by it", r2)
	}
	redistest.Advance(m, time.Second)
	a2, r2 = acquire(t, s, "k")
	if r2.Taken || !r2.Job.Over(r2.Now) {
		t.Fatalf("after the cooldown: %+v, want a settled state that is over", r2)
	}
	if err := s.Takeover(ctx, a2, r2); err != nil {
		t.Fatal(err)
	}
	if !r2.Taken || r2.Job.Attempts != 2 || r2.Job.Reason != "timeout" || r2.Fence <= r.Fence {
		t.Fatalf("takeover: %+v, want taken with 2 attempts and a higher fence than %d", r2, r.Fence)
	}
}

// Settle and Renew answer for the run that holds the job only; Undo gives
// the job back as the acquire found it.
func TestOwnership(t *testing.T) {
	s, _, rdb := newStore(t)
	ctx := context.Background()
	a, r := acquire(t, s, "k")
	tr := s.Trip()
	other := tr.Settle(ctx, "k", NewToken(), r.Fence, Settlement{Kind: Failed, TTL: time.Hour})
	renewOther := tr.Renew(ctx, "k", NewToken(), r.Fence, 0, 0)
	renew := tr.Renew(ctx, "k", a.Token, r.Fence, 0, 0)
	tr.Send(ctx)
	if st, err := other.Result(); err != nil || st.Owned || st.Found.Kind != Running {
		t.Fatalf("another run's settle: %+v, %v; want not owned, the running value found", st, err)
	}
	if ok, err := renewOther.Result(); err != nil || ok {
		t.Fatalf("another run's renewal: %v, %v; want refused", ok, err)
	}
	if ok, err := renew.Result(); err != nil || !ok {
		t.Fatalf("the owner's renewal: %v, %v; want extended", ok, err)
	}
	tr = s.Trip()
	undo := tr.Undo(ctx, "k", a.Token, r)
	tr.Send(ctx)
	if ok, err := undo.Result(); err != nil || !ok {
		t.Fatalf("undo: %v, %v; want given back", ok, err)
	}
	if n := rdb.Exists(ctx, "k").Val(); n != 0 {
		t.Fatal("the job taken on a free key is still held after the undo")
	}
}

// Reset clears a settled job, leaves a running one alone and says so.
func TestResetJob(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	acquire(t, s, "running")
	tr := s.Trip()
	running := tr.ResetJob(ctx, "running")
	free := tr.ResetJob(ctx, "free")
	tr.Send(ctx)
	if r, err := running.Result(); err != nil || !r.Running || r.TTL != time.Minute {
		t.Fatalf("reset of a running job: %+v, %v; want left alone with its minute", r, err)
	}
	if r, err := free.Result(); err != nil || r.Running {
		t.Fatalf("reset of a free job: %+v, %v", r, err)
	}
}

// A script Redis does not have (a restart, a failover, SCRIPT FLUSH) is
// sent again whole: the operation still answers.
func TestScriptFallsBackToEval(t *testing.T) {
	s, _, rdb := newStore(t)
	ctx := context.Background()
	a, r := acquire(t, s, "k")
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	tr := s.Trip()
	renew := tr.Renew(ctx, "k", a.Token, r.Fence, 0, 0)
	tr.Send(ctx)
	if ok, err := renew.Result(); err != nil || !ok {
		t.Fatalf("renewal after SCRIPT FLUSH: %v, %v; want extended", ok, err)
	}
}

// An acquire reads a waiter's done key and every upstream in its one
// round trip.
func TestAcquireReadsDoneAndUpstreams(t *testing.T) {
	s, _, rdb := newStore(t)
	ctx := context.Background()
	rdb.Set(ctx, "done", "tok", 0)
	rdb.Set(ctx, "up1", "p:quota_exhausted:1:99999999999999", 0)
	a := &Acquire{Key: "k", Token: NewToken(), Done: "done", Upstreams: []string{"up1", "up2"}}
	var r Acquired
	if err := s.Acquire(ctx, a, &r); err != nil {
		t.Fatal(err)
	}
	if r.DoneToken != "tok" || len(r.Upstreams) != 2 || r.Upstreams[0].Mode != ModePaused || r.Upstreams[1].Mode != ModeReady {
		t.Fatalf("acquire: done %q, upstreams %+v; want tok, paused then ready", r.DoneToken, r.Upstreams)
	}
}

// A value no gate wrote, without a TTL, refuses an acquire and says it has
// no TTL; a settle of a run whose key is gone says so.
func TestValueWithoutTTLAndGoneKey(t *testing.T) {
	s, _, rdb := newStore(t)
	ctx := context.Background()
	rdb.Set(ctx, "foreign", "an operator's value", 0)
	if _, r := acquire(t, s, "foreign"); r.Taken || !r.NoTTL || r.Job.Kind != Foreign {
		t.Fatalf("acquire of a value without TTL: %+v, want refused, foreign, no TTL", r)
	}
	a, r := acquire(t, s, "k")
	rdb.Del(ctx, "k") // the lease expired
	tr := s.Trip()
	settled := tr.Settle(ctx, "k", a.Token, r.Fence, Settlement{Kind: Done})
	tr.Send(ctx)
	if st, err := settled.Result(); err != nil || st.Owned || !st.Gone {
		t.Fatalf("a success settled after its key expired: %+v, %v; want not owned, gone", st, err)
	}
}

// A script reply of the wrong shape (a script from another version of the
// gate, a proxy that mangles replies) is a bad-reply error from every
// decoder, never a panic: an empty array, one member where more are due,
// one member too many.
func TestMalformedRepliesAreErrors(t *testing.T) {
	decoders := map[string]func(redis.Cmder) error{
		"acquire": func(c redis.Cmder) error { return decodeAcquire(c.(*redis.Cmd), &Acquired{}) },
		"settle":  func(c redis.Cmder) error { _, err := decodeSettle(c); return err },
		"reset":   func(c redis.Cmder) error { _, err := decodeReset(c); return err },
		"read":    func(c redis.Cmder) error { _, err := decodeJobRead(c); return err },
		"claim":   func(c redis.Cmder) error { _, err := decodeClaim(c); return err },
		"stopped": func(c redis.Cmder) error { _, err := decodeStopped(c); return err },
		"admit":   func(c redis.Cmder) error { _, err := decodeAdmitted(c, "m"); return err },
		"budget":  func(c redis.Cmder) error { _, err := decodeBudgetRead(c); return err },
	}
	for _, reply := range [][]any{{}, {"x"}, {"x", int64(1), int64(2), int64(3)}} {
		for name, decode := range decoders {
			cmd := redis.NewCmd(context.Background())
			cmd.SetVal(reply)
			if err := decode(cmd); err == nil || !strings.Contains(err.Error(), "unexpected") {
				t.Errorf("%s of %v: %v, want a bad-reply error", name, reply, err)
			}
		}
	}
}

// An acquire that asks an upstream's budget answers each admission in the
// same round trip: an upstream with no reading yet admits one call at a
// time, and reserves it.
func TestAcquireAnswersEachAdmission(t *testing.T) {
	s, _, _ := newStore(t)
	a := &Acquire{Key: "k", Token: NewToken(), Admissions: []Admission{
		{Keys: budgetKeys("up"), Member: "m"},
	}}
	var r Acquired
	if err := s.Acquire(context.Background(), a, &r); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if exp := (Admitted{Judged: true, Admitted: true, Reserved: "m", Requests: -1, Tokens: -1, Unread: true}); !r.Taken || len(r.Admitted) != 1 || r.Admitted[0] != exp || r.AdmitErr != nil {
		t.Fatalf("acquire with an admission: taken %v, admitted %+v (%v); want taken, one admission %+v", r.Taken, r.Admitted, r.AdmitErr, exp)
	}
}

// An acquire whose first send failed is sent once more where the key may
// live now: after a MOVED redirection on any topology, and after any
// failure of a cluster master's client unless the connection was pinned;
// never after the caller gave up, nor for a refusal on one node.
func TestAcquireResendsWhereTheKeyMoved(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	node := New(rdb, Config{Lease: time.Minute})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}) // never dialed here
	t.Cleanup(func() { _ = cc.Close() })
	cluster := New(cc, Config{Lease: time.Minute})
	ctx := context.Background()
	gaveUp, cancel := context.WithCancel(ctx)
	cancel()
	moved := errors.New("MOVED 3999 127.0.0.1:6381")
	oom := errors.New("OOM command not allowed when used memory > 'maxmemory'")
	for _, tc := range []struct {
		name string
		s    *Store
		ctx  context.Context
		rt   route
		err  error
		want bool
	}{
		{"moved, one node", node, ctx, route{}, moved, true},
		{"refused, one node", node, ctx, route{}, oom, false},
		{"moved, caller gave up", node, gaveUp, route{}, moved, false},
		{"master failed, cluster", cluster, ctx, route{}, oom, true},
		{"master failed, pinned connection", cluster, ctx, route{conn: &redis.Conn{}}, oom, false},
		{"moved, pinned connection", cluster, ctx, route{conn: &redis.Conn{}}, moved, true},
	} {
		if got := tc.s.resend(tc.ctx, &tc.rt, tc.err); got != tc.want {
			t.Errorf("%s: resend %v, want %v", tc.name, got, tc.want)
		}
	}
}

// movedTo reads the new address from a MOVED redirection only.
func TestMovedTo(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("MOVED 3999 127.0.0.1:6381"), "127.0.0.1:6381"},
		{errors.New("ASK 3999 127.0.0.1:6381"), ""},
		{errors.New("MOVED 3999"), ""},
		{errors.New("OOM command not allowed"), ""},
	} {
		if got := movedTo(tc.err); got != tc.want {
			t.Errorf("movedTo(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// An admission that fails (its budget key holds a value of another type)
// does not fail the acquire: the job is taken and the admission's error
// is kept, beside the answers of the others. (On one node the script
// fails whole, and the job is taken first, its upstreams asked after.)
func TestAcquireKeepsAnAdmissionsError(t *testing.T) {
	s, _, rdb := newStore(t)
	ctx := context.Background()
	rdb.Set(ctx, "bad:budget", "not a budget", 0)
	a := &Acquire{Key: "k", Token: NewToken(), Admissions: []Admission{
		{Keys: budgetKeys("ok")},
		{Keys: budgetKeys("bad")},
	}}
	var r Acquired
	if err := s.Acquire(ctx, a, &r); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if !r.Taken || !r.Unasked || len(r.Admitted) != 0 {
		t.Fatalf("acquire whose script failed: taken %v, unasked %v, admitted %+v; want the job taken first, its upstreams not asked", r.Taken, r.Unasked, r.Admitted)
	}
	if err := s.Ask(ctx, a, &r); err != nil {
		t.Fatal(err)
	}
	if !r.Taken || r.Unasked || len(r.Admitted) != 2 || r.AdmitErr == nil || !strings.Contains(r.AdmitErr.Error(), "WRONGTYPE") {
		t.Fatalf("acquire with a failing admission: taken %v, admitted %+v, error %v; want taken, the admission's WRONGTYPE kept", r.Taken, r.Admitted, r.AdmitErr)
	}
}

// On one node an acquire whose upstreams have budgets judges them before
// the job: a call that no upstream's budget admits leaves the job
// untouched and untried, with Redis's clock; one admitted takes the job,
// reserves the call under the member asked, and reads the waiter's done
// key in the same trip. The token share is sent as given (0.25 of 1,000
// tokens is 250: more than the 240 left; 0.24 is 240).
func TestAcquireOnOneNodeJudgesTheBudgetsFirst(t *testing.T) {
	s, m, _ := newStore(t)
	ctx := context.Background()
	k := budgetKeys("up")
	tr := s.Trip()
	tr.RecordBudget(ctx, k, "", Reading{Tokens: Quota{Reported: true, Remaining: 240, Limit: 1000, ResetIn: time.Minute}}, time.Minute)
	// A fallback, cooled, whose budget has room: read and judged beside.
	k2 := budgetKeys("up2")
	tr.RecordBudget(ctx, k2, "", Reading{Requests: Quota{Reported: true, Remaining: 50, Limit: 60, ResetIn: time.Minute}}, time.Minute)
	tr.StopUpstream(ctx, "up2", NewToken(), Stop{Reason: "overloaded", TTL: time.Hour})
	tr.Send(ctx)
	m.Set("done", "last-success")

	a := &Acquire{Key: "k", Token: NewToken(), Done: "done", Admissions: []Admission{
		{Keys: k, Member: "m", Reserve: BudgetReserve{TokenShare: 0.25}}, {Keys: k2, Reserve: BudgetReserve{TokenShare: 0.25}}}}
	var r Acquired
	if err := s.Acquire(ctx, a, &r); err != nil {
		t.Fatal(err)
	}
	if r.Taken || !r.Untried || r.Now <= 0 || len(r.Admitted) != 2 || !r.Admitted[0].Judged || r.Admitted[0].Admitted || m.Exists("k") {
		t.Fatalf("share 0.25 with 240 of 1,000 left: %+v; want untried, the job untouched, refused by the budget", r)
	}
	if len(r.Upstreams) != 2 || r.Upstreams[1].Mode != ModeCooling || !r.Admitted[1].Judged || !r.Admitted[1].Admitted {
		t.Fatalf("the fallback: %+v, %+v; want cooling, its budget admitting", r.Upstreams, r.Admitted)
	}

	a.Admissions[0].Reserve.TokenShare = 0.24
	r = Acquired{}
	if err := s.Acquire(ctx, a, &r); err != nil {
		t.Fatal(err)
	}
	if !r.Taken || r.Untried || len(r.Admitted) != 2 || !r.Admitted[0].Admitted || r.Admitted[0].Reserved != "m" || r.DoneToken != "last-success" {
		t.Fatalf("share 0.24: %+v; want taken, reserved as m, the done key read", r)
	}
	if members, err := m.ZMembers("up:calls"); err != nil || len(members) != 1 || members[0] != "m" {
		t.Fatalf("calls in flight: %v, %v; want the one reserved as m", members, err)
	}
}

// narrowClient has only Client's methods: the store cannot tell it is one
// node, as for a client that may front a cluster.
type narrowClient struct{ Client }

// Where one script cannot read the job's key and its upstreams' (a
// cluster, or a client that may front one), an acquire with admissions
// takes the job first and asks nothing (Unasked); Ask then reads the
// upstreams and reserves the call. A duplicate is refused by the job and
// reserves nothing: of concurrent duplicates only the one that took the
// job is admitted.
func TestAcquireElsewhereTakesTheJobFirst(t *testing.T) {
	m, rdb := redistest.Miniredis(t)
	redistest.Advance(m, 0)
	s := New(narrowClient{rdb}, Config{Lease: time.Minute, WaitTimeout: 100 * time.Millisecond, Timeout: time.Second})
	ctx := context.Background()
	k := budgetKeys("up")
	ask := func() *Acquire {
		tok := NewToken()
		return &Acquire{Key: "k", Token: tok, Upstreams: []string{k.Upstream},
			Admissions: []Admission{{Keys: k, Member: ReserveMember(tok, 0)}}}
	}
	a, r := ask(), &Acquired{}
	if err := s.Acquire(ctx, a, r); err != nil {
		t.Fatal(err)
	}
	if !r.Taken || !r.Unasked || len(r.Upstreams) != 0 || len(r.Admitted) != 0 || m.Exists(k.Calls) {
		t.Fatalf("acquire: %+v, calls kept %v; want the job taken and nothing asked", r, m.Exists(k.Calls))
	}
	// As if the take had been sent half a lease ago: the call is held
	// for the half left, never past the lock a dead process leaves.
	r.sent = r.sent.Add(-30 * time.Second)
	if err := s.Ask(ctx, a, r); err != nil {
		t.Fatal(err)
	}
	if r.Unasked || len(r.Upstreams) != 1 || len(r.Admitted) != 1 || r.Admitted[0].Reserved != a.Admissions[0].Member {
		t.Fatalf("ask: %+v; want the upstream read and the call reserved", r)
	}
	if until, err := m.ZScore(k.Calls, a.Admissions[0].Member); err != nil || int64(until) > r.Now+30_000 || int64(until) < r.Now+20_000 {
		t.Fatalf("the call reserved until %v (%v), the job taken at %d for a minute half gone: want held for the half left", until, err, r.Now)
	}
	dup, rd := ask(), &Acquired{}
	if err := s.Acquire(ctx, dup, rd); err != nil {
		t.Fatal(err)
	}
	if members, err := m.ZMembers(k.Calls); rd.Taken || rd.Job.Kind != Running || err != nil || len(members) != 1 || members[0] != a.Admissions[0].Member {
		t.Fatalf("a duplicate: %+v, calls in flight %v %v; want refused by the running job, only the first call reserved", rd, members, err)
	}
}

// On one node a job held (its call running) refuses a duplicate before
// any upstream is judged: the script reads the job first, so the refusal
// asks no budget (Unasked, nothing admitted or reserved).
func TestAcquireOnOneNodeRefusesAHeldJobFirst(t *testing.T) {
	for _, tg := range oneNodeTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{Lease: time.Minute, WaitTimeout: 100 * time.Millisecond, Timeout: time.Second})
			p := redistest.UniqueKey(t)
			k := budgetKeys(p + ":up")
			recordReading(t, s, k, Reading{Requests: Quota{Reported: true, Remaining: 50, Limit: 60, ResetIn: time.Minute}})
			tok := NewToken()
			first := &Acquire{Key: p + ":k", Token: tok, Admissions: []Admission{{Keys: k, Member: ReserveMember(tok, 0)}}}
			var r Acquired
			if err := s.Acquire(ctx, first, &r); err != nil || !r.Taken || r.Admitted[0].Reserved == "" {
				t.Fatalf("the first call: %+v, %v; want taken, reserved", r, err)
			}
			tok2 := NewToken()
			dup := &Acquire{Key: p + ":k", Token: tok2, Admissions: []Admission{{Keys: k, Member: ReserveMember(tok2, 0)}}}
			r = Acquired{}
			if err := s.Acquire(ctx, dup, &r); err != nil {
				t.Fatal(err)
			}
			if r.Taken || !r.Unasked || r.Admitted != nil || r.Upstreams != nil || r.Job.Token != first.Token.Token {
				t.Fatalf("a duplicate of the running job: %+v; want refused by the job, its upstreams not asked", r)
			}
			if n, err := tg.Client.ZCard(ctx, k.Calls).Result(); err != nil || n != 1 {
				t.Fatalf("calls in flight after the duplicate: %d, %v; want only the first's", n, err)
			}
		})
	}
}

// oneNodeTargets are the engines on which an acquire with admissions is
// one script (takeAdmitted): miniredis and a real redis-server, as
// RETRYGATE_TARGETS picks them (a cluster takes the job first).
func oneNodeTargets(t *testing.T) []redistest.Target {
	t.Helper()
	var out []redistest.Target
	for _, tg := range redistest.Targets(t) {
		if !tg.IsCluster {
			out = append(out, tg)
		}
	}
	if len(out) == 0 {
		t.Skip("no one-node engine among RETRYGATE_TARGETS")
	}
	return out
}

// turnNumbered is the reservation of the turn given to the line member
// of sequence number n.
func turnNumbered(n int) string { return TurnMember(fmt.Sprintf("%018d%012d", 0, n)) }

// A turn held (its reservation live in the upstream's calls) passes the
// callers in line, on the upstream that gave it: here the second of the
// acquire's two, the first spent. The acquire sends which upstream holds
// the turn (its place, 1-based); a turn sent for none, or to the wrong
// one, is refused behind the line.
func TestAcquireWithATurnHeldPassesTheLine(t *testing.T) {
	for _, tg := range oneNodeTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{Lease: time.Minute, Timeout: time.Second})
			p := redistest.UniqueKey(t)
			spent, k := budgetKeys(p+":spent"), budgetKeys(p+":up")
			recordReading(t, s, spent, Reading{Requests: Quota{Reported: true, Remaining: 0, Limit: 60, ResetIn: time.Minute}})
			recordReading(t, s, k, Reading{Requests: Quota{Reported: true, Remaining: 50, Limit: 60, ResetIn: time.Minute}})
			line := strings.TrimSuffix(k.Budget, ":budget") + ":line"
			later := float64(time.Now().Add(time.Hour).UnixMilli())
			held := turnNumbered(45)
			for _, z := range []struct {
				key string
				z   redis.Z
			}{{line, redis.Z{Score: 1, Member: "waiter"}}, {line + ":owners", redis.Z{Score: later, Member: "owner"}}, {k.Calls, redis.Z{Score: later, Member: held}}} {
				if err := tg.Client.ZAdd(ctx, z.key, z.z).Err(); err != nil {
					t.Fatal(err)
				}
				tg.Client.PExpire(ctx, z.key, time.Minute)
			}
			tok := NewToken()
			a := &Acquire{Key: p + ":job", Token: tok, Admissions: []Admission{{Keys: spent}, {Keys: k, Member: ReserveMember(tok, 0), Turn: held}}}
			var r Acquired
			err := s.Acquire(ctx, a, &r)
			r.Close()
			if err != nil || !r.Taken || len(r.Admitted) != 2 || r.Admitted[0].Admitted || !r.Admitted[1].Admitted {
				t.Fatalf("a turn held on the second upstream, a caller in its line: %+v, %v; want taken, admitted by the second", r, err)
			}
		})
	}
}

// A turn the budget's calls do not hold (it lapsed between the line's
// give and the acquire, or was never given) is no turn: the one script
// judges the call as one with none, in one round trip, instead of failing
// and falling back to the take-first path (two).
func TestAcquireWithATurnNotHeldIsOneTrip(t *testing.T) {
	for _, tg := range oneNodeTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			rdb, ok := tg.Client.(*redis.Client)
			if !ok {
				t.Fatalf("a one-node engine's client is %T", tg.Client)
			}
			trips := new(pipelines)
			rdb.AddHook(trips)
			s := New(rdb, Config{Lease: time.Minute, WaitTimeout: 100 * time.Millisecond, Timeout: time.Second})
			p := redistest.UniqueKey(t)
			k := budgetKeys(p + ":up")
			recordReading(t, s, k, Reading{Requests: Quota{Reported: true, Remaining: 50, Limit: 60, ResetIn: time.Minute}})
			var r Acquired
			// The first acquire on a server loads the script (NOSCRIPT, then EVAL).
			warm := NewToken()
			if err := s.Acquire(ctx, &Acquire{Key: p + ":warm-up", Token: warm, Admissions: []Admission{{Keys: k}}}, &r); err != nil {
				t.Fatal(err)
			}
			r.Close()
			for _, turn := range []string{turnNumbered(42), "turn:"} {
				trips.n.Store(0)
				tok := NewToken()
				a := &Acquire{Key: p + ":" + turn, Token: tok, Admissions: []Admission{{Keys: k, Member: ReserveMember(tok, 0), Turn: turn}}}
				r = Acquired{}
				err := s.Acquire(ctx, a, &r)
				r.Close()
				if err != nil || !r.Taken || r.Unasked || len(r.Admitted) != 1 || !r.Admitted[0].Admitted || r.Admitted[0].Reserved == "" {
					t.Fatalf("turn %q: %+v, %v; want taken, admitted and reserved as a call with no turn", turn, r, err)
				}
				if n := trips.n.Load(); n != 1 {
					t.Fatalf("turn %q: %d round trips, want 1 (the one script, no fallback)", turn, n)
				}
			}
			// With a caller waiting in the line, a turn not held does not
			// pass it: refused as a call with no turn is.
			line := strings.TrimSuffix(k.Budget, ":budget") + ":line"
			if err := rdb.ZAdd(ctx, line, redis.Z{Score: 1, Member: "waiter"}).Err(); err != nil {
				t.Fatal(err)
			}
			rdb.ZAdd(ctx, line+":owners", redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "owner"})
			rdb.PExpire(ctx, line, time.Minute)
			rdb.PExpire(ctx, line+":owners", time.Minute)
			// A turn whose reservation lapsed (its score long past) is not
			// held either.
			lapsed := turnNumbered(44)
			rdb.ZAdd(ctx, k.Calls, redis.Z{Score: 1, Member: lapsed})
			for _, turn := range []string{"", turnNumbered(43), lapsed} {
				tok := NewToken()
				a := &Acquire{Key: p + ":behind" + turn, Token: tok, Admissions: []Admission{{Keys: k, Member: ReserveMember(tok, 0), Turn: turn}}}
				r = Acquired{}
				err := s.Acquire(ctx, a, &r)
				r.Close()
				if err != nil || r.Taken || len(r.Admitted) != 1 || r.Admitted[0].Admitted || r.Admitted[0].Wait <= 0 {
					t.Fatalf("turn %q behind a caller in line: %+v, %v; want refused with a wait", turn, r, err)
				}
			}
		})
	}
}

// The fence an acquire reports is the one it wrote on the job: the fence
// script's TIME, not the TIME its pipeline read a moment before (they
// differ by the microseconds between; twenty acquires on each engine, so
// that a mix-up shows whatever a server's clock does between two reads).
func TestAcquireReportsTheFenceItWrote(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{Lease: time.Minute})
			p := redistest.UniqueKey(t)
			for i := range 20 {
				key := p + ":" + strconv.Itoa(i)
				_, r := acquire(t, s, key)
				r.Close()
				v, err := tg.Client.Get(ctx, key).Result()
				if err != nil {
					t.Fatal(err)
				}
				if !r.Taken || parseJob(v).Fence != r.Fence {
					t.Fatalf("acquire %d: taken %v, fence %d; the job's value %q holds fence %d", i, r.Taken, r.Fence, v, parseJob(v).Fence)
				}
			}
		})
	}
}
