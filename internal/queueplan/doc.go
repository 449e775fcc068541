// Package queueplan runs a queued job under the gate and decides, in one
// place for every queue adapter (gate/gateasynq, gate/gateriver), what the
// queue must do next:
//
//	the gate said                          plan
//	fn succeeded; job held Done             Complete
//	refused: cooling, running, upstream     Retry after the gate's wait, no attempt counted
//	fn failed: job cooled, attempt counted  Retry after the cooldown, counted (the queue's retry budget)
//	fn failed: provider-wide or systemic    Retry after the cooldown, not counted
//	fn failed permanently, or refused       Cancel, with the reason code
//	  because the job is Failed; bad key
//	Redis out of reach, context ended,      Pass: not the gate's call; the queue's own
//	  the settle could not be written         retry policy (or, for the last, the lease)
//
// Whether a failure counted an attempt is read from the gate itself (the
// attempts after the settle against the lease's attempt), never re-derived
// from the verdict. Internal: the adapters' shared decision, not API.
package queueplan
