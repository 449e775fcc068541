package keyspace

import (
	"encoding/base64"
	"strings"
)

// DefaultPrefix starts every key when gate.Options.Prefix is empty.
const DefaultPrefix = "retrygate"

const encodedMark = '~'

func safeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("-_.:/@+=,|#", c) >= 0
}

// Encode makes a job or scope name safe inside a hash tag.
func Encode(s string) string {
	for i := 0; i < len(s); i++ {
		if !safeByte(s[i]) {
			return string(encodedMark) + base64.RawURLEncoding.EncodeToString([]byte(s))
		}
	}
	return s
}

// Decode is the inverse of Encode; false when s is no name's encoding.
func Decode(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	if s[0] != encodedMark {
		for i := 0; i < len(s); i++ {
			if !safeByte(s[i]) {
				return "", false
			}
		}
		return s, true
	}
	b, err := base64.RawURLEncoding.DecodeString(s[1:])
	if err != nil {
		return "", false
	}
	return string(b), true
}

// Job returns a job's lock and meta keys, built from one allocation.
func Job(prefix, job string) (lock, meta string) {
	var b strings.Builder
	enc := Encode(job)
	n := len(prefix) + len(enc) + len(":{}:lock")
	b.Grow(2 * n)
	for _, suffix := range [...]string{"}:lock", "}:meta"} {
		b.WriteString(prefix)
		b.WriteString(":{")
		b.WriteString(enc)
		b.WriteString(suffix)
	}
	s := b.String()
	return s[:n], s[n:]
}

// JobFromLock returns the job whose lock key is key under prefix, and false
// when key is not such a key.
func JobFromLock(prefix, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix+":{")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "}:lock")
	if !ok {
		return "", false
	}
	return Decode(name)
}

// LockPattern is the SCAN MATCH pattern of every job lock under prefix.
func LockPattern(prefix string) string {
	var b strings.Builder
	for i := 0; i < len(prefix); i++ {
		if strings.IndexByte(`*?[]\`, prefix[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(prefix[i])
	}
	return b.String() + ":{*}:lock"
}

// Scope returns an upstream scope's key and its failure window's key.
func Scope(prefix, scope string) (key, fails string) {
	key = prefix + ":scope:{" + Encode(scope) + "}"
	return key, key + ":fails"
}
