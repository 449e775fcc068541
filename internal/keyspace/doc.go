// Package keyspace is the gate's Redis key layout, shared by package gate,
// which writes the keys, and the retrygate CLI, which finds and reads them.
//
// A job is one key; an upstream (a gate's Scope or Fallbacks) has its own
// hash tag, so jobs spread over a cluster and an upstream's keys share its
// slot.
//
//	<prefix>:{<job>}:job                     the job's state, attempts, fence (gate/value.go)
//	<prefix>:{<job>}:done                    its last success's fence, for seconds after it
//	<prefix>:scope:{<scope>}                 an upstream's cooldown, pause or probe
//	<prefix>:scope:{<scope>}:fails           sliding window of its 5xx failures
//	<prefix>:scope:{<scope>}:wave:<reason>   distinct jobs failing permanently with reason
//
// Changes of a job's or an upstream's key are published (package gate's
// scripts) on the pub/sub channel of the same name.
//
// A job or scope made only of safe characters appears as is, so operators
// can read keys; anything else (braces, spaces, '~', control bytes, invalid
// UTF-8) is written as '~' + base64url, which keeps the encoding injective.
package keyspace
