package keyspace

import "strings"

// Patterns and parsers for the CLI's SCANs of upstream keys and of a whole
// prefix (the job keys' are in keyspace.go).

// UpstreamPattern is the SCAN MATCH pattern of every upstream key under
// prefix. It may also match a wave key whose reason ends in '}':
// UpstreamFromKey tells them apart.
func UpstreamPattern(prefix string) string { return escapeGlob(prefix) + ":upstream:{*}" }

// UpstreamFromKey returns the upstream whose key is key under prefix, and false
// for any other key (a failure window, a wave counter, a job key).
func UpstreamFromKey(prefix, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix+":upstream:{")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "}")
	if !ok || strings.ContainsAny(name, "{}") {
		return "", false
	}
	return Decode(name)
}

// PrefixPattern is the SCAN MATCH pattern of every key under prefix.
func PrefixPattern(prefix string) string { return escapeGlob(prefix) + ":*" }

// escapeGlob escapes the characters SCAN MATCH reads as a pattern.
func escapeGlob(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
