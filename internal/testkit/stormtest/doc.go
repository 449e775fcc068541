// Package stormtest holds what the queue adapters' storm tests share
// (gate/gateasynq and gate/gateriver): a provider that answers every call
// 429 with a retry hint, the model call over HTTP a worker makes, the
// worker processes themselves (the test binary run again), and the check
// that a storm made at most one upstream call per upstream cooldown.
//
// It is a test helper: nothing outside tests imports it.
package stormtest
