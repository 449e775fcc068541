// Package proof holds the tests that back retrygate's guarantees with
// evidence: fault injection on real Redis, invariants, a soak and a
// linearizability check. It is test-only; FenceStore is the fake storage
// layer the tests use to show what fencing tokens buy.
package proof
