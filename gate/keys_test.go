package gate

import "testing"

func TestStateOf(t *testing.T) {
	tests := []struct {
		v        string
		st       State
		attempts int
		reason   string
	}{
		{"r:abc", Running, -1, ""},
		{"c:3:rate_limited", CoolingDown, 3, "rate_limited"},
		{"f:1:context_length_exceeded", Failed, 1, "context_length_exceeded"},
		{"d:", Done, -1, ""},
		{"c:rate_limited", CoolingDown, -1, "rate_limited"}, // written before values carried attempts
		{"c:x:y", CoolingDown, -1, "x:y"},
		{"garbage", Running, -1, ""}, // foreign value: held, never overwritten
		{"", Running, -1, ""},
	}
	for _, tt := range tests {
		st, a, r := stateOf(tt.v)
		if st != tt.st || a != tt.attempts || r != tt.reason {
			t.Errorf("stateOf(%q) = %v %d %q, want %v %d %q", tt.v, st, a, r, tt.st, tt.attempts, tt.reason)
		}
	}
}
