package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

func lineKeys(name string) LineKeys {
	l, o, m, g := keyspace.Line("t", name)
	return LineKeys{Line: l, Owners: o, Meta: m, Grants: g}
}

func join(t *testing.T, s *Store, k LineKeys, j LineJoin) LineJoined {
	t.Helper()
	if j.Quantum == 0 {
		j.Quantum = Quantum
	}
	if j.Owner == "" {
		j.Owner = "o1"
	}
	if j.Lease == 0 {
		j.Lease, j.Left, j.Keep = time.Minute, time.Hour, 2*time.Minute
	}
	ctx := context.Background()
	tr := s.Trip()
	r := tr.JoinLine(ctx, k, j)
	tr.Send(ctx)
	got, err := r.Result()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func turn(t *testing.T, s *Store, k LineKeys, n int) []LineEntry {
	t.Helper()
	ctx := context.Background()
	tr := s.Trip()
	r := tr.TurnLine(ctx, k, n, time.Minute, 2*time.Minute)
	tr.Send(ctx)
	got, err := r.Result()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func tenants(es []LineEntry) string {
	var b []byte
	for _, e := range es {
		b = append(b, e.Tenant...)
	}
	return string(b)
}

// The line's order: a higher class first; within a class, tenants take
// turns (start-time fair queuing); within a tenant, arrival.
func TestLineOrder(t *testing.T) {
	s, _, _ := newStore(t)
	k := lineKeys("order")
	for _, tn := range []string{"a", "a", "a", "b", "b"} {
		join(t, s, k, LineJoin{Class: 1, Tenant: tn})
	}
	join(t, s, k, LineJoin{Class: 9, Tenant: "z"})
	if exp, got := "zababa", tenants(turn(t, s, k, 10)); exp != got {
		t.Fatalf("turns went to %q, want %q", got, exp)
	}
}

// A weight of 2 takes two turns for each one of weight 1.
func TestLineWeights(t *testing.T) {
	s, _, _ := newStore(t)
	k := lineKeys("weights")
	for range 6 {
		join(t, s, k, LineJoin{Tenant: "h", Quantum: Quantum / 2})
		join(t, s, k, LineJoin{Tenant: "l"})
	}
	got := tenants(turn(t, s, k, 9))
	h := 0
	for _, c := range got {
		if c == 'h' {
			h++
		}
	}
	if h != 6 {
		t.Fatalf("of 9 turns %q, the weight-2 tenant took %d, want 6", got, h)
	}
}

// A tenant that arrives late is not owed the turns it did not ask for
// (its start tag is the class's virtual time, not 0) and is not starved by
// the backlog ahead of it: it goes next, then alternates.
func TestLineLateTenantStartsAtVirtualTime(t *testing.T) {
	s, _, _ := newStore(t)
	k := lineKeys("late")
	for range 10 {
		join(t, s, k, LineJoin{Tenant: "a"})
	}
	turn(t, s, k, 5)
	join(t, s, k, LineJoin{Tenant: "b"})
	join(t, s, k, LineJoin{Tenant: "b"})
	if exp, got := "babaa", tenants(turn(t, s, k, 5)); exp != got {
		t.Fatalf("after a's backlog, turns went %q, want %q", got, exp)
	}
}

// A caller whose turn cannot come before its deadline is refused at once
// with the expected wait, and takes no place.
func TestLineJoinRefusesAnUnmeetableDeadline(t *testing.T) {
	s, _, _ := newStore(t)
	k := lineKeys("deadline")
	for range 4 {
		join(t, s, k, LineJoin{Tenant: "a"})
	}
	got := join(t, s, k, LineJoin{Tenant: "a", Rate: 2, Lease: time.Minute, Left: 2 * time.Second, Keep: time.Minute})
	if got.Joined || got.Ahead != 4 || got.Wait != 2500*time.Millisecond {
		t.Fatalf("4 ahead at 2 turns/s, 2 s left: %+v; want refused, 4 ahead, 2.5 s wait", got)
	}
	// 15 a minute is 0.25 turns/s, sent as given (0.2 would say 25 s).
	slow := join(t, s, k, LineJoin{Tenant: "a", Rate: 0.25, Lease: time.Minute, Left: time.Second, Keep: time.Minute})
	if slow.Joined || slow.Wait != 20*time.Second {
		t.Fatalf("4 ahead at 0.25 turns/s: %+v; want refused with a 20 s wait", slow)
	}
	ok := join(t, s, k, LineJoin{Tenant: "a", Rate: 2, Lease: time.Minute, Left: 3 * time.Second, Keep: time.Minute})
	if !ok.Joined {
		t.Fatalf("4 ahead at 2 turns/s, 3 s left: %+v; want joined", ok)
	}
	if n := len(turn(t, s, k, 10)); n != 5 {
		t.Fatalf("%d turns given, want 5: the refused caller holds no place", n)
	}
}

// The places of a process whose lease ends without renewal are dropped:
// the turn goes to the caller behind them. So is a place whose caller's
// deadline passed.
func TestLineSkipsDeadPlaces(t *testing.T) {
	s, m, _ := newStore(t)
	k := lineKeys("expired")
	join(t, s, k, LineJoin{Tenant: "dead", Owner: "dead", Lease: time.Second, Left: time.Hour, Keep: time.Minute})
	join(t, s, k, LineJoin{Tenant: "late", Owner: "live", Lease: time.Minute, Left: time.Second, Keep: time.Minute})
	join(t, s, k, LineJoin{Tenant: "live", Owner: "live", Lease: time.Minute, Left: time.Hour, Keep: time.Minute})
	redistest.Advance(m, 1500*time.Millisecond)
	if exp, got := "live", tenants(turn(t, s, k, 3)); exp != got {
		t.Fatalf("turns went to %q, want %q", got, exp)
	}
}

// Leaving gives the tenant back its finish tag: a tenant that left is not
// pushed behind turns it never took.
func TestLineLeaveRollsBackTheFinishTag(t *testing.T) {
	s, _, _ := newStore(t)
	k := lineKeys("leave")
	join(t, s, k, LineJoin{Tenant: "a"})
	join(t, s, k, LineJoin{Tenant: "a"})
	b := join(t, s, k, LineJoin{Tenant: "b"})
	b2 := join(t, s, k, LineJoin{Tenant: "b"})
	ctx := context.Background()
	for _, mb := range []string{b2.Member, b.Member} {
		tr := s.Trip()
		r := tr.LeaveLine(ctx, k, "o1", mb)
		tr.Send(ctx)
		if ok, err := r.Result(); err != nil || ok != LeftLine {
			t.Fatalf("leave: %v, %v", ok, err)
		}
	}
	join(t, s, k, LineJoin{Tenant: "b"})
	if exp, got := "aba", tenants(turn(t, s, k, 3)); exp != got {
		t.Fatalf("turns went %q, want %q", got, exp)
	}
}

// Place counts the turns ahead, across classes; a member given its turn
// no longer waits.
func TestLinePlace(t *testing.T) {
	s, _, _ := newStore(t)
	k := lineKeys("place")
	join(t, s, k, LineJoin{Class: 5, Tenant: "a"})
	me := join(t, s, k, LineJoin{Class: 1, Tenant: "b"})
	join(t, s, k, LineJoin{Class: 7, Tenant: "c"})
	ctx := context.Background()
	place := func() LinePlace {
		tr := s.Trip()
		r := tr.PlaceInLine(ctx, k, me.Member)
		tr.Send(ctx)
		p, err := r.Result()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if exp, got := (LinePlace{Ahead: 2, Waiting: 3}), place(); exp != got {
		t.Fatalf("place: %+v, want %+v", got, exp)
	}
	turn(t, s, k, 3)
	if exp, got := (LinePlace{Ahead: -1, Waiting: 0}), place(); exp != got {
		t.Fatalf("place after every turn: %+v, want %+v", got, exp)
	}
}

// A turn lands on its owner's list of grants, which Collect takes once.
func TestLineCollect(t *testing.T) {
	s, _, _ := newStore(t)
	k := lineKeys("collect")
	a := join(t, s, k, LineJoin{Tenant: "x", Owner: "p1"})
	join(t, s, k, LineJoin{Tenant: "y", Owner: "p2"})
	turn(t, s, k, 2)
	ctx := context.Background()
	for i, exp := range []string{fmt.Sprint([]string{a.Member}), "[]"} {
		tr := s.Trip()
		r := tr.CollectLine(ctx, k, "p1")
		tr.Send(ctx)
		got, err := r.Result()
		if err != nil || got.Token != a.Token || fmt.Sprint(got.Granted) != exp {
			t.Fatalf("collect %d: %+v, %v; want token %q, granted %s", i, got, err, a.Token, exp)
		}
	}
}

func TestParseLineEntry(t *testing.T) {
	for _, tc := range []struct {
		m  string
		ok bool
		e  LineEntry
	}{
		{"254000000000001000000000001:1000:99:own:ten:ant", false, LineEntry{}},
		{"254000000000000001000000000001:1000:99:own:ten:ant", true, LineEntry{Class: 1, Owner: "own", Tenant: "ten:ant"}},
		{"254000000000000001000000000001:1000:99:own", false, LineEntry{}},
		{"254000000000000001000000000001:1000:own", false, LineEntry{}},
		{"x54000000000000001000000000001:1000:99:own:t", false, LineEntry{}},
	} {
		got, ok := ParseLineEntry(tc.m)
		tc.e.Member = tc.m
		if ok != tc.ok || (ok && got != tc.e) {
			t.Errorf("ParseLineEntry(%q) = %+v, %v; want %+v, %v", tc.m, got, ok, tc.e, tc.ok)
		}
	}
}

// line_leave.lua's reply is one of three: a reply past them is an error,
// and the command's own error is kept.
func TestLeaveLineReplies(t *testing.T) {
	s, _, _ := newStore(t)
	tr := s.Trip()
	r := tr.LeaveLine(context.Background(), lineKeys("leave"), "owner", "m")
	cmd := r.cmd.(*redis.Cmd)
	for _, tc := range []struct {
		v    int64
		want LineLeft
		bad  bool
	}{{0, NotInLine, false}, {1, LeftLine, false}, {2, TurnTaken, false}, {-1, 0, true}, {3, 0, true}} {
		cmd.SetVal(tc.v)
		got, err := r.Result()
		if bad := err != nil && strings.Contains(err.Error(), "unexpected"); bad != tc.bad || (!tc.bad && (err != nil || got != tc.want)) {
			t.Errorf("reply %d: %v, %v; want %v (a bad reply: %v)", tc.v, got, err, tc.want, tc.bad)
		}
	}
	boom := errors.New("boom")
	cmd.SetErr(boom)
	if _, err := r.Result(); err != boom {
		t.Errorf("a command that failed: %v, want its error", err)
	}
}

// On one node a turn given is published with PUBLISH on its owner's list,
// which the owner's process SUBSCRIBEs to (SPUBLISH would reach no one
// there).
func TestTurnPublishedOnOneNode(t *testing.T) {
	for _, tg := range oneNodeTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{Lease: time.Minute})
			k := lineKeys(redistest.UniqueKey(t))
			sub := tg.Client.Subscribe(ctx, k.GrantsOf("o1"))
			defer sub.Close()
			if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
				t.Fatal(err)
			}
			join(t, s, k, LineJoin{Tenant: "a"})
			if got := turn(t, s, k, 1); len(got) != 1 {
				t.Fatalf("turns given: %v, want one", got)
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if msg, err := sub.ReceiveMessage(rctx); err != nil || msg.Channel != k.GrantsOf("o1") {
				t.Fatalf("the owner's channel: %v (%v), want the turn's message", msg, err)
			}
		})
	}
}
