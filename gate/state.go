package gate

import (
	"fmt"

	"github.com/retrygate/retrygate/gate/internal/store"
)

// State is a job's or an upstream's state in the gate. A job is Ready,
// Running, CoolingDown, Failed, Done or refused by its upstreams
// (UpstreamCooling). An upstream (UpstreamStatus) is Ready, CoolingDown
// or Paused. The zero value is Unknown. A Status or an Event that did not
// read a job, because an error came back instead, is Unknown. So it never
// reads as a job that may run.
type State uint8

const (
	// Unknown: the state could not be read (the call returned an error).
	Unknown State = iota
	// Ready: no lock. The next Acquire runs the job. An upstream that is
	// Ready takes calls.
	Ready
	// Running: a lease is held and renewed while fn runs.
	Running
	// CoolingDown: the last call failed transiently. The job may run again
	// when the cooldown ends. An upstream CoolingDown met a provider-wide
	// transient failure (rate limit, overload, repeated 5xx). It recovers
	// by itself.
	CoolingDown
	// Failed: the job failed permanently, or reached Backoff.MaxAttempts.
	// It is not retried until Reset or Retention.Failed.
	Failed
	// Done: the job succeeded and Retention.Done keeps it Done.
	Done
	// UpstreamCooling: every upstream of the gate is cooling down or
	// paused. The job's own state was not consulted.
	UpstreamCooling
	// Paused: an upstream's state only. A provider-wide systemic failure
	// (quota, credentials) or a wave of one permanent reason paused the
	// upstream. That pause lasts until ResetUpstreams, or until it ends
	// (UpstreamPolicy.PauseTTL). Or an operator paused it (PauseUpstream,
	// Reason ReasonOperator).
	Paused
)

var stateNames = [...]string{"unknown", "ready", "running", "cooling_down", "failed", "done", "upstream_cooling", "paused"}

// String returns the snake_case name used in HTTP bodies and metric labels.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// stateAt is the state a job's value holds at Redis time now (ms). A
// foreign value (of another shape) reads as running.
func stateAt(j store.Job, now int64) State {
	switch {
	case j.Kind == store.Foreign || j.Kind == store.Running:
		return Running
	case j.Over(now):
		return Ready
	}
	return kindState(j)
}

// kindState is the state a value holds by its kind alone. It serves
// reports made without Redis's clock.
func kindState(j store.Job) State {
	switch j.Kind {
	case store.Cooling:
		return CoolingDown
	case store.Failed:
		return Failed
	case store.Done:
		return Done
	}
	return Running // running, or foreign: a value of another shape
}
