// Package upstream is the gate's circuit breaker per upstream. An
// upstream is the provider endpoint a job calls: gate.Options.Upstream
// and each of Fallbacks. The breaker is kept in Redis, so every process
// shares it. Its verbs are failsafe-go's CircuitBreaker's:
//   - judge a state read in the acquire's round trip (may a call run?);
//   - claim the probe once a wait is over;
//   - record a run's end: recover, give the probe back, cool, pause, or
//     count a 5xx;
//   - read or reset it, for operators.
//
// Each state is a type (states.go): ready, cooling, paused, probing, and
// foreign (a value no gate wrote). In failsafe-go's words, ready is
// closed, cooling and paused are open, and probing is half-open. The gate
// avoids "open", which to an operator would mean calls run.
//
// A gate without an upstream has one breaker that always permits (Free).
// It reads nothing and writes nothing. So the gate composes upstreams the
// same way with or without one.
//
// Go decides every transition (gate's decide, this package). A script
// judges only what must be atomic with its write: the one-node acquire
// and the probe's claim. They read a value as states.go does
// (store's lua/upstream_value.lua), and TestUpstreamScriptsAgree holds
// both to one table. docs/guarantees.md maps each rule.
//
// A breaker never touches a job's key. Its keys and scripts are behind
// package store. A Set is safe for concurrent use.
package upstream
