// Package gateasynq runs hibiken/asynq tasks under a retrygate gate, so a
// task refused or cooled by the gate comes back at the gate's wait instead
// of asynq's own backoff, and never burns its retry budget for it.
//
// Wiring is one line on the server's Config and one on the mux:
//
//	srv := asynq.NewServer(redisOpt, gateasynq.Config(asynq.Config{Concurrency: 10}))
//	mux.Use(gateasynq.Middleware(g, gateasynq.Options{Job: byDocument}))
//
// The handler's context carries the lease (gate.LeaseFromContext): its
// Upstream names the upstream to call when the gate has Fallbacks, its Fence
// the token to write results with. A provider-wide failure while another
// upstream is ready leaves the job ready: the adapter retries it at once
// (asynq's next whole second), Retried unchanged, and
// the next run goes to that upstream.
//
// What a task's run ends in:
//
//	the gate said                                 asynq does
//	fn succeeded; the job is kept Done            completes the task (a Done job is not run again)
//	refused: cooling down, running elsewhere,     retries at the gate's wait (job cooldown, running
//	  upstream cooling or paused                    lease's time left, upstream cooldown or pause); Retried unchanged
//	fn failed provider-wide (429, 503) or         retries at the gate's cooldown; Retried unchanged
//	  systemically (quota, credentials)
//	fn failed transiently, the job's own fault    retries at the gate's cooldown; Retried + 1 (MaxRetry applies)
//	fn failed permanently, or the job is Failed   archives the task (SkipRetry); LastErr names the reason code
//	Redis unreachable, context ended              asynq's own RetryDelayFunc and IsFailure (as without the gate)
//
// Config makes the last three columns true: its RetryDelayFunc returns the
// gate's wait, rounded up to a whole second because asynq schedules
// retries in whole Unix seconds (so a retry is never early, and is at
// most a second plus DelayedTaskCheckInterval late), and its IsFailure
// counts only the gate's counted attempts. Without Config, asynq would
// retry a refusal at its exponential backoff and count it toward MaxRetry.
// Config also sets DelayedTaskCheckInterval to 1 s when unset (asynq's
// default, 5 s, would add up to 5 s to every wait).
//
// A refusal shorter than a second (an upstream at its budget says "in
// 10 ms"; a probe's outcome is a call away) is waited out in the task's
// worker instead, and the gate asked again: handed back to asynq it would
// cost up to a second more. A run waits so for at most 5 s, then the task
// goes back to asynq as above, so a worker held by an upstream at its
// limit turns over to other tasks; and never within a second of the
// task's deadline (asynq counts a task whose deadline passed as failed).
// A job running elsewhere is not waited for (gate.Options.Wait does that),
// and a failed call is not tried again in the same run.
//
// asynq archives a task whose Retried has reached MaxRetry before it asks
// IsFailure, so a task enqueued with MaxRetry(0) is archived by its first
// refusal: give gated tasks a retry budget.
//
// A duplicate (a second task with the same job key while the first runs)
// is retried when the running lease has settled or expired, at most
// gate.Options.Lease later, without holding a worker slot; with Retention.Done
// set it then completes without running. gate.Options.Wait makes it wait
// in its worker slot instead, woken the moment the first one settles.
//
// The handler's own asynq.RevokeTask releases the job (no cooldown) and
// reaches asynq as it is; asynq.SkipRetry is recorded as a failure of the
// job (classified as usual) and still archives the task.
//
// asynq works on a Redis Cluster (asynq.RedisClusterClientOpt) and so does
// the gate; the tests run both on a real 3-master cluster.
//
// The middleware is safe for concurrent use; it keeps no state of its own.
package gateasynq
