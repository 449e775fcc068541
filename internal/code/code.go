package code

// MaxLen bounds a reason and an evidence, in bytes (classify.MaxEvidence).
const MaxLen = 64

// Reason reports whether s is a reason code: 1 to MaxLen bytes of
// [a-z0-9_.-].
func Reason(s string) bool {
	return valid(s, false)
}

// Evidence reports whether s is a verdict's evidence: 1 to MaxLen bytes of
// [A-Za-z0-9_.:=/-].
func Evidence(s string) bool {
	return valid(s, true)
}

func valid(s string, evidence bool) bool {
	if s == "" || len(s) > MaxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		case evidence && (c >= 'A' && c <= 'Z' || c == ':' || c == '=' || c == '/'):
		default:
			return false
		}
	}
	return true
}
