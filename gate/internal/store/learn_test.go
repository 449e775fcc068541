package store

import (
	"context"
	"fmt"
	"math"
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
var learnKeys = budgetKeys("up")

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

// learn teaches the budget one settled call with no reading, in the
// settle's record (one script with the release), and returns the rate
// then held, in calls a minute, as the operator's read shows it (0: none
// known).
func learn(t *testing.T, s *Store, accepted bool, ran time.Duration) int64 {
	t.Helper()
	a := AnswerRefused
	if accepted {
		a = AnswerAccepted
	}
	recordReading(t, s, learnKeys, Reading{Lesson: Lesson{Teach: true, Answer: a, Ran: ran, Keep: 10 * time.Minute}})
	return readLearned(t, s).Learned
}

// acceptEvery teaches n accepted calls of ran each, Redis's clock moved
// gap before each, and returns the rate held after the last.
func acceptEvery(t *testing.T, s *Store, m *miniredis.Miniredis, n int, gap, ran time.Duration) int64 {
	t.Helper()
	var got int64
	for range n {
		redistest.Advance(m, gap)
		got = learn(t, s, true, ran)
	}
	return got
}

// slowStarted teaches the budget the slow start of
// TestLearnSlowStartStopsAtTheFirst429sRate: six 50 ms calls accepted
// 20 ms apart, then the first 429, 20 ms later (0.9 × one call at a time,
// capped at the 50 a second its interval implied).
func slowStarted(t *testing.T, s *Store, m *miniredis.Miniredis) {
	t.Helper()
	learn(t, s, true, 50*time.Millisecond)
	acceptEvery(t, s, m, 5, 20*time.Millisecond, 50*time.Millisecond)
	redistest.Advance(m, 20*time.Millisecond)
	learn(t, s, false, 50*time.Millisecond)
}

// lastCut is the last cut learned: when (lp), its kind (ls) and the rate
// it held (lr), as budget_learned.lua names them.
func lastCut(m *miniredis.Miniredis) string {
	return fmt.Sprintf("at %s kind %s rate %s", m.HGet(learnKeys.Budget, "lp"), m.HGet(learnKeys.Budget, "ls"), m.HGet(learnKeys.Budget, "lr"))
}

// readLearned is the operator's read of the budget.
func readLearned(t *testing.T, s *Store) BudgetRead {
	t.Helper()
	tr := s.Trip()
	r := tr.ReadBudget(context.Background(), learnKeys)
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
// limit known until it refuses a call: its calls go unpaced, bounded
// only in flight (TestBoundBeforeTheFirst429), and the operator's read
// says it sends none, with no rate. Its first 429, with
// too few calls accepted lately to tell a rate, holds it at 0.9 × one
// call per call's length (50 ms): 18 a second, 1,080 a minute; the calls
// are then admitted at the learned rate, as a reading's limit admits
// them. The provider's bucket was empty at the 429, so the learned bucket
// is emptied too: the first call goes one call's refill later (1/18 s, 56
// ms rounded up), not a millisecond before, and the one after it waits
// 0.9 × one refill more (51 ms, rounded up): refused callers are given turns a little
// closer than one call's refill apart (TestLearnedTurnsRunToTheQueue).
func TestLearnedRateAdmits(t *testing.T) {
	s, m, rdb := newStore(t)
	if got := readLearned(t, s); got.Unreported || got.Learned != 0 {
		t.Fatalf("before any answer: %+v, want neither unreported nor a rate", got)
	}
	learn(t, s, true, 50*time.Millisecond)
	if got := readLearned(t, s); !got.Unreported || got.Learned != 0 || got.Requests.Reported || got.Tokens.Reported {
		t.Fatalf("after an answer without a budget: %+v, want the provider read as sending none, no rate known yet", got)
	}
	for _, mem := range []string{"a:0", "b:0", "c:0"} {
		if got := admitOne(t, s, mem); !got.Admitted || got.Learned || got.Reserved != mem {
			t.Fatalf("call %s before any 429: %+v, want admitted, no rate judging it", mem, got)
		}
		release(t, s, mem)
	}
	if got := learn(t, s, false, 50*time.Millisecond); got != 1080 {
		t.Fatalf("the rate after the first 429: %d a minute, want 1080", got)
	}
	// (Starting slowly, not yet from a rate the provider accepted: not
	// Learned, whose 429s cool the upstream for one call's length.)
	got := admitOne(t, s, "a:0")
	if got.Admitted || got.Learned || got.Wait != 56*time.Millisecond {
		t.Fatalf("a call at once after the cut: %+v, want refused by the learned rate for one call's refill, 56ms", got)
	}
	if got := admitOne(t, s, "b:0"); got.Admitted || got.Wait != 107*time.Millisecond {
		t.Fatalf("a second call at once: %+v, want its turn 0.9 × one call's refill later, 107ms", got)
	}
	redistest.Advance(m, 55*time.Millisecond)
	if got := admitOne(t, s, "a:0"); got.Admitted {
		t.Fatalf("a millisecond before its turn: %+v, want refused", got)
	}
	redistest.Advance(m, time.Millisecond)
	if got := admitOne(t, s, "a:0"); !got.Admitted || got.Learned || got.Reserved != "a:0" {
		t.Fatalf("at its turn: %+v, want admitted by the learned rate", got)
	}
	// What is learned is kept with a TTL, as every key is.
	if ttl := rdb.PTTL(context.Background(), learnKeys.Budget).Val(); ttl <= 0 || ttl > 10*time.Minute {
		t.Fatalf("the budget's TTL %v, want at most the 10 minutes it is kept", ttl)
	}
}

// Before its first 429 a provider that sends no budget is not paced, but
// its calls in flight are bounded: 32 at first, one more for each call it
// accepted since it was known to send none (TCP's slow start, on
// completions). A call past the bound is refused until its turn: the
// bound frees one call every call's length (the mean of the accepted
// calls, 40 ms) ÷ the bound, and each refusal queues that far behind the
// one before. Calls that settle make room at once.
func TestBoundBeforeTheFirst429(t *testing.T) {
	s, m, _ := newStore(t)
	learn(t, s, true, 40*time.Millisecond) // the first answer: it began before learning did
	for i := range 32 {
		mem := fmt.Sprintf("a%d:0", i)
		if got := admitOne(t, s, mem); !got.Admitted || got.Reserved != mem || got.Learned {
			t.Fatalf("call %s, within the 32 first in flight: %+v, want admitted and reserved", mem, got)
		}
	}
	if got := admitOne(t, s, "e:0"); got.Admitted || got.Wait != 2*time.Millisecond {
		t.Fatalf("a 33rd call in flight: %+v, want refused for 40ms ÷ 32, 2ms rounded up", got)
	}
	if got := admitOne(t, s, "f:0"); got.Admitted || got.Wait != 4*time.Millisecond {
		t.Fatalf("a 34th: %+v, want its turn 2ms after the 33rd's, 4ms", got)
	}
	// Two calls accepted since: the bound is 34, two of the 32 settled.
	redistest.Advance(m, 50*time.Millisecond)
	release(t, s, "a0:0")
	learn(t, s, true, 40*time.Millisecond)
	release(t, s, "a1:0")
	learn(t, s, true, 40*time.Millisecond)
	for _, mem := range []string{"e:0", "f:0", "g:0", "h:0"} {
		if got := admitOne(t, s, mem); !got.Admitted || got.Reserved != mem {
			t.Fatalf("call %s with 30 in flight and a bound of 34: %+v, want admitted", mem, got)
		}
	}
	if got := admitOne(t, s, "i:0"); got.Admitted || got.Wait != 2*time.Millisecond {
		t.Fatalf("a 35th in flight: %+v, want refused for 40ms ÷ 34, 2ms rounded up (the turns told before have passed)", got)
	}
	if got := admitOne(t, s, "j:0"); got.Admitted || got.Wait != 4*time.Millisecond {
		t.Fatalf("a 36th: %+v, want its turn 2ms after the 35th's, 4ms", got)
	}
	// A 429 of a call that waited behind the bound ends it: the rate
	// learned judges from then on, in its own turns.
	learn(t, s, false, 40*time.Millisecond)
	if got := admitOne(t, s, "i:0"); got.Admitted || got.Wait < 20*time.Millisecond {
		t.Fatalf("a call at once after the first 429: %+v, want refused by the learned rate", got)
	}
}

// learnedAt teaches n accepted calls of 50 ms, each 50 ms after the
// other (20 a second), from a provider that sends no budget.
func learnedAt(t *testing.T, s *Store, m *miniredis.Miniredis, n int) {
	t.Helper()
	learn(t, s, true, 50*time.Millisecond)
	acceptEvery(t, s, m, n-1, 50*time.Millisecond, 50*time.Millisecond)
}

// The first 429 cuts the rate to 0.9 × the lower of one call at a time
// and the rate the provider accepted lately (the accepted calls, each
// counted down by e every half second), once that spans half a second: 10
// accepted 50 ms apart, the last 50 ms before the 429, count (1 - e^-1) ÷
// (1 - e^-0.1) × e^-0.1 = 6.01, read as 12.0 a second (6.01 ÷ 0.5 s),
// below the 20 a second of one 50 ms call at a time, so the rate held is
// 0.9 × 12.0 = 10.8 a second, 649 a minute. A 429 of a call that began before that cut is the cut's own:
// it cuts nothing. The provider's bucket was empty at the cut: the next
// call goes one refill of the new rate after it (1 ÷ 10.8 s, 93 ms). One
// that began after it, with no call accepted since, finds the rate still
// too high: it is cut to the lower of 0.75 × it and what one call more
// than were accepted since, over the time since, allows, never below
// half of it.
func TestLearnCutsOnA429ThatEndsARun(t *testing.T) {
	s, m, _ := newStore(t)
	learnedAt(t, s, m, 10)
	redistest.Advance(m, 50*time.Millisecond)
	got := learn(t, s, false, 50*time.Millisecond)
	if got < 645 || got > 652 {
		t.Fatalf("the rate after a 429: %d a minute, want 0.9 × the 12.0 a second accepted lately, 649", got)
	}
	redistest.Advance(m, 10*time.Millisecond)
	before := lastCut(m)
	learn(t, s, false, 50*time.Millisecond)
	if after := lastCut(m); after != before {
		t.Fatalf("a 429 of a call that began before the cut: the cut %s, want %s unchanged", after, before)
	}
	if a := admitOne(t, s, "a:0"); a.Admitted || a.Wait != 83*time.Millisecond {
		t.Fatalf("a call 10 ms after the cut: %+v, want refused until one call's refill of the rate after it, 83ms", a)
	}
	redistest.Advance(m, 83*time.Millisecond)
	if a := admitOne(t, s, "a:0"); !a.Admitted || !a.Learned {
		t.Fatalf("a call one refill after the cut: %+v, want admitted by the rate learned from accepted calls", a)
	}
	redistest.Advance(m, 50*time.Millisecond)
	// 143 ms since the cut: 0.97 × 1 call ÷ 0.143 s, 6.8 a second, 407 a minute.
	if hard := learn(t, s, false, 50*time.Millisecond); hard < 400 || hard > 410 {
		t.Fatalf("a 429 right after the cut: %d a minute, want 0.97 × 1 call in 143 ms, 407", hard)
	}
}

// Between two 429s that end runs the provider's bucket went from empty to
// empty: the calls it accepted in between, over the time between, are
// its rate, whatever it gathered meanwhile. After a cut, 40 calls of 50 ms
// that began after it are accepted, 25 ms apart, and a 429 ends the run 1
// s after the cut: 40 a second, held at 0.97 × it, 2,328 a minute. An
// accepted call that began before the cut is the last run's and is not
// counted (with it, 41 a second: 2,386). The rate is held for the
// provider's window as that measure spanned it (1 s), not a count of
// calls: then the probe climbs, and two windows into the climb it holds
// twice what was measured (a limit that doubled is followed).
func TestLearnMeasuresTheRateBetweenTwo429s(t *testing.T) {
	s, m, _ := newStore(t)
	measuredAt40(t, s, m)
	// Held for the window, 1 s: 40 calls 25 ms apart.
	held := func(n int, every time.Duration) int64 { return acceptEvery(t, s, m, n, every, 10*time.Millisecond) }
	if got := held(40, 25*time.Millisecond); got != 2328 {
		t.Fatalf("a window after the measure: %d a minute, want 2328 held", got)
	}
	if got := held(10, 25*time.Millisecond); got <= 2328 {
		t.Fatalf("past the window: %d a minute, want the probe above 2328", got)
	}
	// Two windows into the climb (3 s since the cut), at 100 a second
	// accepted (so not the 2 × accepted lately that bounds the probe).
	if got := held(175, 10*time.Millisecond); got < 2*2328 {
		t.Fatalf("two windows into the climb: %d a minute, want at least twice the 2328 measured", got)
	}
}

// measuredAt40 brings the learned rate to a measure of 40 a second
// (TestLearnMeasuresTheRateBetweenTwo429s), 2,328 a minute held, over a
// window of 1 s.
func measuredAt40(t *testing.T, s *Store, m *miniredis.Miniredis) {
	t.Helper()
	learnedAt(t, s, m, 10)
	redistest.Advance(m, 50*time.Millisecond)
	learn(t, s, false, 50*time.Millisecond) // the first cut
	redistest.Advance(m, 10*time.Millisecond)
	learn(t, s, true, 50*time.Millisecond) // began before the cut
	acceptEvery(t, s, m, 39, 25*time.Millisecond, 20*time.Millisecond)
	redistest.Advance(m, 15*time.Millisecond) // 1 s since the cut
	learn(t, s, true, 10*time.Millisecond)
	if got := learn(t, s, false, 10*time.Millisecond); got != 2328 {
		t.Fatalf("the rate measured between two 429s: %d a minute, want 0.97 × 40 a second, 2328", got)
	}
}

// A measure taken across a climb does not drag the rate down where the
// limit rose: held 1 s at 40 a second (the window), then 2 s of climb at
// 80 a second, a 429 at 3 s measures 200 calls in 3 s, 66.7 a second
// (3,880 a minute held); the calls of the climb came twice as fast as the
// hold's, so they are the measure: 0.97 × 80 a second, 4,656 a minute.
func TestLearnMeasureAcrossAClimbFollowsTheRise(t *testing.T) {
	s, m, _ := newStore(t)
	measuredAt40(t, s, m)
	acceptEvery(t, s, m, 40, 25*time.Millisecond, 10*time.Millisecond)
	acceptEvery(t, s, m, 160, 12500*time.Microsecond, 10*time.Millisecond)
	if got := learn(t, s, false, 10*time.Millisecond); got < 4550 || got > 4700 {
		t.Fatalf("a 429 that ends a climb past a limit that doubled: %d a minute, want 0.97 × the climb's 80 a second, 4656", got)
	}
}

// The slow start after a first 429 that came early (no half second of
// accepted calls to tell the rate) stops doubling at the rate the 429's
// interval implies: six calls accepted (the first, of 50 ms, and five
// more 20 ms apart, 50 a second) and the 429 120 ms after the first
// answer, 170 ms after learning began (when the first call began). The
// 429 was decided when its call reached the provider, one call's length
// (50 ms) before its answer: six calls in 120 ms, 50 a second (to its
// answer, 170 ms, the cap was 35.3). From 0.9 × one 50 ms call at a time
// (18 a second) the rate doubles every 16 accepted calls: 36 a second
// after 16, 72 after 32 (4,320 a minute); capped, it reaches 50 after
// 23.6 and climbs 15 % of it every 50 accepted calls after: 51.3 a
// second after 32, 3,076 a minute (2,222 with the cap at 35.3). A 429
// that came before any call was accepted since the first 429 cuts
// nothing (cut again, its cap would be 0.9 × 18 a second).
func TestLearnSlowStartStopsAtTheFirst429sRate(t *testing.T) {
	s, m, _ := newStore(t)
	learn(t, s, true, 50*time.Millisecond)
	acceptEvery(t, s, m, 5, 20*time.Millisecond, 50*time.Millisecond)
	redistest.Advance(m, 20*time.Millisecond)
	if got := learn(t, s, false, 50*time.Millisecond); got != 1080 {
		t.Fatalf("the first 429: %d a minute, want 0.9 × one 50 ms call at a time, 1080", got)
	}
	// A 429 before any call was accepted since is the start's own: the
	// rate and the cap stand.
	redistest.Advance(m, 30*time.Millisecond)
	if got := learn(t, s, false, 10*time.Millisecond); got != 1080 {
		t.Fatalf("a 429 with no call accepted since the first: %d a minute, want 1080 unchanged", got)
	}
	got := acceptEvery(t, s, m, 32, 10*time.Millisecond, 5*time.Millisecond)
	if got < 3040 || got > 3110 {
		t.Fatalf("32 accepted calls into the slow start: %d a minute, want it capped at 50 a second and climbing linearly, 3076", got)
	}
}

// A 429 whose answer a stalled process took 200 ms to see, where the
// accepted calls took 50 ms, does not tell one call's length: the first
// 429 cuts to 0.9 × one 50 ms call at a time, 18 a second, 1,080 a
// minute (of one 200 ms call at a time 4.5 a second, or the 6 a second
// that half of what was accepted lately keeps: 360 a minute; a storm's
// slow start from there let the provider's bucket gather for 4 s).
func TestLearnFirst429OfAStalledCallIsNotOneCallsLength(t *testing.T) {
	s, m, _ := newStore(t)
	learn(t, s, true, 50*time.Millisecond)
	acceptEvery(t, s, m, 5, 20*time.Millisecond, 50*time.Millisecond)
	redistest.Advance(m, 20*time.Millisecond)
	if got := learn(t, s, false, 200*time.Millisecond); got != 1080 {
		t.Fatalf("the first 429, of a call a stalled process saw after 200 ms: %d a minute, want 0.9 × one 50 ms call at a time, 1080", got)
	}
}

// The 429 that ends a slow start measures the rate over its climb, which
// a limit that rose within averages with the old one: the measure is a
// lower bound, held 0.4 s, then probed. The slow start of
// TestLearnSlowStartStopsAtTheFirst429sRate accepts 80 calls in 2 s and
// a 429 ends it: 40 a second, held at 0.97 × it, 2,328 a minute, for 0.4
// s (not the 2 s the measure spanned); 0.8 s after it the probe has
// climbed a window, to (0.97 + 0.15) × 40 a second, 2,688 a minute. The
// limit doubled to 80 a second: the 429 that ends the probe, 1 s after
// the cut, measures 80 calls in 1 s, held at 0.97 × it, 4,656 a minute,
// for the slow start's window, 2 s, the longer: 1.8 s on it is still
// held (a window of its own 1 s would have climbed to 5,026).
func TestLearnSlowStartsMeasureIsALowerBound(t *testing.T) {
	s, m, _ := newStore(t)
	slowStarted(t, s, m)
	accept := func(n int, every time.Duration) int64 { return acceptEvery(t, s, m, n, every, 10*time.Millisecond) }
	accept(80, 25*time.Millisecond)
	if got := learn(t, s, false, 10*time.Millisecond); got != 2328 {
		t.Fatalf("the 429 that ends the slow start: %d a minute, want 0.97 × 40 a second, 2328", got)
	}
	if got := accept(24, 12500*time.Microsecond); got != 2328 {
		t.Fatalf("0.3 s after the slow start's measure: %d a minute, want 2328 held", got)
	}
	if got := accept(40, 12500*time.Microsecond); got < 2680 || got > 2696 {
		t.Fatalf("0.8 s after the slow start's measure: %d a minute, want the probe a window into its climb, 2688", got)
	}
	accept(16, 12500*time.Microsecond)
	if got := learn(t, s, false, 10*time.Millisecond); got != 4656 {
		t.Fatalf("the 429 that ends the probe: %d a minute, want 0.97 × 80 a second, 4656", got)
	}
	if got := accept(144, 12500*time.Microsecond); got != 4656 {
		t.Fatalf("1.8 s after the probe's measure: %d a minute, want 4656 held for the slow start's window, 2 s", got)
	}
}

// A limit that halves: a 429 soon after a measured cut (five calls
// accepted in the 240 ms since) cuts to what six calls in 240 ms allow,
// 0.97 × 25 a second, 1,455 a minute, below 0.75 × the 2,328 held; never
// below half of it (no call in 400 ms: 1,164, not 0.97 × 2.5 a second).
func TestLearnFollowsALimitThatHalves(t *testing.T) {
	for _, tc := range []struct {
		name     string
		accepted int
		want     int64
	}{
		{"five accepted", 5, 1455},
		{"none accepted", 0, 1164},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, m, _ := newStore(t)
			learnedAt(t, s, m, 10)
			redistest.Advance(m, 50*time.Millisecond)
			learn(t, s, false, 50*time.Millisecond)
			acceptEvery(t, s, m, 40, 25*time.Millisecond, 10*time.Millisecond)
			if got := learn(t, s, false, 10*time.Millisecond); got != 2328 {
				t.Fatalf("measured: %d a minute, want 2328", got)
			}
			step := 200 * time.Millisecond
			if tc.accepted > 0 {
				step = 40 * time.Millisecond
			}
			acceptEvery(t, s, m, tc.accepted, step, 10*time.Millisecond)
			redistest.Advance(m, step)
			if tc.accepted == 0 {
				redistest.Advance(m, step)
			}
			if got := learn(t, s, false, 10*time.Millisecond); got != tc.want {
				t.Fatalf("a 429 soon after: %d a minute, want %d", got, tc.want)
			}
		})
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

// A cut never holds the rate below half of what the provider accepted
// lately: calls of 5 s (a slow model, many in flight), one at a time of
// which is 0.2 a second (0.18 after the cut, 10 a minute), where the
// provider just accepted 20 calls in half a second, 25 ms apart: counted
// down by e every half second, 12.96 at the last, read at the 429 25 ms
// later as 24.7 a second; half of it is 12.3 a second, 739 a minute.
func TestLearnKeepsHalfOfWhatWasAccepted(t *testing.T) {
	s, m, _ := newStore(t)
	learn(t, s, true, 5*time.Second)
	acceptEvery(t, s, m, 19, 25*time.Millisecond, 5*time.Second)
	redistest.Advance(m, 25*time.Millisecond)
	if got := learn(t, s, false, 5*time.Second); got < 735 || got > 745 {
		t.Fatalf("the rate after a 429 of a 5 s call: %d a minute, want half of the 24.7 a second accepted lately, 739", got)
	}
}

// A first 429 where the provider accepted more than one call at a time
// would send does not hold one call at a time as a cut: that is only
// where the slow start begins. Calls of 100 ms (10 a second one at a
// time) accepted 20 ms apart for 0.8 s (more than 10 a second lately),
// then a 429: from 0.9 × 10 a second, or half what was accepted lately,
// the rate doubles in 16 accepted calls. (Held as a cut it climbed by 4 %
// in those 16: on a busy machine a storm held half its limit for 5 s.)
func TestLearnFirst429AboveOneCallAtATimeStartsSlowly(t *testing.T) {
	s, m, _ := newStore(t)
	learn(t, s, true, 100*time.Millisecond)
	acceptEvery(t, s, m, 40, 20*time.Millisecond, 100*time.Millisecond)
	redistest.Advance(m, 20*time.Millisecond)
	first := learn(t, s, false, 100*time.Millisecond)
	if first < 540 {
		t.Fatalf("the first 429: %d a minute, want at least 0.9 × one 100 ms call at a time, 540", first)
	}
	if got := acceptEvery(t, s, m, 16, 20*time.Millisecond, 10*time.Millisecond); got < 19*first/10 {
		t.Fatalf("16 accepted calls after the first 429: %d a minute, want about twice the %d it began at (the slow start)", got, first)
	}
}

// The calls in flight when a slow start began were admitted at the old
// rate; on a busy machine they reach the provider late and take what its
// bucket refilled, so a call the slow start admitted meets a 429 that
// was theirs. Until the slow start has had as many calls accepted as
// were in flight at its start, a 429 ends nothing. Six calls in flight
// at the first 429: four accepted since and a 429 leave the rate
// climbing; two more and a 429 end the slow start.
func TestLearnSlowStartRidesOutTheCallsInFlightAtItsStart(t *testing.T) {
	s, m, _ := newStore(t)
	learn(t, s, true, 50*time.Millisecond)
	for _, mem := range []string{"a:0", "b:0", "c:0", "d:0", "e:0", "f:0"} {
		if got := admitOne(t, s, mem); !got.Admitted {
			t.Fatalf("call %s before any 429: %+v, want admitted", mem, got)
		}
	}
	acceptEvery(t, s, m, 5, 20*time.Millisecond, 50*time.Millisecond)
	redistest.Advance(m, 20*time.Millisecond)
	learn(t, s, false, 50*time.Millisecond) // the first 429: slow start, six in flight
	start := lastCut(m)
	acceptEvery(t, s, m, 4, 20*time.Millisecond, 10*time.Millisecond)
	redistest.Advance(m, 20*time.Millisecond)
	learn(t, s, false, 10*time.Millisecond)
	if got := lastCut(m); got != start {
		t.Fatalf("a 429 four accepted calls into a slow start that began with six in flight: the cut %s, want %s unchanged", got, start)
	}
	acceptEvery(t, s, m, 2, 20*time.Millisecond, 10*time.Millisecond)
	redistest.Advance(m, 20*time.Millisecond)
	learn(t, s, false, 10*time.Millisecond)
	if got := lastCut(m); got == start {
		t.Fatalf("a 429 six accepted calls into it: the cut %s, want a new one", got)
	}
}

// A rate cut to what the provider accepted lately climbs in time as well
// as in accepted calls: where few calls are accepted (a busy machine, a
// low rate) a climb counted in calls alone held it for seconds. Calls of
// 20 ms (50 a second one at a time) accepted 100 ms apart for 1 s, then
// a 429: the rate is cut to 0.9 × the 10 a second accepted lately. Two
// seconds on, with a call accepted every 100 ms (20, where the climb
// counts 50 before it rises), the rate has climbed a window (the 1 s the
// cut's measure spanned) past its hold: (0.95 + 0.15) ÷ 0.9 × it.
func TestLearnCutClimbsInTime(t *testing.T) {
	s, m, _ := newStore(t)
	learn(t, s, true, 20*time.Millisecond)
	acceptEvery(t, s, m, 10, 100*time.Millisecond, 20*time.Millisecond)
	redistest.Advance(m, 20*time.Millisecond)
	cut := learn(t, s, false, 20*time.Millisecond)
	if ls := m.HGet(learnKeys.Budget, "ls"); ls != "1" {
		t.Fatalf("the first 429 below one call at a time: ls %q, want 1 (cut to what was accepted lately)", ls)
	}
	if got := acceptEvery(t, s, m, 20, 100*time.Millisecond, 20*time.Millisecond); got < 115*cut/100 {
		t.Fatalf("2 s and 20 accepted calls after a cut to %d a minute: %d, want the climb a window past its hold, 1.22 × it", cut, got)
	}
	// A second window on, at 50 calls a second accepted, the rate is
	// past twice the cut's; the learned bucket holds two calls, counted
	// at the rate that admitted them (counted at the cut's, each would
	// owe half a slot: a third would go at once).
	if got := acceptEvery(t, s, m, 50, 20*time.Millisecond, 20*time.Millisecond); got < 2*cut {
		t.Fatalf("3 s after the cut: %d a minute, want past twice the cut's %d", got, cut)
	}
	for _, mem := range []string{"a:0", "b:0"} {
		if got := admitOne(t, s, mem); !got.Admitted {
			t.Fatalf("call %s, within the learned bucket's two: %+v, want admitted", mem, got)
		}
	}
	if got := admitOne(t, s, "c:0"); got.Admitted {
		t.Fatalf("a third call at once: %+v, want refused (the bucket holds two)", got)
	}
}

// The probe never passes twice the rate the provider accepted lately:
// above it the provider's bucket, not its rate, pays for the calls, and
// the 429s that end the probe come as many as were sent past it. Held a
// window at the 40 a second measured, then two windows of climb (the
// probe alone, 90 a second) with a call accepted every 30 ms:
// the count decaying by e every half second settles at 1 ÷ (1 − e^−0.06),
// 17.2, read as 34.3 a second; the rate is twice it, 4,121 a minute.
func TestLearnedRateNeverPassesTwiceWhatWasAccepted(t *testing.T) {
	s, m, _ := newStore(t)
	measuredAt40(t, s, m)
	got := acceptEvery(t, s, m, 100, 30*time.Millisecond, 10*time.Millisecond)
	if got < 4100 || got > 4140 {
		t.Fatalf("3 s after the measure, 33 a second accepted: %d a minute, want twice the 34.3 a second accepted lately, 4121", got)
	}
}

// A slow start past its cap never admits more than twice the rate the
// provider accepted since the 429 that began it: its bucket was empty at
// that 429, so that rate is what it refilled at, or less. The slow start
// of TestLearnSlowStartStopsAtTheFirst429sRate (capped at 50 a second)
// accepts 40 calls in 2 s, then 160 in 0.8 s: its climb in accepted calls
// alone would be at 329 a second, 19,754 a minute, where the provider's
// bucket, gathered while it went slowly, pays for a burst at over twice
// its limit; twice the 200 calls in 2.8 s is 143 a second, 8,571 a minute.
// The bound holds back only the doubling, not the line to 1.15 × the cap:
// where the load paused 10 s after the first 429, the 60 calls accepted
// when it came back tell 5.8 a second since, and the slow start still
// climbs its line, 73 % of the way from 50 a second to 57.5: 3,331 a
// minute.
func TestLearnSlowStartNeverPassesTwiceWhatWasAcceptedSinceIts429(t *testing.T) {
	type calls struct {
		n          int
		every, ran time.Duration
	}
	for _, tc := range []struct {
		name      string
		pause     time.Duration
		accepted  []calls
		low, high int64
		want      string
	}{
		{"slowly, then fast", 0, []calls{{40, 50 * time.Millisecond, 5 * time.Millisecond}, {160, 5 * time.Millisecond, 5 * time.Millisecond}},
			8540, 8600, "twice the 200 calls accepted in the 2.8 s since the first 429, 8571"},
		{"after a pause", 10 * time.Second, []calls{{60, 5 * time.Millisecond, 5 * time.Millisecond}},
			3300, 3360, "the line 73 % of the way from 50 to 57.5 a second, 3331"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, m, _ := newStore(t)
			slowStarted(t, s, m)
			redistest.Advance(m, tc.pause)
			var got int64
			for _, c := range tc.accepted {
				got = acceptEvery(t, s, m, c.n, c.every, c.ran)
			}
			if got < tc.low || got > tc.high {
				t.Fatalf("%d a minute, want %s", got, tc.want)
			}
		})
	}
}

// The probe after the slow start's lower bound never passes 1.5 × the
// rate accepted since that bound's 429: in windows of 0.4 s it doubles
// fast, to follow a limit that rose within the slow start, and where the
// limit held, it ran to 1.8 × it before the 429 (3 or 4 in flight
// then). The measure of TestLearnSlowStartsMeasureIsALowerBound (40 a
// second, held at 0.97 × it) is probed while the provider accepts 80 a
// second: 1.6 s after the cut the climb alone is at 179 a second and
// twice what was accepted lately at 160; 1.5 × the 128 calls in 1.6 s
// is 120 a second, 7,200 a minute. After a pause of 2 s and 20 calls in
// 0.25 s it holds its line's 1.12 × the measure, 2,688 a minute, not the
// 13 a second 1.5 × those calls allow.
func TestLearnLowerBoundsProbeNeverPassesOneAndAHalfWhatWasAccepted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pause     time.Duration
		n         int
		every     time.Duration
		low, high int64
		want      string
	}{
		{"accepted at 80 a second", 0, 128, 12500 * time.Microsecond, 7170, 7230, "1.5 × the 80 a second accepted since, 7200"},
		{"after a pause", 2 * time.Second, 20, 12500 * time.Microsecond, 2680, 2696, "the line's 1.12 × the 40 a second measured, 2688"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, m, _ := newStore(t)
			slowStarted(t, s, m)
			acceptEvery(t, s, m, 80, 25*time.Millisecond, 10*time.Millisecond)
			if got := learn(t, s, false, 10*time.Millisecond); got != 2328 {
				t.Fatalf("the 429 that ends the slow start: %d a minute, want 0.97 × 40 a second, 2328", got)
			}
			redistest.Advance(m, tc.pause)
			if got := acceptEvery(t, s, m, tc.n, tc.every, 10*time.Millisecond); got < tc.low || got > tc.high {
				t.Fatalf("%d a minute, want %s", got, tc.want)
			}
		})
	}
}

