// Package code checks the codes the gate writes and shows: classification
// reasons and evidence (package classify) travel through Redis to HTTP
// bodies, logs, metric labels and terminals, so each reader keeps only what
// a code can be. Shared by gate (what it writes) and httpmw (what it reads
// back). Internal.
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
