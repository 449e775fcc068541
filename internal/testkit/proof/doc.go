// Package proof holds the tests that back retrygate's guarantees with
// evidence on real Redis: fault injection, invariants checked in every
// scenario and in a randomized soak, and a linearizability check with
// porcupine. The package itself only exports FenceStore, the fake storage
// layer that shows what fencing tokens buy; everything else is in its
// _test.go files. Tests need redis-server (and redis-cli for the cluster)
// and are skipped without them, unless RETRYGATE_REQUIRE_REDIS=1.
//
// # Scenarios (faults_test.go, cluster_test.go)
//
// Each runs against its own redis-server, mostly through
// internal/testkit/faultproxy, in well under two seconds:
//
//   - Latency above the lease while fn runs: the lease is fenced within
//     Lease (renewals keep failing until the lock must have expired) plus one renewal timeout
//     (min(Lease/3, Options.Redis.Timeout)) of the fault's onset: fn's context is
//     cancelled with cause gate.ErrLeaseLost, and after a second owner
//     acquired the expired job, the first one's settle leaves the new
//     lock and fence untouched. With Lease 150ms the bound is 200ms;
//     measured about 200ms. This needs a client whose commands are bounded:
//     redis.Options{ContextTimeoutEnabled: true} so the renewal's deadline
//     reaches the socket.
//   - Blackhole at acquire (the server accepts and never answers): with
//     ReadTimeout 100ms and MaxRetries 1, Do fails closed with
//     gate.ErrUnavailable after about 250ms, bounded by
//     ReadTimeout×(MaxRetries+1) + MaxRetryBackoff (512ms by default)
//     = 712ms, and never calls fn. With FailOpen fn runs once, ungated
//     (Gated false, Fence 0). When the caller's context deadline comes
//     first, Acquire returns an error matching both the deadline and
//     ErrUnavailable, and FailOpen does not apply: it is too late to run.
//   - redis-server killed and restarted empty mid-call: the lock is gone,
//     so a second owner may run at once; it gets a higher fence (fences
//     come from Redis TIME, the lost keys do not matter), the first owner's
//     write is rejected by the FenceStore and its settle writes nothing
//     (ErrLeaseLost or ErrNotOwned).
//   - A worker paused past its lease with its renewals blackholed: another
//     worker acquires, the paused one's write is rejected and its settle
//     writes nothing: ErrLeaseLost by default (no Redis call), ErrNotOwned
//     with ContinueOnLeaseLost (the settle reaches Redis and finds another
//     owner; the attempt count is not touched).
//   - Redis Cluster (3 masters, 1 replica each): a coordinated CLUSTER
//     FAILOVER and a CLUSTER FAILOVER TAKEOVER under load; every job's
//     fences keep increasing. Options.Redis.WaitReplicas 1 acquires; 2 on a
//     1-replica master fails closed (ErrUnavailable)
//     after about WaitTimeout and leaves the job Ready. On one machine the
//     WAIT adds about 0.2ms to a successful Do's p50 (0.2ms → 0.4ms).
//
// # Invariants (helpers_test.go: history.check)
//
// Every execution of fn is recorded as [Do called, fn start, fn end,
// fence, store write, Do's error] and checked:
//
//  1. Executions of one job that overlap in time have distinct fences; the
//     newer one started at least Lease after the older one's acquire was
//     sent (it could only acquire after the older lock expired), and the
//     older one's writes after the newer one's were rejected by the
//     FenceStore. Executions that do not overlap have fences in start
//     order.
//  2. fn never starts while its job cools down or is marked failed: after
//     a settle that recorded a cooldown of r (or a failed mark), the next
//     execution starts at least r (FailedTTL) after the failed fn returned,
//     unless an operator Reset ran in between. Inside fn, Status never
//     shows the job cooling or failed under fn's own fence.
//  3. A transient failure's recorded cooldown is at least
//     Cooldown×(1−Jitter), so the next call waits at least that.
//     Failures whose settle could not be recorded (Redis unreachable) are
//     counted, not checked: the lock's remaining TTL is their cooldown.
//  4. After the soak, every key under the gate's prefix has a TTL (SCAN +
//     PTTL), and the Redis memory of one cooling job is reported: 272
//     bytes (MEMORY USAGE of lock and meta, redis 7.0, default prefix, a
//     31-byte job key), above the 200-byte target. Each key costs a
//     24-byte dictionary entry and a 64-byte allocation for its 49-byte
//     name before any value: 176 of the 272. The test fails above 400.
//
// TestInvariantChecksCatchViolations feeds the checks bad histories, so
// they can fail. The soak (TestSoak) runs 8 workers on 4 gates for 5s
// (RETRYGATE_SOAK overrides, -short shortens) through a proxy that adds
// random latency, slow periods that time renewals out, blackholes and
// connection resets.
//
// # A success paid for once (paused_soak_test.go)
//
// TestSoakPausedRedis freezes redis-server (SIGSTOP, then SIGCONT: a
// stalled host) past the lease every few hundred ms, while 4 gates and a
// fifth in a process of its own call a moving set of jobs that all
// succeed, some in flight when a pause starts (DoneTTL an hour; 5s, or
// RETRYGATE_SOAK). After a run completed its work, no run of its job
// starts in the same process, nor in another with an acquire sent after
// the success reached Redis, and every job that succeeded ends Done;
// runs in another process acquired before the success reached Redis are
// counted, not failed: Redis served them after the lease ended by its
// clock, and no client can order them after the holder's write (see the
// test's doc, and docs/guarantees.md). TestPausedChecksCatchReruns feeds
// that check bad histories.
//
// # Linearizability (linearizability/, a module of its own: porcupine is
// no requirement of the root module)
//
// 8 clients, each with its own gate and connection (a separate process),
// issue random acquire, succeed, release, fail (transient, permanent),
// status and reset operations on two jobs through a proxy injecting 0–3ms
// of varying latency; porcupine checks the history against a sequential
// model of one job (Ready, Running(fence), CoolingDown, Failed, Done;
// attempts; last fence), partitioned by job, within a 30s timeout. A
// history that is not linearizable is written out with
// porcupine.Visualize to $RETRYGATE_ARTIFACTS (or the temp dir) and the
// test prints its path. TestLinearizabilityCheckRejects shows the model
// rejects impossible histories.
//
// Expiry is left out of the model: the run uses 10-minute leases,
// cooldowns and marks, and Reset returns a job to Ready. Expiry happens
// on Redis's clock, which the history's client-side timestamps only bound
// to within a round trip, so a model with TTLs would be nondeterministic
// about every operation near a deadline and no stronger for it; expiry is
// tested instead, against real time, by the scenarios and invariants
// above. Clients do not share a gate because in-process coalescing
// answers a duplicate with ErrInFlight before Redis is asked (by design:
// the duplicate is in flight here), which is not a state of the job in
// Redis.
//
// # What Redis replication can still lose
//
// Redis replicates asynchronously. A lock, cooldown or failed mark written
// to a master just before it fails (or is taken over with CLUSTER FAILOVER
// TAKEOVER, or a Sentinel failover) may never reach the replica that
// replaces it. Then:
//
//   - a lost lock lets a second process run the job while the first still
//     runs: two concurrent calls of one job;
//   - a lost cooldown or failed mark lets one retry through early;
//   - a lost meta key resets the attempt count (backoff restarts).
//
// Fencing tokens stay monotonic across such a failover, because a fence
// is max(Redis TIME in µs, last fence + 1): the new master's clock carries
// it forward, unless that clock is behind the old master's by more than
// the time between the two acquires. A store that keeps the highest fence
// per job and rejects lower ones (as FenceStore does) keeps the stale
// writer's result out. Options.Redis.WaitReplicas narrows the window: the
// acquire waits (Redis WAIT) until that many replicas acknowledged the
// lock and fails closed otherwise. It does not make Redis consistent: WAIT
// does not stop a failover from electing a replica that missed the write,
// and cooldowns are not waited for.
//
// A coordinated CLUSTER FAILOVER (no TAKEOVER) waits for the replica to
// catch up before switching, so it should lose nothing; TestCluster checks
// cooldowns strictly across it and excuses calls after a TAKEOVER on the
// jobs of the taken-over master. Across a failover a Status read may also
// be served behind the latest acquire (seen once in many runs: a fence
// 33ms old); the test counts such reads instead of failing on them.
package proof
