package gate

import (
	"fmt"
	"strconv"
	"strings"
)

// State is a job's state in the gate.
type State uint8

const (
	// Ready: no lock; the next Acquire runs the job.
	Ready State = iota
	// Running: a lease is held and renewed while fn runs.
	Running
	// CoolingDown: the last call failed transiently; the lock expires when
	// the cooldown ends.
	CoolingDown
	// Failed: the job failed permanently (or reached MaxAttempts) and is not
	// retried until Reset or FailedTTL.
	Failed
	// Done: the job succeeded and DoneTTL holds it.
	Done
	// UpstreamCooling: the gate's upstream scope is cooling down or paused;
	// the job's own state was not consulted.
	UpstreamCooling
)

var stateNames = [...]string{"ready", "running", "cooling_down", "failed", "done", "upstream_cooling"}

// String returns the snake_case name used in HTTP bodies and metric labels.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// stateOf decodes a lock value: "r:<token>", "c:<attempts>:<reason>",
// "f:<attempts>:<reason>" or "d:". attempts is -1 when the value does not
// carry it (a value written before it did: "c:<reason>").
func stateOf(v string) (st State, attempts int, reason string) {
	if len(v) < 2 || v[1] != ':' {
		return Running, -1, "" // a foreign value: treat as held, never overwrite
	}
	switch v[0] {
	case 'c', 'f':
		st = CoolingDown
		if v[0] == 'f' {
			st = Failed
		}
		rest := v[2:]
		if n, r, ok := strings.Cut(rest, ":"); ok {
			if a, err := strconv.Atoi(n); err == nil {
				return st, a, r
			}
		}
		return st, -1, rest
	case 'd':
		return Done, -1, ""
	}
	return Running, -1, ""
}
