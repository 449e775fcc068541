package code

import (
	"strings"
	"testing"
	"unicode/utf8"
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

func TestNote(t *testing.T) {
	for _, tc := range []struct{ in, exp string }{
		{"key rotation", "key rotation"},
		{"  key\r\nrotation\t ", "key rotation"},
		{"\x1b[31mred\x1b[0m", "[31mred [0m"},
		{"rtl\u202eevil", "rtl evil"},
		{"bad\xffutf8", "bad utf8"},
		{"a: b: c", "a: b: c"},
		{"", ""},
	} {
		if got := Note(tc.in); got != tc.exp {
			t.Errorf("Note(%q) = %q, want %q", tc.in, got, tc.exp)
		}
	}
	long := Note(strings.Repeat("é", MaxNote))
	if len(long) > MaxNote || !utf8.ValidString(long) || len(long) < MaxNote-1 {
		t.Errorf("a long note: %d bytes, valid %v", len(long), utf8.ValidString(long))
	}
}
