package limits

import "time"

const (
	// MinLease is the shortest valid gate.Options.Lease: renewal runs
	// every Lease/3.
	MinLease = 30 * time.Millisecond
	// MaxJobLen is the longest job key, in bytes.
	MaxJobLen = 1024
)
