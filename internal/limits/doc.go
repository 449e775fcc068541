// Package limits holds the bounds gate.New and the gate's calls check,
// for the packages of this module that check them first (httpmw answers
// 400 for a job key over MaxJobLen before it calls the gate; the CLI's
// calibrate raises a suggested lease to MinLease; httpmw and the gate
// refuse a tenant CheckTenant refuses). Constants and one pure check:
// safe for concurrent use, no zero value to speak of.
package limits
