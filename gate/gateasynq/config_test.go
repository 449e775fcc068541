package gateasynq

import (
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retrygate/retrygate/gate/gatequeue"
)

func TestWholeSeconds(t *testing.T) {
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		now  time.Duration // after base
		wait time.Duration
		exp  time.Duration
	}{
		{0, 1500 * time.Millisecond, 2 * time.Second},
		{0, 2 * time.Second, 2 * time.Second},
		{300 * time.Millisecond, 1200 * time.Millisecond, 1700 * time.Millisecond},
		{999 * time.Millisecond, time.Millisecond, time.Millisecond},
		{1, 10 * time.Millisecond, time.Second - 1},
	} {
		now := base.Add(tc.now)
		got := wholeSeconds(now, tc.wait)
		if tc.exp != got {
			t.Errorf("now +%v, wait %v: exp %v, got %v", tc.now, tc.wait, tc.exp, got)
		}
		// asynq keeps at.Unix(): it must not fall before the wait's end.
		if at := now.Add(got); time.Unix(at.Unix(), 0).Before(now.Add(tc.wait)) {
			t.Errorf("now +%v, wait %v: retry second %v is before the wait ends", tc.now, tc.wait, at)
		}
	}
}

func TestConfigDefersToItsOwnFunctions(t *testing.T) {
	other := errors.New("not the gate's")
	cfg := Config(asynq.Config{
		RetryDelayFunc: func(int, error, *asynq.Task) time.Duration { return 42 * time.Second },
		IsFailure:      func(error) bool { return false },
	})
	if exp, got := 42*time.Second, cfg.RetryDelayFunc(0, other, nil); exp != got {
		t.Errorf("delay for another error: exp %v, got %v", exp, got)
	}
	if cfg.IsFailure(other) {
		t.Error("IsFailure for another error did not ask the configured one")
	}
	counted := &retryError{plan: gatequeue.Plan{Action: gatequeue.Retry, Wait: 3 * time.Second, Counted: true}, err: other}
	if !cfg.IsFailure(counted) {
		t.Error("a counted failure is not a failure")
	}
	if got := cfg.RetryDelayFunc(0, counted, nil); got < 3*time.Second || got > 4*time.Second {
		t.Errorf("delay for the gate's 3 s: got %v", got)
	}
	if exp, got := time.Second, cfg.DelayedTaskCheckInterval; exp != got {
		t.Errorf("DelayedTaskCheckInterval: exp %v, got %v", exp, got)
	}
	if exp, got := 5*time.Second, Config(asynq.Config{DelayedTaskCheckInterval: 5 * time.Second}).DelayedTaskCheckInterval; exp != got {
		t.Errorf("a set DelayedTaskCheckInterval: exp %v kept, got %v", exp, got)
	}
}
