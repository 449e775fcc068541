package store

import (
	"context"
	"testing"
	"time"
)

// tokenLimit is the window: 12,000 tokens a minute, 200 a second
// (issue 37: "a 12,000-token window, prompts of 300–500 tokens").
const tokenLimit = 12000

// tokenReading is a reading of the token limit, taken age ago, with rem
// left: its reset is the refill of what is missing at 200 tokens a
// second, as a per-minute bucket reports it.
func tokenReading(rem int64, age time.Duration) Reading {
	return Reading{Tokens: Quota{Reported: true, Remaining: rem, Limit: tokenLimit,
		ResetIn: time.Duration(tokenLimit-rem) * time.Minute / tokenLimit, Age: age}}
}

// learnCost records the readings of five calls of 470 tokens each (a
// prompt of 400 and max_tokens 70), 100 ms apart, the last one now, from
// 5,000 tokens left: each leaves 450 less than the one before (470 spent,
// 20 refilled). Four calls after the first, the learned cost is 470.
func learnCost(t *testing.T, s *Store, k BudgetKeys) {
	t.Helper()
	ctx := context.Background()
	for i := range 5 {
		tr := s.Trip()
		r := tr.RecordBudget(ctx, k, "", tokenReading(5000-450*int64(i), time.Duration(4-i)*100*time.Millisecond), time.Minute)
		tr.Send(ctx)
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func admitOnce(t *testing.T, s *Store, a Admission) Admitted {
	t.Helper()
	ctx := context.Background()
	tr := s.Trip()
	r := tr.Admit(ctx, a)
	tr.Send(ctx)
	got, err := r.Result()
	if err != nil || !got.Judged {
		t.Fatalf("admit %+v: %+v, %v; want it judged", a, got, err)
	}
	return got
}

// An undeclared call is judged at the cost calls were learned to have,
// not by the 1 % share: with 400 tokens left, the share (120) admits a
// call of 470, the learned cost refuses it. Before anything is learned,
// the share holds.
func TestAdmitJudgesAtTheLearnedCost(t *testing.T) {
	s, _, _ := newStore(t) // Redis's clock stands still: nothing refills
	share := BudgetReserve{TokenShare: 0.01}
	for _, learned := range []bool{false, true} {
		k := budgetKeys("up")
		if learned {
			k = budgetKeys("up2")
			learnCost(t, s, k)
		}
		recordReading(t, s, k, tokenReading(400, 0))
		got := admitOnce(t, s, Admission{Keys: k, Reserve: share})
		if got.Admitted == learned {
			t.Fatalf("learned %v, 400 tokens left: %+v; want admitted only by the share (calls cost 470)", learned, got)
		}
		// 470 for the call and 470 kept for a larger one (two deviations
		// after the first sample), less the 400 left: 540 at 200 a second.
		if learned && (got.Wait < 2600*time.Millisecond || got.Wait > 2800*time.Millisecond) {
			t.Fatalf("refused for %v, want the refill of 540 tokens at 200 a second (2.7 s)", got.Wait)
		}
	}
}

// The calls in flight that did not say their tokens count at the learned
// cost, and the room kept for calls larger than it is two deviations of
// the undeclared calls' sum (a deviation of 235 after the first sample:
// 470 kept for one call, 665 for two, 814 for three). With 2,000 left,
// a first undeclared call of 470 fits (940 of 2,000), a second (1,605),
// a third does not (2,224); a call that says its 50 tokens still fits
// beside the two (the precise form stays precise: it keeps nothing). Were
// the room kept for one call alone, the third would fit (1,880).
func TestAdmitCountsUndeclaredCallsInFlight(t *testing.T) {
	s, _, _ := newStore(t)
	k := budgetKeys("up")
	learnCost(t, s, k)
	recordReading(t, s, k, tokenReading(2000, 0))
	for i, tc := range []struct {
		member   string
		tokens   int64
		admitted bool
	}{{"a:0", 0, true}, {"b:0", 0, true}, {"c:0", 0, false}, {"d:50", 50, true}} {
		got := admitOnce(t, s, Admission{Keys: k, Member: tc.member, Tokens: tc.tokens, Reserve: BudgetReserve{TokenShare: 0.01}})
		if got.Admitted != tc.admitted {
			t.Fatalf("call %d (%s) with 2,000 left and calls costing 470: %+v, want admitted %v", i, tc.member, got, tc.admitted)
		}
	}
}

// The cost follows what the drop in "remaining" says, not a guess: calls of
// 120 tokens (140 spent less 20 refilled per 100 ms) are learned at 120,
// so four of them fit in 750 with room kept for larger ones (two
// deviations of the four's sum: 240), where calls of 470 would not fit
// twice.
func TestCostLearnedFromTheDrop(t *testing.T) {
	s, _, _ := newStore(t)
	k := budgetKeys("up")
	for i := range 5 {
		recordReading(t, s, k, tokenReading(5000-100*int64(i), time.Duration(4-i)*100*time.Millisecond))
	}
	recordReading(t, s, k, tokenReading(750, 0))
	for i := range 6 {
		got := admitOnce(t, s, Admission{Keys: k, Member: "m" + itoa(i) + ":0", Reserve: BudgetReserve{TokenShare: 0.01}})
		if got.Admitted != (i < 4) {
			t.Fatalf("call %d with 750 left and calls learned at 120: %+v, want the first four admitted", i, got)
		}
	}
}

// A 429's short wait is one call's: until it ends, calls of that size
// (the learned cost, 470) are refused, each given its own turn one call's
// refill apart (470 tokens at 200 a second: 2.35 s), while a call that
// says fewer tokens is judged as usual.
func TestShortWaitRefusesCallsOfItsSize(t *testing.T) {
	s, _, _ := newStore(t)
	k := budgetKeys("up")
	learnCost(t, s, k)
	r := tokenReading(6000, 0)
	r.Fits = 15 * time.Millisecond
	recordReading(t, s, k, r)
	share := BudgetReserve{TokenShare: 0.01}
	first := admitOnce(t, s, Admission{Keys: k, Member: "a:0", Reserve: share})
	second := admitOnce(t, s, Admission{Keys: k, Member: "b:0", Reserve: share})
	if first.Admitted || first.Wait != 15*time.Millisecond {
		t.Fatalf("during the 15 ms a 429 stated: %+v, want refused for those 15 ms", first)
	}
	if second.Admitted || second.Wait < 2*time.Second || second.Wait > 3*time.Second {
		t.Fatalf("the next caller: %+v, want its own turn, one call's refill (2.35 s) later", second)
	}
	if small := admitOnce(t, s, Admission{Keys: k, Member: "c:50", Tokens: 50, Reserve: share}); !small.Admitted {
		t.Fatalf("a call of 50 tokens with 6,000 left: %+v, want admitted", small)
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

// A call refused with a 429 spent nothing, and its reading is not counted
// as a call: five calls of 470 with two 429s among them are still learned
// at 470 (counted as seven calls they would be 336), so with 800 left one
// more call (470, and 470 kept after a first sample) does not fit.
func TestRefusedCallsAreNotCounted(t *testing.T) {
	s, _, _ := newStore(t)
	k := budgetKeys("up")
	type call struct {
		rem     int64
		refused bool
	}
	// 100 ms apart, the last now: each call served leaves 450 less (470
	// spent, 20 refilled); a 429 20 ms after the call before it leaves
	// what that left, refilled 4.
	calls := []call{{5000, false}, {4550, false}, {4554, true}, {4100, false}, {3650, false}, {3654, true}, {3200, false}}
	ages := []time.Duration{400, 300, 280, 200, 100, 80, 0}
	for i, c := range calls {
		r := tokenReading(c.rem, ages[i]*time.Millisecond)
		r.Refused = c.refused
		recordReading(t, s, k, r)
	}
	recordReading(t, s, k, tokenReading(800, 0))
	if got := admitOnce(t, s, Admission{Keys: k, Member: "a:0", Reserve: BudgetReserve{TokenShare: 0.01}}); got.Admitted {
		t.Fatalf("800 left, calls of 470 with 470 kept: %+v, want refused (the 429s were counted as calls)", got)
	}
}

// A span that says nothing of a call's cost teaches nothing: one over
// which the limit changed size (12,000 then 24,000), or one the bucket
// could have refilled to whole in (5,000 left whole again in 35 s, the
// next reading 40 s later). With no cost learned, a call with 400 left is
// judged by the 1 % share (240 of 24,000; 120 of 12,000) and admitted.
func TestCostNotLearnedAcrossAGap(t *testing.T) {
	s, _, _ := newStore(t)
	resized := func(rem int64, age time.Duration, lim int64) Reading {
		return Reading{Tokens: Quota{Reported: true, Remaining: rem, Limit: lim,
			ResetIn: time.Duration(lim-rem) * time.Minute / time.Duration(lim), Age: age}}
	}
	for _, tc := range []struct {
		name     string
		readings []Reading
		last     Reading
	}{
		{"the limit changed size", []Reading{
			resized(5000, 500*time.Millisecond, 12000), resized(4550, 400*time.Millisecond, 12000), resized(4100, 300*time.Millisecond, 12000),
			resized(3650, 200*time.Millisecond, 12000), resized(3200, 100*time.Millisecond, 24000)}, resized(400, 0, 24000)},
		{"the bucket could have been whole", []Reading{
			tokenReading(5000, 80*time.Second), tokenReading(4550, 40*time.Second), tokenReading(4100, 39900*time.Millisecond),
			tokenReading(3650, 39800*time.Millisecond), tokenReading(3200, 39700*time.Millisecond)}, tokenReading(400, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := budgetKeys(tc.name)
			for _, r := range append(tc.readings, tc.last) {
				recordReading(t, s, k, r)
			}
			if got := admitOnce(t, s, Admission{Keys: k, Member: "a:0", Reserve: BudgetReserve{TokenShare: 0.01}}); !got.Admitted {
				t.Fatalf("400 left and no cost learnable: %+v, want admitted by the share", got)
			}
		})
	}
}

// Where the provider reports only a requests limit, the calls in flight
// are counted against it all the same: with 3 requests left (Redis's
// clock stands still: nothing refills), 3 calls are admitted and the
// fourth is refused until one settles or a request refills.
func TestAdmitCountsCallsInFlightOfARequestLimit(t *testing.T) {
	s, _, _ := newStore(t)
	k := budgetKeys("up")
	recordReading(t, s, k, Reading{Requests: Quota{Reported: true, Remaining: 3, Limit: 60, ResetIn: time.Minute}})
	for i, want := range []bool{true, true, true, false} {
		got := admitOnce(t, s, Admission{Keys: k, Member: ReserveMember(NewToken(), 0)})
		if got.Admitted != want {
			t.Fatalf("call %d with 3 requests left and %d in flight: %+v, want admitted %v", i+1, i, got, want)
		}
	}
}

// Calls in flight that said their tokens are counted at what they said:
// with 1,000 tokens left, calls of 300 and 400 in flight leave 300, which
// a call of 300 fits and one of 301 does not.
func TestAdmitCountsTheTokensCallsInFlightSaid(t *testing.T) {
	s, _, _ := newStore(t)
	k := budgetKeys("up")
	recordReading(t, s, k, Reading{Tokens: Quota{Reported: true, Remaining: 1000, Limit: 100000, ResetIn: time.Minute}})
	for _, n := range []int64{300, 400} {
		if got := admitOnce(t, s, Admission{Keys: k, Member: ReserveMember(NewToken(), n), Tokens: n}); !got.Admitted {
			t.Fatalf("a call of %d tokens: %+v, want admitted", n, got)
		}
	}
	if got := admitOnce(t, s, Admission{Keys: k, Tokens: 301}); got.Admitted {
		t.Fatalf("a call of 301 tokens with 300 left: %+v, want refused", got)
	}
	if got := admitOnce(t, s, Admission{Keys: k, Tokens: 300}); !got.Admitted {
		t.Fatalf("a call of 300 tokens with 300 left: %+v, want admitted", got)
	}
}
