package main

import (
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
)

// expectedGateCalls is one call per cooldown window: a retry at tick t
// calls the model only when the previous call's cooldown has ended.
func expectedGateCalls(s scenario, cooldown time.Duration, factor float64) int64 {
	var calls int64
	var readyAt time.Duration
	for tick := 0; tick < s.retries(); tick++ {
		now := time.Duration(tick) * s.Every
		if now >= readyAt {
			calls++
			readyAt = now + cooldown
			cooldown = time.Duration(float64(cooldown) * factor)
		}
	}
	return calls
}

func TestStormTable(t *testing.T) {
	short := gate.Options{Cooldown: 20 * time.Second, Backoff: gate.Backoff{Jitter: -1, Factor: 1}}
	scenarios := []scenario{
		defaultScenarios()[0],
		{Name: "100 jobs, 4 instances", Jobs: 100, Instances: 4, Every: 3 * time.Second, Duration: time.Minute, Gate: gate.Options{Backoff: gate.Backoff{Jitter: -1}}},
		{Name: "1 job, 20 s cooldown", Jobs: 1, Instances: 1, Every: 3 * time.Second, Duration: time.Minute, Gate: short},
		{Name: "10 jobs, 20 s doubling cooldown", Jobs: 10, Instances: 2, Every: 3 * time.Second, Duration: time.Minute,
			Gate: gate.Options{Cooldown: 20 * time.Second, Backoff: gate.Backoff{Jitter: -1}}},
	}
	var out strings.Builder
	rs, err := run(&out, scenarios)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                  string
		retries, finally, gat int64
	}{
		{"the article: 20 calls in 60 s vs 1", 20, 20, 1},
		{"every job's every retry vs one call per job", 2000, 2000, 100},
		{"one call per 20 s window", 20, 20, expectedGateCalls(scenarios[2], 20*time.Second, 1)},
		{"backoff widens the windows", 200, 200, 10 * expectedGateCalls(scenarios[3], 20*time.Second, 2)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rs[i]
			if exp, got := tt.retries, r.Retries; exp != got {
				t.Errorf("retries %d, want %d", got, exp)
			}
			if exp, got := tt.finally, r.FinallyCalls; exp != got {
				t.Errorf("finally-lock calls %d, want %d", got, exp)
			}
			if exp, got := tt.gat, r.GateCalls; exp != got {
				t.Errorf("retrygate calls %d, want %d", got, exp)
			}
			if exp, got := r.Retries-r.GateCalls, r.GateRefused; exp != got {
				t.Errorf("retrygate refusals %d, want %d (every retry not called is refused)", got, exp)
			}
		})
	}
	if exp, got := int64(3), rs[2].GateCalls; exp != got {
		t.Errorf("20 s windows in 60 s with retries every 3 s: %d calls, want %d (t = 0, 21, 42 s)", got, exp)
	}
	for _, want := range []string{"| 1 failing job, retried every 3 s for 60 s | 20 | 20 | 1 |", "| 100 jobs, 4 instances | 2,000 | 2,000 | 100 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestThousands(t *testing.T) {
	for in, exp := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 20000: "20,000", 1234567: "1,234,567"} {
		if got := thousands(in); got != exp {
			t.Errorf("thousands(%d) = %q, want %q", in, got, exp)
		}
	}
}
