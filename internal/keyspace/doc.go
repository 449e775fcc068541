// Package keyspace is the gate's Redis key layout, shared by package gate,
// which writes the keys, and the retrygate CLI, which finds and reads them.
//
// Every key of a job shares the hash tag {<job>}, so the multi-key scripts
// stay in one cluster slot; scope keys have their own tag, so jobs spread
// over the cluster.
//
//	<prefix>:{<job>}:lock          state and TTL (running/cooling/failed/done)
//	<prefix>:{<job>}:meta          hash: a = attempts, f = last fence token
//	<prefix>:scope:{<scope>}       upstream cooldown or pause
//	<prefix>:scope:{<scope>}:fails sliding window of 5xx failures
//
// Changes of a lock or scope key are published (package gate's settle,
// reset and scope scripts) on the pub/sub channel of the same name.
//
// A job or scope made only of safe characters appears as is, so operators
// can read keys; anything else (braces, spaces, '~', control bytes, invalid
// UTF-8) is written as '~' + base64url, which keeps the encoding injective.
package keyspace
