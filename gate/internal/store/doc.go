// Package store is the gate's Redis: every command the gate sends, every
// Lua script with its argument order, every reply's decoding, the values
// kept in Redis (their codec) and how commands reach the node that holds a
// key (routing, a cluster's moved slots, a pinned connection for WAIT).
// Nothing above it sees an argument order, a reply shape or a value's
// bytes: package gate and its upstream breakers speak in jobs, upstreams,
// settlements and replies decoded into Go values.
//
// Commands are queued on a Trip, which sends them in one round trip: one
// command straight to the client, several in a pipeline (on a cluster,
// go-redis sends each node its part in parallel). Each queued operation
// returns a Reply that decodes its command once the trip is sent.
//
// Topology decides how a command is sent, never which script runs: the
// same scripts run on one node and on a cluster, published with PUBLISH or
// SPUBLISH.
//
// A Store is safe for concurrent use; a Trip is not.
package store