// refusedAfterFirst429 is the store of TestLearnedRateAdmits after its
// first 429: a learned rate of 18 a second (one call's refill 56 ms), the
// learned bucket empty.
func refusedAfterFirst429(t *testing.T) (*Store, *miniredis.Miniredis) {
	t.Helper()
	s, m, _ := newStore(t)
	learn(t, s, true, 50*time.Millisecond)
	for _, mem := range []string{"a:0", "b:0", "c:0"} {
		admitOne(t, s, mem)
		release(t, s, mem)
	}
	if got := learn(t, s, false, 50*time.Millisecond); got != 1080 {
		t.Fatalf("the rate after the first 429: %d a minute, want 1080", got)
	}
	return s, m
}

// refuse asks n calls at once, each refused, and returns the last one's
// wait.
func refuse(t *testing.T, s *Store, n int) time.Duration {
	t.Helper()
	var last time.Duration
	for i := range n {
		got := admitOne(t, s, fmt.Sprintf("q%d:0", i))
		if got.Admitted {
			t.Fatalf("call %d of a queue: %+v, want refused", i, got)
		}
		last = got.Wait
	}
	return last
}

// nextRefused asks calls until one is refused and returns its wait.
func nextRefused(t *testing.T, s *Store) time.Duration {
	t.Helper()
	for i := range 10 {
		if got := admitOne(t, s, fmt.Sprintf("n%d:0", i)); !got.Admitted {
			return got.Wait
		}
	}
	t.Fatal("10 calls admitted at once, want one refused")
	return 0
}

