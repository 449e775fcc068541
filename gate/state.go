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

// ParseState is the inverse of State.String.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// lockInfo is what a lock value says about its job.
type lockInfo struct {
	st       State
	attempts int    // -1 when the value does not carry it
	reason   string // cooling and failed
	fence    int64  // 0 when the value does not carry it
}

// decodeLock decodes a lock value:
//
//	r:<token>:<fence>:<attempts>  Running
//	c:<attempts>:<reason>         CoolingDown
//	f:<attempts>:<reason>         Failed
//	d:<fence>                     Done
//	z:<fence>[:<attempts>]        Ready, remembering the last fence and the
//	                              attempt count (after a success, a release
//	                              or a reset)
//
// Values written by earlier versions ("r:<token>", "c:<reason>", "d:")
// still decode, without the parts they lack. A foreign value is Running: it
// is never overwritten.
func decodeLock(v string) lockInfo {
	info := lockInfo{st: Running, attempts: -1}
	if len(v) < 2 || v[1] != ':' {
		return info
	}
	rest := v[2:]
	switch v[0] {
	case 'c', 'f':
		info.st = CoolingDown
		if v[0] == 'f' {
			info.st = Failed
		}
		info.reason = rest
		if n, r, ok := strings.Cut(rest, ":"); ok {
			if a, err := strconv.Atoi(n); err == nil {
				info.attempts, info.reason = a, r
			}
		}
	case 'd':
		info.st = Done
		info.fence, _ = strconv.ParseInt(rest, 10, 64)
	case 'z':
		f, a, hasA := strings.Cut(rest, ":")
		fence, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return info // foreign
		}
		info.st, info.fence, info.attempts = Ready, fence, 0
		if hasA {
			if n, err := strconv.Atoi(a); err == nil {
				info.attempts = n
			}
		}
	case 'r':
		// The token never holds ':'.
		if _, fa, ok := strings.Cut(rest, ":"); ok {
			f, a, _ := strings.Cut(fa, ":")
			info.fence, _ = strconv.ParseInt(f, 10, 64)
			if n, err := strconv.Atoi(a); err == nil {
				info.attempts = n
			}
		}
	}
	return info
}

// stateOf decodes a lock value's state, attempt count (-1 when the value
// does not carry it) and reason.
func stateOf(v string) (st State, attempts int, reason string) {
	i := decodeLock(v)
	return i.st, i.attempts, i.reason
}
