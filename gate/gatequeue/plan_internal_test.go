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
	}{{Pass, "pass"}, {Complete, "complete"}, {Retry, "retry"}, {Cancel, "cancel"}, {Action(9), "action(9)"}} {
		if got := tc.a.String(); tc.exp != got {
			t.Errorf("Action(%d): exp %q, got %q", tc.a, tc.exp, got)
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
