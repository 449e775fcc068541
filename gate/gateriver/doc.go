// Package gateriver runs riverqueue/river jobs under a retrygate gate: a
// worker middleware that snoozes a job the gate refuses or cools for
// exactly the gate's wait (a snooze is not an attempt), cancels a job the
// gate marked Failed with its reason, and snoozes every job of a paused or
// cooling upstream until its probe time, so one job probes and the rest
// wait (River itself has no timed queue pause).
//
// Wiring is one line in the client's Config:
//
//	Middleware: []rivertype.Middleware{gateriver.New(g, gateriver.Options{Job: byDocument})},
//
// The handler's context carries the lease (gate.LeaseFromContext): its
// Upstream names the upstream to call when the gate has Fallbacks, its Fence
// the token to write results with. A provider-wide failure while another
// upstream is ready leaves the job ready: the adapter snoozes it for 10 ms; no attempt, and
// the next run goes to that upstream.
//
// What a job's run ends in:
//
//	the gate said                                 River does
//	fn succeeded; the job is kept Done            completes the job (a Done job is not run again)
//	refused: cooling down, running elsewhere,     JobSnooze for the gate's wait (job cooldown, running
//	  upstream cooling or paused                    lease's time left, upstream cooldown or pause); no attempt
//	fn failed provider-wide (429, 503) or         JobSnooze for the gate's cooldown; no attempt
//	  systemically (quota, credentials)
//	fn failed transiently, the job's own fault    the error: River counts the attempt (MaxAttempts
//	                                                applies), records it and schedules the retry by its
//	                                                RetryPolicy; a retry due before the gate's cooldown
//	                                                ends is refused and snoozed for the rest, at no call
//	fn failed permanently, or the job is Failed   JobCancel; the job row's last error names the reason code
//	Redis unreachable, context ended              the error, as without the gate
//
// River makes a snoozed job available at once with its time set when the
// snooze is within its scheduler's interval (5 s), so it runs within
// FetchPollInterval of the gate's wait; a longer snooze waits for the
// scheduler, up to 5 s more.
//
// A duplicate (a second job with the same job key while the first runs)
// is snoozed until the running lease has settled or expired, at most
// gate.Options.Lease, without holding a worker slot; with Retention.Done set it
// then completes without running. gate.Options.Wait makes it wait in its
// worker slot instead, woken the moment the first one settles.
//
// A worker's own JobSnooze releases the job (no cooldown, no attempt) and
// reaches River as it is; its own JobCancel is recorded as a failure of
// the job (classified as usual) and still cancels it.
//
// A *Middleware is safe for concurrent use; create it with New.
package gateriver
