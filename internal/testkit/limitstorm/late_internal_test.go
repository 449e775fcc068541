package limitstorm

import (
	"testing"
	"time"
)

// A late answer is judged against how late its process's own timers were
// over its time past the deadline, and as it asked: a wake-up still
// pending then counts up to the answer, one that came before the deadline
// or was due after the answer does not; and only the lateness beyond the
// canary's counts.
func TestLateAnswerJudgedAgainstCanary(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	// Asked at 0, the deadline at 1000, the answer at 1600 (600 ms past).
	for _, tc := range []struct {
		name     string
		wakes    []wake
		exp      time.Duration // the canary's lateness over [1000, 1600]
		expAsked time.Duration // and over [0, 600]
		late     bool          // judged late (beyond lateSlack)
	}{
		{"on time", []wake{{at(950), at(951)}, {at(1001), at(1002)}, {at(1052), at(1053)}}, ms(1), 0, true},
		{"a stall over the deadline, woken first", []wake{{at(950), at(1590)}}, ms(640), 0, false},
		// The canary ran after the answer: its lateness counts up to the
		// answer, not the 1 s more it waited.
		{"a stall over the deadline, woken after the answer", []wake{{at(980), at(2600)}}, ms(620), 0, false},
		{"a stall between the call's start and the deadline only", []wake{{at(700), at(990)}, {at(1040), at(1041)}}, ms(1), 0, true},
		{"a stall after the answer only", []wake{{at(1590), at(1591)}, {at(1641), at(2500)}}, ms(1), 0, true},
		{"a stall of half the time past", []wake{{at(1000), at(1300)}, {at(1350), at(1351)}}, ms(300), 0, true},
		// The gate's wait began late: its deadline came later.
		{"a stall as it asked", []wake{{at(50), at(500)}, {at(1001), at(1002)}}, ms(1), ms(450), false},
		{"no wake-up recorded", nil, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &canary{wakes: tc.wakes}
			if got := c.lateness(at(1000), at(1600)); got != tc.exp {
				t.Errorf("exp the canary %v late, got %v", tc.exp, got)
			}
			s := &share{}
			s.late = []pendingLate{{Late: Late{Past: ms(600)}, asked: at(0), deadline: at(1000), answered: at(1600)}}
			s.judgeLate(c)
			if exp, got := tc.late, s.out.Late == 1; exp != got {
				t.Errorf("exp judged late %v, got %v (%+v)", exp, got, s.out)
			}
			if len(s.out.Lates) != 1 || s.out.Lates[0].Canary != tc.exp || s.out.Lates[0].CanaryAsked != tc.expAsked {
				t.Errorf("exp the late answer recorded with the canary's %v and %v as it asked, got %+v", tc.exp, tc.expAsked, s.out.Lates)
			}
		})
	}
}
