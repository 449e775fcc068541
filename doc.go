// Package retrygate is the module root of retrygate, a leaky lock on Redis
// that stops LLM retry storms. The code lives in its packages:
//
//   - gate: the lock itself (New, Do, Call, Acquire, Status, Reset, Check);
//   - classify: which failures deserve a cooldown, which are permanent, and
//     which are not the job's fault;
//   - httpmw: net/http (chi) middleware for retry endpoints, with
//     "retry available in X" for end users;
//   - gate/gateprom and gate/gateslog: Prometheus and slog observers;
//   - cmd/retrygate: the operator CLI.
//
// This package holds only the end-to-end tests across them (gate_test.go)
// and the check that the README's code comes from Example tests.
package retrygate
