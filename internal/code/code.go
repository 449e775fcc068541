package code

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

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

// MaxNote bounds an operator's note (a pause's reason), in bytes.
const MaxNote = 200

// Note makes an operator's free text safe to store, log and print: every
// control or format character (newlines, escapes, bidirectional
// overrides) and byte that is not UTF-8 becomes a space, runs of spaces
// become one, and the result is cut to MaxNote bytes on a character
// boundary.
func Note(s string) string {
	var b strings.Builder
	space := true // drops leading spaces
	for _, r := range strings.ToValidUTF8(s, " ") {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		if b.Len()+utf8.RuneLen(r) > MaxNote {
			break
		}
		b.WriteRune(r)
		space = false
	}
	return strings.TrimRight(b.String(), " ")
}
