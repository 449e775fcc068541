// Package linearizability checks with porcupine that the gate's job state
// machine is linearizable on real Redis: 8 clients run random acquires,
// settles, status reads and resets through a proxy of varying latency,
// and porcupine checks the history against a sequential model of the
// states (see internal/proof's doc). It is a module of its own so that
// porcupine, which only this test uses, is no requirement of the root
// module.
package linearizability
