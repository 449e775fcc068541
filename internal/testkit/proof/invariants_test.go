package proof_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// TestInvariantChecksCatchViolations feeds history.check histories that
// break each invariant, so the scenario and soak checks can fail.
func TestInvariantChecksCatchViolations(t *testing.T) {
	o := gate.Options{Lease: 100 * time.Millisecond, Cooldown: 50 * time.Millisecond,
		Backoff:   gate.Backoff{Max: time.Second, Jitter: 0.1},
		Retention: gate.Retention{Failed: 200 * time.Millisecond}}
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ex := func(called, start, end int, fence int64) *execution {
		return &execution{job: "j", called: at(called), taken: at(start), start: at(start), end: at(end), returned: at(end + 1), fence: fence, gated: true}
	}
	returned := func(e *execution, ms int) *execution { e.returned = at(ms); return e }
	cooled := func(e *execution, d time.Duration) *execution {
		e.outcome, e.err = failTransient, &gate.CallError{Job: "j", State: gate.CoolingDown, RetryAfter: d, Verdict: classify.Verdict{Class: classify.ClassTransient}, Err: errTransient}
		return e
	}
	failed := func(e *execution) *execution {
		e.outcome, e.err = failPermanent, &gate.CallError{Job: "j", State: gate.Failed, Verdict: classify.Verdict{Class: classify.ClassPermanent}, Err: errPermanent}
		return e
	}
	lost := func(e *execution) *execution {
		e.err.(*gate.CallError).SettleErr = gate.ErrLeaseLost
		return e
	}
	// saw: Status showed fence (in state st) while e's fn ran, returning
	// at ms.
	saw := func(e *execution, fence int64, st gate.State, ms int) *execution {
		e.older, e.olderState, e.olderAt = fence, st, at(ms)
		return e
	}
	stale := func(e *execution, wrote int, err error) *execution { e.wroteAt, e.wrote = at(wrote), err; return e }

	for _, tc := range []struct {
		name   string
		execs  []*execution
		resets []span
		bad    bool
	}{
		{"sequential", []*execution{ex(0, 1, 10, 1), ex(11, 12, 20, 2)}, nil, false},
		{"fence backwards", []*execution{ex(0, 1, 10, 2), ex(11, 12, 20, 1)}, nil, true},
		{"fence reused", []*execution{ex(0, 1, 10, 1), ex(11, 12, 20, 1)}, nil, true},
		{"overlap after the lease", []*execution{ex(0, 1, 300, 1), ex(150, 151, 200, 2)}, nil, false},
		{"overlap within the lease", []*execution{ex(0, 1, 300, 1), ex(50, 51, 200, 2)}, nil, true},
		{"stale write accepted", []*execution{stale(ex(0, 1, 300, 1), 250, nil), stale(ex(150, 151, 200, 2), 160, nil)}, nil, true},
		{"cooldown respected", []*execution{cooled(ex(0, 1, 10, 1), 50*time.Millisecond), ex(60, 61, 70, 2)}, nil, false},
		{"run while cooling", []*execution{cooled(ex(0, 1, 10, 1), 50*time.Millisecond), ex(30, 31, 40, 2)}, nil, true},
		{"cooldown too short", []*execution{cooled(ex(0, 1, 10, 1), 10*time.Millisecond), ex(30, 31, 40, 2)}, nil, true},
		{"run while failed", []*execution{failed(ex(0, 1, 10, 1)), ex(100, 101, 110, 2)}, nil, true},
		{"taken before the failure's settle was answered", []*execution{returned(failed(ex(0, 1, 10, 1)), 150), ex(100, 101, 110, 2)}, nil, false},
		{"run while failed, after a run taken before the settle was answered", []*execution{returned(failed(ex(0, 1, 10, 1)), 150), ex(100, 101, 110, 2), ex(160, 161, 170, 3)}, nil, true},
		// Run 1's lease ends at 101, run 2 takes the job at 151 and its
		// lease ends at 251 (no renewal): run 1's failure may be written
		// from then on, if its settle was answered after.
		{"an older failure written after the lease ended", []*execution{returned(failed(ex(0, 1, 10, 1)), 260), saw(ex(150, 151, 400, 2), 1, gate.Failed, 255)}, nil, false},
		{"an older failure shown within the lease", []*execution{returned(failed(ex(0, 1, 10, 1)), 260), saw(ex(150, 151, 400, 2), 1, gate.Failed, 240)}, nil, true},
		{"an older failure answered before the lease could end", []*execution{returned(failed(ex(0, 1, 10, 1)), 240), saw(ex(150, 151, 400, 2), 1, gate.Failed, 255)}, nil, true},
		{"an older failure whose lease was lost (no settle sent)", []*execution{returned(lost(failed(ex(0, 1, 10, 1))), 260), saw(ex(150, 151, 400, 2), 1, gate.Failed, 255)}, nil, true},
		{"an older success shown", []*execution{returned(ex(0, 1, 10, 1), 260), saw(ex(150, 151, 400, 2), 1, gate.Ready, 255)}, nil, true},
		{"an older lease shown running", []*execution{returned(failed(ex(0, 1, 10, 1)), 260), saw(ex(150, 151, 400, 2), 1, gate.Running, 255)}, nil, true},
		{"an older fence no run had", []*execution{returned(failed(ex(0, 1, 10, 1)), 260), saw(ex(150, 151, 400, 3), 2, gate.Failed, 255)}, nil, true},
		{"run after a reset", []*execution{failed(ex(0, 1, 10, 1)), ex(100, 101, 110, 2)}, []span{{job: "j", call: at(50), ret: at(52)}}, false},
		{"ungated", []*execution{{job: "j", start: t0, end: t0}}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingT{}
			h := history{execs: tc.execs, resets: tc.resets}
			h.check(rec, o)
			if rec.failed != tc.bad {
				t.Fatalf("check reported a violation: %v, want %v (%v)", rec.failed, tc.bad, rec.msgs)
			}
		})
	}
}

// recordingT collects what a check reports instead of failing the test.
type recordingT struct {
	failed bool
	msgs   []string
}

func (r *recordingT) Helper() {}

func (r *recordingT) Errorf(format string, args ...any) {
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
