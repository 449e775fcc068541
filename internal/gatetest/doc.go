// Package gatetest holds test helpers for code built on the gate: a gate
// per test with its own key prefix. Test-only.
package gatetest
