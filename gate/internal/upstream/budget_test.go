package upstream

import (
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate/internal/store"
)

// A run's responses may arrive in any order (concurrent requests of one
// run): per limit the reading that leaves less, both refilled as they say,
// is kept; without resets the later one.
func TestSeenKeepsTheNewest(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	q := func(rem int64, reset time.Duration) classify.Quota {
		out := classify.Quota{Reported: true, Remaining: rem, Limit: 60}
		if reset > 0 {
			out.Reset = t0.Add(reset)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		in     []classify.Budget
		expRem int64
	}{
		{"the spent one wins, seen first", []classify.Budget{
			{At: t0.Add(2 * time.Second), Requests: q(0, time.Minute)},
			{At: t0.Add(time.Second), Requests: q(50, 10*time.Second)}}, 0},
		{"the spent one wins, seen last", []classify.Budget{
			{At: t0.Add(time.Second), Requests: q(50, 10*time.Second)},
			{At: t0.Add(2 * time.Second), Requests: q(0, time.Minute)}}, 0},
		{"read at once: fewer left", []classify.Budget{
			{At: t0, Requests: q(3, time.Minute)},
			{At: t0, Requests: q(5, time.Minute)}}, 3},
		{"a reset rounded up to the second, as Anthropic's: the later reading, which leaves less", []classify.Budget{
			{At: t0.Add(990 * time.Millisecond), Requests: q(1, 61990*time.Millisecond)},
			{At: t0.Add(1000 * time.Millisecond), Requests: q(0, 61*time.Second)}}, 0},
		{"no reset: the later reading", []classify.Budget{
			{At: t0.Add(time.Second), Requests: q(9, 0)},
			{At: t0, Requests: q(2, 0)}}, 9},
		{"the spent one wins though read earlier: the later leaves more, refilled as both say", []classify.Budget{
			{At: t0, Requests: q(0, time.Minute)},
			{At: t0.Add(time.Second), Requests: q(30, 59*time.Second)}}, 0},
		// 6 left refilling a request a second: 16 ten seconds later.
		{"equal levels once refilled: the later reading", []classify.Budget{
			{At: t0, Requests: q(6, 54*time.Second)},
			{At: t0.Add(10 * time.Second), Requests: q(16, 54*time.Second)}}, 16},
		{"a later reading with more than the earlier refilled to: the earlier", []classify.Budget{
			{At: t0, Requests: q(6, 54*time.Second)},
			{At: t0.Add(10 * time.Second), Requests: q(17, 54*time.Second)}}, 6},
		{"a whole limit does not say how it refills: the later reading", []classify.Budget{
			{At: t0, Requests: q(0, time.Minute)},
			{At: t0.Add(time.Second), Requests: q(60, 61*time.Second)}}, 60},
		{"a response without the limit leaves it", []classify.Budget{
			{At: t0, Requests: q(4, time.Minute)},
			{At: t0.Add(time.Second), Tokens: q(100, time.Minute)}}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Seen
			for _, b := range tc.in {
				s.Observe(b)
			}
			r, ok := s.reading(t0.Add(3 * time.Second))
			if !ok || !r.Requests.Reported || r.Requests.Remaining != tc.expRem {
				t.Fatalf("reading %+v (%v), want %d requests left", r, ok, tc.expRem)
			}
		})
	}
}

// A reading is sent as its reset from when it was taken and its age, so
// the budget anchors it on Redis's clock.
func TestSeenReading(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var s Seen
	s.Observe(classify.Budget{At: t0, Requests: classify.Quota{Reported: true, Remaining: 7, Limit: 60, Reset: t0.Add(53 * time.Second)}})
	r, ok := s.reading(t0.Add(40 * time.Millisecond))
	exp := store.Quota{Reported: true, Remaining: 7, Limit: 60, ResetIn: 53 * time.Second, Age: 40 * time.Millisecond}
	if !ok || r.Requests != exp || r.Tokens.Reported {
		t.Fatalf("reading %+v, want requests %+v and no tokens", r, exp)
	}
	s.Observe(classify.Budget{At: t0, Tokens: classify.Quota{Reported: true, Remaining: 900, Limit: 1000}})
	r, _ = s.reading(t0)
	if exp := (store.Quota{Reported: true, Remaining: 900, Limit: 1000, ResetIn: -1}); r.Tokens != exp {
		t.Fatalf("a limit with no reset: %+v, want %+v (reset not said)", r.Tokens, exp)
	}
	if _, ok := (&Seen{}).reading(t0); ok {
		t.Fatal("nothing seen, yet a reading")
	}
}

