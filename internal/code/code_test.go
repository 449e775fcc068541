package code

import (
	"strings"
	"testing"
)

func TestCodes(t *testing.T) {
	for _, tt := range []struct {
		s                string
		reason, evidence bool
	}{
		{"rate_limited", true, true},
		{"upstream_5xx", true, true},
		{"v1.2-x", true, true},
		{"code:context_length_exceeded", false, true},
		{"code:API_KEY_INVALID", false, true},
		{"status=429/x", false, true},
		{"", false, false},
		{strings.Repeat("a", MaxLen), true, true},
		{strings.Repeat("a", MaxLen+1), false, false},
		{"Rate", false, true},
		{"a b", false, false},
		{"a\x00", false, false},
		{"a\nb", false, false},
		{"\x1b[31m", false, false},
		{"é", false, false},
		{"a;b", false, false},
		// Verdict.Evidence's forms (classify)
		{"code:insufficient_quota", false, true},
		{"rule:1", false, true},
		{"code:azAZ09", false, true}, // every end of every range
		{"header:x-should-retry", false, true},
		{"errorinfo:API_KEY_INVALID", false, true},
		{"message:two words", false, false},
		{"message:quoted\"", false, false},
		{"message:余额", false, false},
		{"code:\n", false, false},
	} {
		if got := Reason(tt.s); got != tt.reason {
			t.Errorf("Reason(%q) = %v, want %v", tt.s, got, tt.reason)
		}
		if got := Evidence(tt.s); got != tt.evidence {
			t.Errorf("Evidence(%q) = %v, want %v", tt.s, got, tt.evidence)
		}
	}
}
