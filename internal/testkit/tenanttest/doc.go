// Package tenanttest is the one test of the tenant label's bound, which
// gate/gateprom and gate/gateotel each keep a copy of: gateotel is its own
// module and reaches the root module through its public API only, so the
// two cannot share a package. Bound runs the same cases against either
// copy: the label off by default, at most max values then other, no value
// that is not UTF-8, the bound held under concurrent calls.
//
// It is a test helper: nothing outside tests imports it.
package tenanttest