// After a 429 the wait is the one the message stated, else the refill of
// one call, never the time until the limit is whole; a reading that says
// the call fits already does not explain the refusal.
func TestSeenFits(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	spent := classify.Quota{Reported: true, Remaining: 0, Limit: 6000, Reset: t0.Add(time.Minute)}
	var s Seen
	if _, _, ok := s.Fits(t0, 0, 0.01); ok {
		t.Fatal("nothing seen, yet a wait")
	}
	s.Observe(classify.Budget{At: t0, Requests: spent})
	if w, stated, ok := s.Fits(t0, 0, 0.01); !ok || stated || w != 10*time.Millisecond {
		t.Fatalf("Fits = %v %v %v, want one request's refill at 6000 a minute (10ms), not stated", w, stated, ok)
	}
	s.Observe(classify.Budget{At: t0.Add(time.Millisecond), Requests: spent, RetryIn: 85 * time.Millisecond})
	if w, stated, ok := s.Fits(t0.Add(time.Millisecond), 0, 0.01); !ok || !stated || w != 85*time.Millisecond {
		t.Fatalf("Fits = %v %v %v, want the stated 85ms", w, stated, ok)
	}
	// OpenAI's documented example (59 of 60 requests, 149984 of 150000
	// tokens): nothing short, so nothing said about the refusal.
	var room Seen
	room.Observe(classify.Budget{At: t0,
		Requests: classify.Quota{Reported: true, Remaining: 59, Limit: 60, Reset: t0.Add(time.Second)},
		Tokens:   classify.Quota{Reported: true, Remaining: 149984, Limit: 150000, Reset: t0.Add(6 * time.Minute)}})
	if w, _, ok := room.Fits(t0, 0, 0.01); ok {
		t.Fatalf("Fits = %v, want no wait from a reading with room", w)
	}
	// 100 tokens left of 150000 refilling over 6 minutes: a call that said
	// 4000 tokens waits their refill (3900 of 149900 over 360 s, 9.37 s).
	var tokens Seen
	tokens.Observe(classify.Budget{At: t0, Tokens: classify.Quota{Reported: true, Remaining: 100, Limit: 150000, Reset: t0.Add(6 * time.Minute)}})
	if w, _, ok := tokens.Fits(t0, 4000, 0.01); !ok || w < 9360*time.Millisecond || w > 9370*time.Millisecond {
		t.Fatalf("Fits = %v %v, want the refill of 3900 tokens (~9.37s)", w, ok)
	}
	// A call that did not say its tokens waits for its share of the
	// limit (1% of 150000: 1500, 1400 short, 3.36 s).
	if w, _, ok := tokens.Fits(t0, 0, 0.01); !ok || w < 3360*time.Millisecond || w > 3370*time.Millisecond {
		t.Fatalf("Fits = %v %v, want the refill of 1400 tokens (~3.36s)", w, ok)
	}
}

// The call's reservation asks the first upstream this process does not
// know to refuse, unless the line gave the caller a turn in another: then
// that one, which alone carries the turn. A turn naming no upstream of the
// set changes nothing.
func TestAdmissionsAskTheTurnsUpstream(t *testing.T) {
	token := store.NewToken()
	member := store.ReserveMember(token, 0)
	for _, tt := range []struct {
		name          string
		refusing      bool // the first upstream is known to refuse
		turn          string
		turnOf        int
		member, carry int // the upstream that reserves, and the one with the turn (-1: none)
	}{
		{name: "no turn", turnOf: -1, member: 0, carry: -1},
		{name: "no turn, the first known to refuse", refusing: true, turnOf: -1, member: 1, carry: -1},
		{name: "a turn in the second", turn: "t", turnOf: 1, member: 1, carry: 1},
		{name: "a turn in the first, known to refuse", refusing: true, turn: "t", turnOf: 0, member: 0, carry: 0},
		{name: "an index without a turn", turnOf: 1, member: 0, carry: -1},
		{name: "a turn before the first", refusing: true, turn: "t", turnOf: -1, member: 1, carry: -1},
		{name: "a turn past the last", turn: "t", turnOf: 2, member: 0, carry: -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSet("p", []string{"a", "b"}, Policy{})
			if tt.refusing {
				s.all[0].remember(Status{RetryAfter: time.Hour})
			}
			got := s.Admissions(token, 0, tt.turnOf, tt.turn)
			if len(got) != 2 {
				t.Fatalf("%d admissions, want 2", len(got))
			}
			for i, a := range got {
				if exp := i == tt.member; (a.Member == member) != exp || (a.Member != "") != exp {
					t.Errorf("upstream %d reserves %q, want it to reserve: %v", i, a.Member, exp)
				}
				if exp := i == tt.carry; (a.Turn == tt.turn && a.Turn != "") != exp || (a.Turn != "") != exp {
					t.Errorf("upstream %d carries the turn %q, want it to: %v", i, a.Turn, exp)
				}
			}
		})
	}
}
