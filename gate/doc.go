// Package gate is a leaky lock on Redis that stops LLM retry storms.
//
// A Gate guards jobs (one expensive call each: evaluate a document, run an
// agent step) identified by a job key. Do runs a job's function under a
// per-job lock and, unlike a lock released in a finally, releases it only on
// success. What a run's end does is one decision (decide.go), the state
// diagram below; each arrow is a row of its table test:
//
//	Ready ──Acquire──▶ Running ──success──▶ Ready, or Done for DoneTTL (a waiter for that run: ErrDone)
//	                      │
//	                      ├─transient, the job's──────────▶ CoolingDown, attempt counted: attempt n waits
//	                      │                                 Cooldown·BackoffFactor^(n-1) ± Jitter, or the hint when longer
//	                      ├─permanent, with proof─────────▶ Failed ──FailedTTL or Reset──▶ Ready
//	                      ├─permanent, suspect, first────▶ CoolingDown, attempt counted, as a transient one
//	                      ├─permanent, suspect, again────▶ Failed (the same rejection on the next attempt)
//	                      ├─MaxAttempts reached──────────▶ Failed
//	                      ├─permanent, a wave upstream───▶ CoolingDown for max(hint, Cooldown), no attempt counted
//	                      ├─provider-wide, transient─────▶ CoolingDown for the hint (≥ 1 s; none: ScopePolicy.Cooldown,
//	                      │                                 or Cooldown without a Scope), no attempt counted; when
//	                      │                                 the run's responses said when one call fits, that
//	                      ├─provider-wide, systemic──────▶ CoolingDown for max(hint, Cooldown), no attempt counted
//	                      │      with Fallbacks, either: CoolingDown for FallbackCooldown (0: Ready), its next call
//	                      │      runs on the next open upstream
//	                      ├─systemic, the job's──────────▶ CoolingDown for max(hint, Cooldown), no attempt counted
//	                      ├─released (Release)───────────▶ Ready, attempts kept
//	                      └─caller cancelled─────────────▶ Ready, or CoolingDown for CanceledCooldown; no attempt counted
//
// Every cooldown is at most MaxCooldown; no failure is an immediate free
// retry. The upstream the run used (its breaker) changes with it:
//
//	Open ──provider-wide transient──▶ Cooling for the hint, else ScopePolicy.Cooldown (when the run's
//	                                  responses said when one call fits: that)
//	Open ──its budget would keep less than the reserve──▶ the call refused until one fits (nothing written)
//	Open ──provider-wide systemic───▶ Paused for ScopePolicy.PauseTTL
//	Open ──a wave of one permanent reason (ScopePolicy.PermanentWave jobs)──▶ Paused for the reason
//	Open ──more than ScopePolicy.AllowedFails other 5xx in FailWindow──▶ Cooling
//	Cooling, Paused ──wait over──▶ Probing: one call, the others refused
//	Probing ──the probe's call reached it──▶ Open
//	Probing ──provider-wide again──▶ Cooling or Paused, one level up (× BackoffFactor without a hint)
//	Probing ──released or cancelled──▶ the next call probes
//
// A failure is classified by Options.Classify (default classify.Default,
// whose rule is "Failed only on proof": see package classify).
//
// A refused call gets a *BlockedError (errors.Is ErrCoolingDown, ErrFailed,
// ErrDone, ErrInFlight or ErrUpstreamCooling) that says how long to wait
// (RetryAfter), without calling the model.
//
// # Guarantees
//
//   - Round trips: an acquire, a refusal and Status are one each; a
//     successful or failed Do is two (acquire, settle). An acquire is
//     native commands on the job's node, in one pipeline: PTTL, SET NX
//     GET (a free job is taken, a busy one refused by what it holds), and
//     TIME (the fence, and the clock every value is judged by); with
//     upstreams, a GET of each and its budget's admission (a script) in
//     the same round trip. A second trip comes
//     only for a job whose key holds a finished state with history (its
//     attempt count: taken over by a script), to claim an upstream's probe
//     when its wait just ended, or to give the job back (and a call it
//     reserved) when every upstream refuses, by its budget or by its
//     breaker when this process did not know it yet; while it knows a
//     breaker refuses, an acquire only reads the upstreams (one trip,
//     nothing written).
//     Concurrent calls of one job in one process make one round trip and
//     the others are refused with ErrInFlight in-process.
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
//   - The lease is renewed within a second of the start and then every
//     Lease/3 while fn runs (no goroutine for calls shorter than that). It
//     is lost on a "not owned" reply, or when a renewal fails after the
//     lease must have expired by the local clock; fn's context is then
//     cancelled with cause ErrLeaseLost and the settle is skipped (unless
//     Options.ContinueOnLeaseLost).
//   - Settles and renewals compare the lease's random token: a stale owner
//     never releases or overwrites a newer owner's state (ErrNotOwned).
//   - Fence tokens strictly increase per job: Redis's TIME in µs on the
//     job's node, and never below the last fence the job's key holds. They
//     keep increasing after the job's key expired, and across a failover
//     that lost the last write as long as the new primary's clock is not
//     behind the old one's. Status shows a running lease's fence once its
//     first renewal recorded it (within a second; a lease taken on a free
//     key is a plain SET NX, which cannot hold the fence TIME gives it in
//     the same round trip).
//   - A waiter (Options.Wait, AcquireWait) never runs a job twice: woken by
//     the success of the run it waited for, it gets ErrDone whatever
//     DoneTTL is.
//   - Every key has a TTL: a job's key at most max(Lease, MaxCooldown,
//     FailedTTL, DoneTTL) plus AttemptsTTL; its done key 10 s; an
//     upstream's keys its cooldown or pause plus a lease, or its windows.
//     A cooling job costs one key: 168 bytes of Redis memory for a 31-byte
//     job key (internal/proof's TestSoak measures it, and fails above 300).
//     Redis memory stays bounded.
//
// # Limits
//
// Redis replication is asynchronous: a failover can lose a lock or a
// cooldown written just before it, so two processes may briefly both run a
// job. This is why Lease.Fence exists: a store that records the highest
// fence per job and rejects writes carrying a lower one keeps the stale
// writer's result out. A Redis whose maxmemory-policy evicts keys with a TTL
// (volatile-*, allkeys-*) can end cooldowns early; Gate.Check warns about it.
// The acquire's SET NX GET needs Redis 7.0 or later. On a cluster the job's
// commands go to its master's client (ClusterClient.MasterForKey), since
// TIME has no key to route it by: hooks added with ClusterClient.AddHook do
// not see them, hooks added with OnNewNode do.
//
// # Waiting for a running job
//
// By default a job running elsewhere is refused at once (ErrInFlight), with
// an estimate of when its call ends: the 90th percentile of this Gate's
// last 64 call durations less the time the run has taken, at least a
// second and at most the lease's time left (which alone it is until 8
// calls were seen). With Options.Wait, or per call with AcquireWait, the
// caller waits for that run to settle and then gets what it left: ErrDone
// when it succeeded, ErrCoolingDown with its true time left or ErrFailed
// when it failed; it runs the job only if the run ended without an outcome
// (released, or its lease lost). A waiting call sends one refusal event,
// when its wait ends, however many steps it took.
//
// The wait is woken by Redis pub/sub, not by polling: every script that
// changes a job's or an upstream's state publishes on the channel named as
// that key (PUBLISH on one node, SPUBLISH on a cluster so the channel
// lives in the key's slot), inside the script, so a call nobody waits for
// pays one publish. A waiter subscribes before it reads the state again,
// so a settle in between is never missed; a lease that expires without a
// settle publishes nothing, so each step of a wait ends at the lease's
// time left. Waiters and watchers (Watch) of one job in one Gate share one
// subscription, over one connection per Redis server, open while someone
// waits and briefly after. When a job's cluster slot moves to another
// master, Redis drops the subscription; the waiters and watchers read
// again and subscribe on the new master (TestWaitAcrossSlotMigration).
// Where subscribing fails (the client cannot, an ACL forbids channels, the
// connection broke, the client's slot map has not followed a moved slot
// yet) waits poll with backoff, up to once a second, and the Gate sends an
// EventWarning with Reason WarnWaitPolling, at most once a minute.
//
// # Upstreams and fallbacks
//
// With Options.Scope set, provider-wide failures (429 rate limit, 503/529
// overload, repeated 5xx) cool the upstream and provider-wide systemic ones
// (quota, credit balance, credentials) pause it: each upstream is a circuit
// breaker of its own (breaker.go), kept in Redis so that every process
// shares it, and every job of a refusing upstream is refused with
// ErrUpstreamCooling without calling the model. An upstream is read in the
// acquire's round trip, so an acquire that starts after its cooldown was
// recorded never runs (only acquires already in flight, at most one round
// trip old, may). When the cooldown or pause ends, one call across all
// processes probes the upstream while the others stay refused: if its call
// reaches the upstream it opens; if it fails provider-wide again it cools
// again one level up (× BackoffFactor without a hint); if the probe is
// released or dies, the next call probes. Every upstream cooldown is at
// most MaxCooldown. ScopePolicy.PermanentWave distinct jobs failing with
// one permanent reason pause the upstream for that reason too, and from
// then on its jobs cool instead of being marked Failed (WarnPermanentWave).
//
// Options.Fallbacks adds upstreams tried in order after Scope. The job
// keeps one lock whichever upstream runs it: each acquire picks the first
// upstream that is open (or whose probe it may claim), Lease.Scope names
// it, and fn calls that one. A provider-wide failure cools or pauses the
// upstream it came from only, and the job's next call runs at once on the
// next open one (Options.FallbackCooldown); never two upstream calls in one
// Do. A job refused because every upstream refuses gets ErrUpstreamCooling
// with BlockedError.Upstreams naming each, and the wait until the soonest
// reopens. An acquire with N upstreams is still one round trip (N GETs in
// its pipeline).
//
// # Keys
//
// A job is one key, <Prefix>:{<job>}:job, with a done key beside it
// (<Prefix>:{<job>}:done) for seconds after a success; an upstream is
// <Prefix>:scope:{<scope>} with its windows (internal/keyspace, value.go).
// Changes are published on the channel of the key's name (channels are not
// keys and hold nothing). A job key with characters outside
// [A-Za-z0-9-_.:/@+=,|#] is stored base64url-encoded behind '~', so user
// input can neither break the hash tag nor collide with another job. Job
// keys must be 1 to MaxJobLen bytes. Keys of gates before this layout
// (<Prefix>:{<job>}:lock and :meta) are not read: stop the old version, or
// give the new one another Prefix.
//
// A Gate is safe for concurrent use by many goroutines. Its zero value is
// not usable: create it with New.
package gate
