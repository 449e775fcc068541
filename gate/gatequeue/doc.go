// Package gatequeue runs a queued job under a gate and says what the queue
// must do next. It is what gate/gateasynq and gate/gateriver are made of;
// use it to write an adapter for another queue.
//
// Run acquires the job's lease, runs the job, settles its outcome and
// returns a Plan:
//
//	the gate said                          Plan
//	fn succeeded; job kept Done            Complete
//	refused: cooling, running, upstream    Retry after the gate's wait, not Counted
//	fn failed: job cooled, attempt counted Retry after the cooldown, Counted (the queue's retry budget)
//	fn failed: provider-wide or systemic   Retry after the cooldown, not Counted
//	fn failed permanently, or refused      Cancel, with the reason code
//	  because the job is Failed; bad key
//	Redis out of reach, context ended,     Pass: not the gate's call; the queue's own
//	  the settle could not be written        retry policy (or, for the last, the lease)
//
// An adapter maps the four actions onto its queue: Complete to success,
// Cancel to "never retry", Retry to "run again after Wait" (and, where the
// queue has a retry budget, spend it only when Counted), Pass to returning
// the error as it is. Plan.Wrap gives the error text a queue records.
//
// Whether a failure counted an attempt is read from the gate itself (the
// attempts after the settle against the lease's attempt), never re-derived
// from the verdict.
//
// Run is safe for concurrent use, as the Gate it is given is; a Plan is a
// plain value, and its zero value is Pass.
package gatequeue