// A provider that reports nothing: the callers its learned rate refuses
// while it holds a measured rate are told their turns as far as the
// queue reaches, one behind another, 0.9 × one call's refill apart (a
// queue told turns exactly at the rate loses every turn a late caller
// leaves: goodput 0.89 in a busy storm), up to a minute (LEARN.horizon),
// where the turns start over. Held at 2,328 a minute (one refill 26 ms,
// 24 told), the 200th caller refused at once is told 199 × 24 ms after
// the first: past the 2 s a refusal was told at most before, when a
// caller behind a backlog of a minute came back 30 times (20 to 60 Redis
// round trips a finished job in issue 37's 25 s storms). While the rate
// climbs above what the provider was seen to take (past the hold, or in
// the slow start), the limit is not known and the turns reach 2 s, as
// before: told far at a rate that then rose, a queue came back at its
// old spacing (a doubled limit's goodput 0.82 where it was 0.93).
func TestLearnedTurnsRunToTheQueue(t *testing.T) {
	s, m, _ := newStore(t)
	measuredAt40(t, s, m)
	first := refuse(t, s, 1)
	if got, want := refuse(t, s, 199), first+199*24*time.Millisecond; got != want {
		t.Fatalf("the 200th refused in the hold: told %v, want %v", got, want)
	}
	if got := refuse(t, s, 2500); got != time.Minute {
		t.Fatalf("the 2,700th refused: told %v, want the minute the turns reach", got)
	}
	// Past the hold (a window, 1 s), the probe climbs.
	redistest.Advance(m, 1200*time.Millisecond)
	if got := nextRefused(t, s); got != 2*time.Second {
		t.Fatalf("refused while the rate climbs: told %v, want the 2 s the turns reach then", got)
	}
	// In the slow start after a first 429, too.
	s, _ = refusedAfterFirst429(t)
	if got := refuse(t, s, 100); got != 2*time.Second {
		t.Fatalf("the 100th refused in the slow start: told %v, want 2s", got)
	}
	// After a cut that measured nothing (TestLearnCutClimbsInTime's, to 9
	// a second), the climb back to it is known ground, its probe past it
	// is not.
	s, m, _ = newStore(t)
	learn(t, s, true, 20*time.Millisecond)
	acceptEvery(t, s, m, 10, 100*time.Millisecond, 20*time.Millisecond)
	redistest.Advance(m, 20*time.Millisecond)
	learn(t, s, false, 20*time.Millisecond)
	if got := refuse(t, s, 100); got <= 2*time.Second {
		t.Fatalf("the 100th refused after a cut: told %v, want past 2s", got)
	}
	acceptEvery(t, s, m, 20, 100*time.Millisecond, 20*time.Millisecond)
	if got := nextRefused(t, s); got != 2*time.Second {
		t.Fatalf("refused while that rate climbs past it: told %v, want 2s", got)
	}
}

