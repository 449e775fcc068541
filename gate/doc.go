// Package gate is a leaky lock on Redis that stops LLM retry storms.
//
// A Gate guards jobs, each identified by a job key. A job is one expensive
// call: evaluate a document, run an agent step. Do runs a job's function
// under a per-job lock. Unlike a lock released in a finally, it releases
// the lock only on success. A failure leaves the job cooling down, or
// failed. Every retry meanwhile is refused without calling the model.
//
// What a run's end does is one decision (decide.go). This diagram, drawn
// here alone, shows it. Each arrow is a row of its table test (TestDecide).
//
//	Ready ──Acquire──▶ Running ──success──▶ Ready, or Done for Retention.Done (a waiter for that run: ErrDone)
//	                      ├─transient, the job's──────▶ CoolingDown, attempt counted: attempt n waits
//	                      │                             Cooldown·Backoff.Factor^(n-1) ± Jitter, or the hint when longer
//	                      ├─permanent, with proof─────▶ Failed ──Retention.Failed or Reset──▶ Ready
//	                      ├─permanent, suspect, first─▶ CoolingDown, attempt counted, as a transient one
//	                      ├─permanent, suspect, again─▶ Failed (the same rejection on the next attempt)
//	                      ├─MaxAttempts reached───────▶ Failed (default 8; negative: unlimited)
//	                      ├─permanent, a wave─────────▶ CoolingDown for max(hint, Cooldown), no attempt counted
//	                      ├─provider-wide, transient──▶ CoolingDown for the hint (≥ 1 s; none: UpstreamPolicy.Cooldown,
//	                      │                             or Cooldown with upstreams off), no attempt counted
//	                      ├─provider-wide, systemic───▶ CoolingDown for the upstream's pause (with upstreams off:
//	                      │                             max(hint, Cooldown)), no attempt counted
//	                      │   with Fallbacks, either: CoolingDown for UpstreamPolicy.FallbackCooldown (0: Ready);
//	                      │   its next call runs on the next ready upstream
//	                      ├─systemic, the job's───────▶ CoolingDown for max(hint, Cooldown), no attempt counted
//	                      ├─released (Release)────────▶ Ready, attempts kept
//	                      └─caller cancelled──────────▶ Ready, or CoolingDown for Backoff.Canceled; no attempt counted
//
// Every cooldown is at most Backoff.Max. No failure is an immediate free
// retry. Provider-wide and systemic failures never count an attempt.
//
// The provider the job calls is its upstream (Options.Upstream). When not
// set, it is DefaultUpstream, unless UpstreamPolicy.Off. An upstream has a
// circuit breaker of its own. Every process shares it through Redis.
//
//	Ready ──provider-wide transient──▶ Cooling for the hint, else UpstreamPolicy.Cooldown
//	                                   (after a 429, until one call fits as the responses said)
//	Ready ──provider-wide systemic───▶ Paused for UpstreamPolicy.Cooldown (the hint when longer)
//	Ready ──a wave of one permanent reason (PermanentWave jobs)──▶ Paused for PauseTTL
//	Ready ──more than AllowedFails other 5xx in FailWindow──▶ Cooling
//	Ready ──UnreachableJobs distinct jobs that cannot reach its address (DNS, refused,
//	        unreachable, TLS, URL) in FailWindow──▶ Cooling for UpstreamPolicy.Cooldown
//	Ready ──its budget would keep less than a reserve──▶ the call refused until its turn
//	        (the upstream unchanged)
//	Ready, any ──an operator's PauseUpstream──▶ Paused (ReasonOperator) for its time, or until
//	        ResumeUpstream; then Ready, no probe
//	Cooling, Paused ──wait over──▶ Probing: one call, the others refused
//	Probing ──the probe's call reached it──▶ Ready
//	Probing ──provider-wide again, or its address failed──▶ Cooling or Paused, one level up
//	        (× Backoff.Factor without a hint; a pause at most PauseTTL)
//	Probing ──released or cancelled──▶ the next call probes
//
// Options.UpstreamPolicy.Fallbacks adds upstreams, tried in order. A job
// keeps one lock whichever upstream runs it. Lease.Upstream names the one
// to call. Options.Classify classifies a failure. Its default,
// classify.Default, fails a job "only on proof".
//
// A refusal is a *BlockedError that says how long to wait. It matches
// ErrCoolingDown, ErrFailed, ErrDone, ErrInFlight or ErrUpstreamCooling
// with errors.Is. A failed call is a *CallError that says what was
// recorded.
//
// # Guarantees
//
// The long form, with the test behind each claim, is docs/guarantees.md.
//
//   - A failure never leads to an immediate free retry. The outcome is
//     written detached from the caller. If Redis cannot take it, this
//     process refuses the job for the intended cooldown. Elsewhere the
//     lease's TTL is the cooldown.
//   - A success is not paid for twice because Redis was briefly away. A
//     done mark (Retention.Done) that Redis cannot take is kept in this
//     process. It is written again until Redis takes it, never over a
//     newer owner.
//   - A refusal needs no write. A Redis that refuses writes (OOM when
//     full, READONLY) still refuses a cooling, failed, done or running job
//     with its state and wait. Only a free job fails closed.
//   - One call at a time per job. Calls of one job in one process are
//     merged: one round trip, the others refused in-process.
//   - A stale owner never touches a newer owner's state. Renewals and
//     settles compare the lease's token. A lost lease cancels fn's context
//     with cause ErrLeaseLost.
//   - Fence tokens (Lease.Fence) strictly increase per job, across expiry
//     and a restart without persistence.
//   - A waiter (Options.Wait, AcquireWait) never runs a job twice. Pub/sub
//     wakes it when the run it waits for settles. It gets what that run
//     left.
//   - A duplicate refused at once is told when the running call should
//     end, in any process. The gate's call durations are shared in Redis.
//   - Round trips: an acquire, a refusal and Status are one each. A
//     successful or failed Do is two. The acquire's round trip reads the
//     upstream and asks its budget. The settle's writes the budget.
//   - Redis.FailOpen applies only when Redis cannot be reached. A Redis
//     that answers with an error (ErrRedisRefused) always fails closed.
//   - A caller that goes away is not an outage. With a cancelled or
//     expired context every call returns the context's error, never
//     ErrUnavailable.
//   - Every key has a TTL: Redis memory stays bounded.
//
// # Limits
//
//   - Redis replication is asynchronous. A failover can lose a lock or a
//     cooldown written just before it. Lease.Fence and Redis.WaitReplicas
//     exist for that.
//   - A maxmemory-policy that evicts keys with a TTL ends cooldowns early.
//     So does a restart of a Redis that persists nothing. Gate.Check warns
//     about both.
//   - The acquire needs Redis 7.0 or later.
//   - The lock needs a single master that runs scripts atomically. Check
//     warns about KeyDB's active replicas and about Dragonfly's and
//     Garnet's non-atomic scripts.
//
// # Layout
//
// The gate composes three parts, each behind a wall:
//   - internal/store: every Redis command, Lua script, reply and value,
//     and how a command reaches a key's node;
//   - internal/upstream: the breakers;
//   - internal/hub: the pub/sub subscriptions behind waits and watches.
//
// Keys are:
//   - <Prefix>:{<job>}:job, with a done key beside it;
//   - one key per upstream;
//   - <Prefix>:calls, the gate's last call durations.
//
// A job key with characters outside [A-Za-z0-9-_.:/@+=,|#] is stored
// base64url-encoded. So user input can neither break the hash tag nor
// collide with another job.
//
// # Zero value and concurrency
//
// The zero value of every Options field is its documented default. New
// validates the options once. A Gate's zero value is not usable. Create it
// with New, one per kind of job, and share it. A Gate and its Leases are
// safe for concurrent use by many goroutines.
package gate
