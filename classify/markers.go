package classify

import "time"

// marked is an error that carries an explicit verdict from application code.
type marked struct {
	err error
	v   Verdict
}

func (m *marked) Error() string {
	if m.err == nil {
		return m.v.Class.String() + " failure"
	}
	return m.err.Error()
}

func (m *marked) Unwrap() error { return m.err }

// Permanent marks err as a permanent failure. The gate marks the job
// failed instead of cooling it down. errors.Is and errors.As see through
// the mark.
func Permanent(err error) error {
	return &marked{err: err, v: Verdict{Class: ClassPermanent, Reason: ReasonMarkedPermanent, Evidence: "mark:permanent"}}
}

// Transient marks err as a transient failure with an optional retry hint
// (0 = use the gate's backoff). Typical use: the model ignored the required
// output format. The gate's MaxAttempts turns repeated failures into a
// permanent mark.
func Transient(err error, retryAfter time.Duration) error {
	return &marked{err: err, v: Verdict{Class: ClassTransient, RetryAfter: clampHint(retryAfter), Reason: ReasonMarkedTransient, Evidence: "mark:transient"}}
}

// Systemic marks err as not the job's fault (credentials, quota,
// configuration). The job is neither failed nor charged an attempt.
func Systemic(err error) error {
	return &marked{err: err, v: Verdict{Class: ClassSystemic, Reason: ReasonMarkedSystemic, Evidence: "mark:systemic"}}
}

// WithReason marks err with an explicit verdict of class c and a custom reason
// code. The reason must be a short code safe to show users (e.g.
// "bad_output"). An empty reason becomes the class name, so metric labels
// are never empty.
func WithReason(err error, c Class, reason string, retryAfter time.Duration) error {
	if reason == "" {
		reason = c.String()
	}
	ev := "mark:" + c.String()
	if c > ClassCanceled {
		ev = "mark:class" // String's "class(7)" is not Evidence's alphabet
	}
	return &marked{err: err, v: Verdict{Class: c, Reason: reason, RetryAfter: clampHint(retryAfter), Evidence: ev}}
}

func clampHint(d time.Duration) time.Duration {
	return min(max(d, 0), MaxHint)
}
