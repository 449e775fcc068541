// Package store is the gate's Redis. It holds:
//   - every command the gate sends;
//   - every Lua script, with its argument order;
//   - every reply's decoding;
//   - the values kept in Redis (their codec);
//   - how commands reach the node that holds a key: routing, a cluster's
//     moved slots, a pinned connection for WAIT.
//
// Nothing above it sees an argument order, a reply shape or a value's
// bytes. Package gate and its upstream breakers speak in jobs, upstreams,
// settlements and replies decoded into Go values.
//
// Commands are queued on a Trip, which sends them in one round trip. One
// command goes straight to the client. Several go in a pipeline. On a
// cluster, go-redis sends each node its part in parallel. Each queued
// operation returns a Reply that decodes its command once the trip is
// sent. A trip's commands run in the order queued: a script goes as its
// source (EVAL) until the store has seen that server run it, then by its
// SHA. Only the trip that meets a server's lost scripts (NOSCRIPT) runs
// that script after the rest; the next trips send sources again.
//
// Topology decides how a command is sent, never which script runs. The
// same scripts run on one node and on a cluster. They publish with
// PUBLISH or SPUBLISH.
//
// A Store is safe for concurrent use; a Trip is not.
package store
