package store

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// The rate learned of a provider that reports no budget
// (lua/budget_learned.lua, lua/budget_learn.lua), and the one call at a
// time before anything is known. Redis's clock moves only by Advance, so
// every wait is exact.

// learnKeys are the keys of one test's upstream.
var learnKeys = BudgetKeys{Upstream: "up", Budget: "up:budget", Calls: "up:calls"}

// admitOne asks the budget to admit and reserve the call of member.
func admitOne(t *testing.T, s *Store, member string) Admitted {
	t.Helper()
	tr := s.Trip()
	a := tr.Admit(context.Background(), Admission{Keys: learnKeys, Member: member, Reserve: BudgetReserve{Requests: 1, TokenShare: 0.01}})
	tr.Send(context.Background())
	got, err := a.Result()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// learn teaches the budget one settled call with no reading, and returns
// the rate then held, in calls a minute.
func learn(t *testing.T, s *Store, accepted bool, ran time.Duration) int64 {
	t.Helper()
	tr := s.Trip()
	a := AnswerRefused
	if accepted {
		a = AnswerAccepted
	}
	r := tr.Learn(context.Background(), learnKeys, a, ran, 10*time.Minute)
	tr.Send(context.Background())
	got, err := r.Result()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// release settles member's call with no reading.
func release(t *testing.T, s *Store, member string) {
	t.Helper()
	tr := s.Trip()
	r := tr.RecordBudget(context.Background(), learnKeys, member, Reading{}, time.Minute)
	tr.Send(context.Background())
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
}

// No reading yet and nothing learned is not "no limit" (issue 37.5): one
// call is admitted and reserved, the next is refused until it settles
// (Settles: a call in flight will tell), and once it has, the next goes.
// The admission is judged, by no reading (Requests and Tokens -1) and no
// learned rate.
func TestAdmitOneAtATimeBeforeAnythingIsKnown(t *testing.T) {
	s, _, _ := newStore(t)
	first := admitOne(t, s, "a:0")
	if exp := (Admitted{Judged: true, Admitted: true, Reserved: "a:0", Requests: -1, Tokens: -1, Unread: true}); first != exp {
		t.Fatalf("the first call: %+v, want %+v", first, exp)
	}
	for _, m := range []string{"b:0", "c:0"} {
		if got, exp := admitOne(t, s, m), (Admitted{Judged: true, Settles: true, Requests: -1, Tokens: -1, Unread: true}); got != exp {
			t.Fatalf("a call while the first runs: %+v, want %+v", got, exp)
		}
	}
	release(t, s, "a:0")
	if got := admitOne(t, s, "b:0"); !got.Admitted || got.Reserved != "b:0" {
		t.Fatalf("the next call once the first settled: %+v, want it admitted", got)
	}
}

// A reading, once it lands, judges the calls as before: several go at
// once.
func TestAdmitByTheReadingOnceItLands(t *testing.T) {
	s, _, _ := newStore(t)
	admitOne(t, s, "a:0")
	tr := s.Trip()
	tr.RecordBudget(context.Background(), learnKeys, "", Reading{Requests: Quota{Reported: true, Remaining: 50, Limit: 100, ResetIn: time.Minute}}, time.Minute)
	tr.Send(context.Background())
	for _, m := range []string{"b:0", "c:0", "d:0"} {
		if got := admitOne(t, s, m); !got.Admitted || got.Learned || got.Requests < 0 {
			t.Fatalf("call %s with 50 of 100 left: %+v, want admitted by the reading", m, got)
		}
	}
}

// A provider known to send no budget (a call settled with none) has no
// limit known until it refuses a call: its calls go unjudged. Its first
// 429, with too few calls accepted lately to tell a rate, holds it at 0.9
// × one call per call's length (50 ms): 18 a second, 1,080 a minute; the
// calls are then admitted at the learned rate, as a reading's limit
// admits them. Right after the cut the learned bucket holds one call (the
// probe's: what it gathered would meet the provider's empty bucket); a
// second call at the same instant is refused with the wait until one
// fits, one call's refill (1/18 s, 56 ms rounded up); it fits then, not a
// millisecond before. Refused callers are given turns one call's refill
// apart (the third: 112 ms).
func TestLearnedRateAdmits(t *testing.T) {
	s, m, rdb := newStore(t)
	learn(t, s, true, 50*time.Millisecond)
	for _, mem := range []string{"a:0", "b:0", "c:0"} {
		if got := admitOne(t, s, mem); got.Judged {
			t.Fatalf("call %s before any 429: %+v, want unjudged", mem, got)
		}
	}
	if got := learn(t, s, false, 50*time.Millisecond); got != 1080 {
		t.Fatalf("the rate after the first 429: %d a minute, want 1080", got)
	}
	// (Starting slowly, not yet from a rate the provider accepted: not
	// Learned, whose 429s cool the upstream for one call's length.)
	if got := admitOne(t, s, "a:0"); !got.Admitted || got.Learned || got.Reserved != "a:0" {
		t.Fatalf("the first call after the cut: %+v, want admitted by the learned rate", got)
	}
	got := admitOne(t, s, "b:0")
	if got.Admitted || got.Learned || got.Wait != 56*time.Millisecond {
		t.Fatalf("a second call at once: %+v, want refused by the learned rate for 56ms", got)
	}
	if got := admitOne(t, s, "c:0"); got.Admitted || got.Wait != 112*time.Millisecond {
		t.Fatalf("a third call at once: %+v, want its turn one call's refill later, 112ms", got)
	}
	redistest.Advance(m, 55*time.Millisecond)
	if got := admitOne(t, s, "b:0"); got.Admitted {
		t.Fatalf("a millisecond before its turn: %+v, want refused", got)
	}
	redistest.Advance(m, time.Millisecond)
	if got := admitOne(t, s, "b:0"); !got.Admitted {
		t.Fatalf("at its turn: %+v, want admitted", got)
	}
	// What is learned is kept with a TTL, as every key is.
	if ttl := rdb.PTTL(context.Background(), learnKeys.Budget).Val(); ttl <= 0 || ttl > 10*time.Minute {
		t.Fatalf("the budget's TTL %v, want at most the 10 minutes it is kept", ttl)
	}
}

// learnedAt teaches n accepted calls of 50 ms, each 50 ms after the
// other (20 a second), from a provider that sends no budget.
func learnedAt(t *testing.T, s *Store, m *miniredis.Miniredis, n int) {
	t.Helper()
	learn(t, s, true, 50*time.Millisecond)
	for range n - 1 {
		redistest.Advance(m, 50*time.Millisecond)
		learn(t, s, true, 50*time.Millisecond)
	}
}

// A 429 that ends a run of accepted calls cuts the rate to 0.9 × the
// lower of the rate admitted and the rate the provider accepted lately
// (the accepted calls, each counted down by e every half second), once
// that spans half a second: 10 accepted 50 ms apart, the last 50 ms
// before the 429, count (1 - e^-1) ÷ (1 - e^-0.1) × e^-0.1 = 6.01, read
// as 12.0 a second (6.01 ÷ 0.5 s), below the 20 a second of one 50 ms
// call at a time, so the rate held is 0.9 × 12.0 = 10.8 a second, 649 a
// minute. A 429 of a call that began before that cut is the cut's own:
// it cuts nothing. One that began after it, with few calls accepted
// since, finds the rate still too high and cuts by 0.75 (of the rate, or
// of what was accepted lately, lower by now).
func TestLearnCutsOnA429ThatEndsARun(t *testing.T) {
	s, m, _ := newStore(t)
	learnedAt(t, s, m, 10)
	redistest.Advance(m, 50*time.Millisecond)
	got := learn(t, s, false, 50*time.Millisecond)
	if got < 645 || got > 652 {
		t.Fatalf("the rate after a 429: %d a minute, want 0.9 × the 12.0 a second accepted lately, 649", got)
	}
	redistest.Advance(m, 10*time.Millisecond)
	if again := learn(t, s, false, 50*time.Millisecond); again != got {
		t.Fatalf("a 429 of a call that began before the cut: %d a minute, want %d unchanged", again, got)
	}
	if a := admitOne(t, s, "a:0"); !a.Admitted || !a.Learned {
		t.Fatalf("a call after the cut: %+v, want admitted by the rate learned from accepted calls", a)
	}
	redistest.Advance(m, 100*time.Millisecond)
	if hard := learn(t, s, false, 50*time.Millisecond); hard > got*3/4 || hard < got/2 {
		t.Fatalf("a 429 right after the cut: %d a minute, want at most 0.75 × %d", hard, got)
	}
}

// After a cut the probe climbs back to just under the rate it was cut
// from (0.95 × it after 50 accepted calls) and holds near it, then grows:
// never past twice what the provider accepted lately.
func TestLearnedRateProbesUpward(t *testing.T) {
	s, m, _ := newStore(t)
	learnedAt(t, s, m, 40)
	redistest.Advance(m, 100*time.Millisecond)
	cut := learn(t, s, false, 50*time.Millisecond) // 0.9 × what was accepted lately
	from := float64(cut) / 0.9
	var rates []int64
	for i := range 150 {
		redistest.Advance(m, 10*time.Millisecond) // 100 a second accepted
		r := learn(t, s, true, 50*time.Millisecond)
		if i == 49 || i == 99 || i == 149 {
			rates = append(rates, r)
		}
	}
	if r := float64(rates[0]); r < 0.94*from || r > 0.96*from {
		t.Fatalf("after 50 accepted calls: %v a minute, want 0.95 × the %v cut from", r, from)
	}
	if r := float64(rates[1]); r <= float64(rates[0]) || r > 1.11*from {
		t.Fatalf("after 100: %v a minute, want above %d and at most 1.1 × %v", r, rates[0], from)
	}
	if r := float64(rates[2]); r <= 1.5*from {
		t.Fatalf("after 150: %v a minute, want above 1.5 × %v: a limit that doubled is followed", r, from)
	}
}
