// Package gatetest holds test helpers for code built on the gate: New, a
// gate per test with its own key prefix, and Flaky, a gate.Client wrapper that
// injects Redis faults (fail, hang). Test-only.
package gatetest
