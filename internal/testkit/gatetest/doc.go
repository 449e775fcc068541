// Package gatetest holds test helpers for code built on the gate: New, a
// gate per test with its own key prefix; Flaky, a gate.Client wrapper that
// injects Redis faults (fail, hang); Events, an observer that keeps the
// events of the kinds asked for; and the budget's helpers: OpenAIRequests,
// Report (a call whose response reported a budget) and Hold (calls in
// flight). Test-only.
package gatetest
