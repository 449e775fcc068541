// Package gate is a leaky lock on Redis that stops LLM retry storms.
//
// A Gate guards jobs (one expensive call each: evaluate a document, run an
// agent step) identified by a job key. Do runs a job's function under a
// per-job lock and, unlike a lock released in a finally, releases it only on
// success:
//
//	Ready ──Acquire──▶ Running ──success──▶ Ready (or Done for DoneTTL)
//	                      │
//	                      ├─transient (the job's)──▶ CoolingDown ──TTL ends──▶ Ready
//	                      │                 (attempt n waits Cooldown·Factor^(n-1) ± Jitter,
//	                      │                  or the server's hint when longer, ≤ MaxCooldown)
//	                      ├─provider-wide──▶ CoolingDown for the provider's hint (≥ 1s; none:
//	                      │                  ScopePolicy.Cooldown with a Scope, else Cooldown);
//	                      │                  no attempt counted, never Failed
//	                      ├─permanent or MaxAttempts reached──▶ Failed ──FailedTTL or Reset──▶ Ready
//	                      ├─permanent, in a wave of its scope──▶ CoolingDown (no attempt counted)
//	                      ├─systemic──▶ CoolingDown (no attempt counted, never Failed)
//	                      └─caller cancelled──▶ Ready (or CanceledCooldown; no attempt counted)
//
// The TTL is the cooldown: after a transient failure the lock is turned into
// a cooldown mark that expires by itself, so retries during the cooldown are
// refused with a *BlockedError (errors.Is ErrCoolingDown) that says how long
// to wait (RetryAfter), without calling the model. Failures are classified by
// Options.Classify (default classify.Default); see package classify.
//
// # Guarantees
//
//   - Acquire, a refusal and Status are one Redis round trip each (one Lua
//     script: no read-then-write race); a successful Do is two (acquire and
//     release); concurrent calls of one job in one process make one round
//     trip and the others are refused with ErrInFlight in-process. A retry
//     of a job this Gate was refused by (cooling down or failed) is
//     confirmed with a plain GET of the lock: a cooldown's lock value is
//     never written twice (it carries the failed lease's fence), so the
//     same value is the same refusal, with the time left by the local
//     clock; anything else (the cooldown ended, a reset, a new failure)
//     runs the script. The Gate remembers at most 4096 such jobs.
//   - A failure never leads to an immediate free retry: the outcome is
//     written on a context detached from the caller's (bounded by
//     Options.Timeout). If it cannot be written (Redis unreachable, or
//     full and refusing writes), the process that ran the job refuses it
//     in-process for the intended cooldown (an EventWarning with Reason
//     WarnSettleUnwritten), and elsewhere the lease's own TTL is the
//     cooldown.
//   - FailOpen applies only when Redis cannot be reached (ErrUnavailable).
//     A Redis that answers with an error (ErrRedisRefused: NOPERM, OOM,
//     READONLY...) always fails closed.
//   - The lease is renewed every Lease/3 while fn runs (no goroutine for
//     calls shorter than that). It is lost on a "not owned" reply, or when
//     a renewal fails after the lock must have expired by the local clock;
//     fn's context is then cancelled with cause ErrLeaseLost and the settle
//     is skipped (unless Options.ContinueOnLeaseLost).
//   - Settles compare the lock's random token: a stale owner never releases
//     or overwrites a newer owner's lock (ErrNotOwned).
//   - Fence tokens strictly increase per job: max(Redis TIME in µs, last+1).
//     They keep increasing after the job's keys expired, and across a
//     failover that lost the last write as long as the new primary's clock
//     is not behind the old one's.
//   - Every key has a TTL: lock ≤ max(Lease, MaxCooldown, FailedTTL,
//     DoneTTL); the meta hash (attempts, last fence) at most its lock's
//     TTL plus AttemptsTTL, and never less than the lock's while a lease
//     runs. Redis memory stays bounded.
//
// # Limits
//
// Redis replication is asynchronous: a failover can lose a lock or a
// cooldown written just before it, so two processes may briefly both run a
// job. This is why Lease.Fence exists: a store that records the highest
// fence per job and rejects writes carrying a lower one keeps the stale
// writer's result out. A Redis whose maxmemory-policy evicts keys with a TTL
// (volatile-*, allkeys-*) can end cooldowns early; Gate.Check warns about it.
//
// # Waiting for a running job
//
// By default a job running elsewhere is refused at once (ErrInFlight).
// With Options.Wait, or per call with AcquireWait, the caller waits for
// the running lease to settle and then runs the job if it is free, or gets
// the refusal the settle left (ErrDone, ErrCoolingDown with the cooldown's
// true time left, ErrFailed). The wait is woken by Redis pub/sub, not by
// polling: every script that changes a job's or scope's state publishes
// on the channel named as that key (PUBLISH on one node, SPUBLISH on a
// cluster so the channel lives in the key's slot), inside the script, so a
// call nobody waits for pays one publish. A waiter subscribes before it
// reads the state again, so a settle in between is never missed; a lease
// that expires without a settle publishes nothing, so each step of a wait
// ends at the lease's time left. Waiters and watchers (Watch) of one job
// in one Gate share one subscription, over one connection per Redis
// server, open while someone waits and briefly after. When a job's
// cluster slot moves to another master, Redis drops the subscription; the
// waiters and watchers read again and subscribe on the new master, so a
// settle after the move is pushed as before (TestWaitAcrossSlotMigration).
// Where subscribing fails (the client cannot, an ACL forbids channels, the
// connection broke, the client's slot map has not followed a moved slot
// yet) waits poll with backoff, up to once a second, and the Gate sends an
// EventWarning with Reason WarnWaitPolling, at most once a minute.
//
// # Upstream scope
//
// With Options.Scope set, provider-wide failures (429 rate limit, 503/529
// overload, repeated 5xx) cool the whole upstream and provider-wide
// systemic ones (quota, credit balance, credentials) pause it: every job of the scope is refused with
// ErrUpstreamCooling without calling the model. On a single node the scope is
// read by the acquire script itself; on a cluster it is read in parallel,
// so once the scope cooldown is recorded, no acquire that starts afterwards
// runs (only acquires already in flight, at most one round trip old, may).
// When the cooldown or pause ends, one call across all processes probes
// the upstream while the others stay refused: if it gets through the scope
// opens, if it fails provider-wide again the scope cools again (escalating
// by BackoffFactor without a hint). Every scope cooldown is at most
// MaxCooldown. ScopePolicy.PermanentWave distinct jobs failing with one
// permanent reason pause the scope for that reason too, and from then on
// its jobs cool instead of being marked Failed (WarnPermanentWave).
// A process that has seen the scope cooling reads it before acquiring until
// that cooldown ends, so its refusals are one round trip and write nothing.
//
// # Keys
//
// Keys are <Prefix>:{<job>}:lock and <Prefix>:{<job>}:meta (changes of the
// lock, and of the scope key, are published on a channel of the same name;
// channels are not keys and hold nothing); a job key with
// characters outside [A-Za-z0-9-_.:/@+=,|#] is stored base64url-encoded
// behind '~', so user input can neither break the hash tag nor collide with
// another job. Job keys must be 1 to MaxJobLen bytes.
//
// A Gate is safe for concurrent use by many goroutines. Its zero value is
// not usable: create it with New.
package gate
