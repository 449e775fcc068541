package main

import (
	"fmt"
	"time"

	"github.com/retrygate/retrygate/gate"
)

// scenario is one retry storm: Jobs failing jobs, each retried by its
// client Every for Duration, spread over Instances app instances.
type scenario struct {
	Name      string
	Jobs      int
	Instances int
	Every     time.Duration
	Duration  time.Duration
	// Gate configures the leaky lock; zero fields are the gate's defaults
	// (a 5 min first cooldown).
	Gate gate.Options
}

// retries is how many times each job is retried (t = 0, Every, ...).
func (s scenario) retries() int {
	return int((s.Duration + s.Every - 1) / s.Every)
}

func defaultScenarios() []scenario {
	return []scenario{
		{Name: "1 failing job, retried every 3 s for 60 s", Jobs: 1, Instances: 1,
			Every: 3 * time.Second, Duration: time.Minute, Gate: gate.Options{Backoff: gate.Backoff{Jitter: -1}}},
		{Name: "1,000 failing jobs retried at once every 3 s for 60 s, 4 instances", Jobs: 1000, Instances: 4,
			Every: 3 * time.Second, Duration: time.Minute, Gate: gate.Options{Backoff: gate.Backoff{Jitter: -1}}},
	}
}

// result is what one scenario measured.
type result struct {
	Scenario scenario
	// Retries is how many retries the clients sent, per approach.
	Retries int64
	// FinallyCalls and GateCalls count the upstream calls each approach
	// let through.
	FinallyCalls, GateCalls int64
	// GateRefused counts the retries the gate refused without a call.
	GateRefused int64
	// Took is the wall-clock time of the scenario, both approaches.
	Took time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("%s: %d retries, finally lock %d calls, retrygate %d calls", r.Scenario.Name, r.Retries, r.FinallyCalls, r.GateCalls)
}