// A queue told its turns at a rate that rose since is as many calls
// ahead, and they go sooner: the next refusal is told its turn at the new
// rate behind them (a queue told at 18 a second, 1.94 s long, is 0.97 s
// at 36), not behind a queue timed at the old one. A rate that fell is
// not stretched: its callers come back early, are refused and queue
// again (stretched, the turns counted them twice and left the provider
// idle: goodput 0.78 where a limit halved).
func TestLearnedTurnsFollowTheRate(t *testing.T) {
	s, m := refusedAfterFirst429(t)
	before := refuse(t, s, 100)
	// 16 calls that began after the 429 accepted at once: the slow start
	// doubles the rate.
	redistest.Advance(m, 60*time.Millisecond)
	before -= 60 * time.Millisecond
	for range 16 {
		learn(t, s, true, 50*time.Millisecond)
	}
	r := readLearned(t, s).Learned
	if r != 2160 {
		t.Fatalf("the rate after 16 calls accepted: %d a minute, want 2160", r)
	}
	// One refill at 36 a second is 28 ms (ceil 27.8), 26 ms told. (The
	// calls the learned bucket holds at the new rate go first.)
	want := before*1080/time.Duration(r) + 26*time.Millisecond
	if got := nextRefused(t, s); got < want-time.Millisecond || got > want+time.Millisecond {
		t.Fatalf("after the rate doubled: told %v, want %v (the queue at the new rate, one turn more)", got, want)
	}
	// A 429 cuts the rate (below 36 a second): the queue is not stretched.
	redistest.Advance(m, 10*time.Millisecond)
	prev := nextRefused(t, s)
	learn(t, s, false, 50*time.Millisecond)
	r2 := readLearned(t, s).Learned
	if r2 >= r {
		t.Fatalf("after a 429: %d a minute, want below %d", r2, r)
	}
	gap := time.Duration(math.Ceil(0.9*math.Ceil(60000/float64(r2)))) * time.Millisecond
	if got := refuse(t, s, 1); got < prev+gap-2*time.Millisecond || got > prev+gap+time.Millisecond {
		t.Fatalf("after the rate fell to %d a minute: told %v, want %v: one turn behind the last, not the queue stretched", r2, got, prev+gap)
	}
}
