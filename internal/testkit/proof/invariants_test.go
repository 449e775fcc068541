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
		e.err = &gate.CallError{Job: "j", State: gate.CoolingDown, RetryAfter: d, Verdict: classify.Verdict{Class: classify.ClassTransient}, Err: errTransient}
		return e
	}
	failed := func(e *execution) *execution {
		e.err = &gate.CallError{Job: "j", State: gate.Failed, Verdict: classify.Verdict{Class: classify.ClassPermanent}, Err: errPermanent}
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
