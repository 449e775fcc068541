// Package keyspace is the gate's Redis key layout, shared by package gate,
// which writes the keys, and the retrygate CLI, which finds and reads them.
//
// A job is one key; an upstream (a gate's Upstream or Fallbacks) has its own
// hash tag, so jobs spread over a cluster and an upstream's keys share its
// slot.
//
//	<prefix>:{<job>}:job                          the job's state, attempts, fence (gate/internal/store)
//	<prefix>:{<job>}:done                         its last success's token and fence, for seconds after it
//	<prefix>:upstream:{<upstream>}                an upstream's cooldown, pause or probe
//	<prefix>:upstream:{<upstream>}:fails          sliding window of its 5xx failures
//	<prefix>:upstream:{<upstream>}:wave:<reason>  distinct jobs failing permanently with reason
//	<prefix>:upstream:{<upstream>}:unreachable    distinct jobs whose calls could not reach its address
//	<prefix>:upstream:{<upstream>}:budget         the provider's last reported rate limits
//	<prefix>:upstream:{<upstream>}:calls          calls admitted by that budget, not yet settled
//	<prefix>:upstream:{<upstream>}:line           callers waiting for a turn, in order (gate/internal/line)
//	<prefix>:upstream:{<upstream>}:line:owners    the processes that wait, by the end of their lease
//	<prefix>:upstream:{<upstream>}:line:owners:<owner>  one process's places
//	<prefix>:upstream:{<upstream>}:line:meta      the line's sequence, process tokens and fair-share tags
//	<prefix>:upstream:{<upstream>}:line:grant:<owner>  turns given to one process's callers, not yet collected
//
// Changes of a job's or an upstream's key are published (package gate's
// scripts) on the pub/sub channel of the same name.
//
// A job or upstream name made only of safe characters appears as is, so operators
// can read keys; anything else (braces, spaces, '~', control bytes, invalid
// UTF-8) is written as '~' + base64url, which keeps the encoding injective.
package keyspace
