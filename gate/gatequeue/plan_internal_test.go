package gatequeue

import (
	"errors"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
)

// A settle that was not written leaves the job's lock to expire: the
// queue retries after the wait the gate's CallError carries (a lease) and
// counts the attempt (the gate could not say it was not the job's fault).
func TestFailedUnwrittenSettleWaitsALease(t *testing.T) {
	ce := &gate.CallError{State: gate.Running, RetryAfter: time.Minute, Err: errors.New("timed out"), SettleErr: gate.ErrUnavailable}
	if exp, got := (Plan{Action: Retry, Wait: time.Minute, Counted: true}), failed(ce, 1); exp != got {
		t.Fatalf("exp %+v, got %+v", exp, got)
	}
}

func TestActionString(t *testing.T) {
	for _, tc := range []struct {
		a   Action
		exp string
	}{{Pass, "pass"}, {Complete, "complete"}, {Retry, "retry"}, {Cancel, "cancel"}, {Action(4), "action(4)"}, {Action(9), "action(9)"}} {
		if got := tc.a.String(); tc.exp != got {
			t.Errorf("Action(%d): exp %q, got %q", tc.a, tc.exp, got)
		}
	}
}

// A job refused by its upstreams waits until the soonest of them may run
// a call (a fallback's shorter cooldown; a budget that only a call in
// flight settling can tell, wait 0), at least minWait; the refusal's own
// wait when it names no upstream.
func TestRefusedByUpstreamsWaitsForTheSoonest(t *testing.T) {
	up := func(waits ...time.Duration) []gate.UpstreamStatus {
		var us []gate.UpstreamStatus
		for _, w := range waits {
			us = append(us, gate.UpstreamStatus{State: gate.CoolingDown, RetryAfter: w})
		}
		return us
	}
	for _, tc := range []struct {
		name string
		ups  []gate.UpstreamStatus
		exp  time.Duration
	}{
		{"the fallback recovers sooner", up(30*time.Second, 5*time.Second), 5 * time.Second},
		{"the first recovers sooner", up(5*time.Second, 30*time.Second), 5 * time.Second},
		{"a budget without a wait first", up(0, 5*time.Second), minWait},
		{"a budget without a wait last", up(5*time.Second, 0), minWait},
		{"no upstream named", nil, time.Minute},
	} {
		b := &gate.BlockedError{Job: "j", State: gate.UpstreamCooling, RetryAfter: time.Minute, Upstreams: tc.ups}
		if exp, got := (Plan{Action: Retry, Wait: tc.exp}), refused(b); exp != got {
			t.Errorf("%s: exp %+v, got %+v", tc.name, exp, got)
		}
	}
}

// A job whose turn in its upstream's line could not come in time runs
// again when its turn is expected (the refusal's RetryAfter, not the
// upstreams' recovery), with its place, not counted; a failed or done job
// keeps its own plan.
func TestRefusedInLineWaitsForItsTurn(t *testing.T) {
	ups := []gate.UpstreamStatus{{State: gate.Ready}}
	for _, tc := range []struct {
		name string
		b    gate.BlockedError
		exp  Plan
	}{
		{"three ahead", gate.BlockedError{State: gate.UpstreamCooling, RetryAfter: 4 * time.Second, Ahead: 3, Upstreams: ups, Reason: "rate_limited"},
			Plan{Action: Retry, Wait: 4 * time.Second, Ahead: 3, Reason: "rate_limited"}},
		{"a turn due now", gate.BlockedError{State: gate.UpstreamCooling, Ahead: 1, Upstreams: ups},
			Plan{Action: Retry, Wait: minWait, Ahead: 1}},
		{"failed", gate.BlockedError{State: gate.Failed, Ahead: 2, Reason: "invalid_request"},
			Plan{Action: Cancel, Reason: "invalid_request"}},
	} {
		if got := refused(&tc.b); tc.exp != got {
			t.Errorf("%s: exp %+v, got %+v", tc.name, tc.exp, got)
		}
	}
}

func TestWrap(t *testing.T) {
	cause := errors.New("invalid request")
	for _, tc := range []struct {
		p   Plan
		exp string
	}{
		{Plan{Action: Cancel, Reason: "invalid_request"}, "retrygate: failed permanently (invalid_request): invalid request"},
		{Plan{Action: Retry, Wait: 2 * time.Second}, "retrygate: retry in 2s: invalid request"},
		{Plan{Action: Retry, Wait: 4 * time.Second, Ahead: 3}, "retrygate: in line, 3 ahead, retry in 4s: invalid request"},
		{Plan{Action: Complete}, "invalid request"},
		{Plan{}, "invalid request"},
	} {
		err := tc.p.Wrap(cause)
		if got := err.Error(); tc.exp != got {
			t.Errorf("%v: exp %q, got %q", tc.p.Action, tc.exp, got)
		}
		if !errors.Is(err, cause) {
			t.Errorf("%v: the wrapped error does not unwrap to the cause", tc.p.Action)
		}
	}
}
