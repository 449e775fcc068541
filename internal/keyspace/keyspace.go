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

// Encode makes a job or upstream name safe inside a hash tag.
func Encode(s string) string {
	if safe(s) {
		return s
	}
	return string(encodedMark) + base64.RawURLEncoding.EncodeToString([]byte(s))
}

func safe(s string) bool {
	for i := 0; i < len(s); i++ {
		if !safeByte(s[i]) {
			return false
		}
	}
	return true
}

// tagged returns prefix + ":{" + Encode(name) + suffix in one allocation:
// every acquire builds its job's key.
func tagged(prefix, name, suffix string) string {
	var b strings.Builder
	if safe(name) {
		b.Grow(len(prefix) + 2 + len(name) + len(suffix))
		b.WriteString(prefix)
		b.WriteString(":{")
		b.WriteString(name)
	} else {
		b.Grow(len(prefix) + 3 + base64.RawURLEncoding.EncodedLen(len(name)) + len(suffix))
		b.WriteString(prefix)
		b.WriteString(":{")
		b.WriteByte(encodedMark)
		// Encoded in whole 3-byte groups through stack buffers.
		var in [48]byte
		var out [64]byte
		for len(name) > 0 {
			n := copy(in[:], name)
			name = name[n:]
			base64.RawURLEncoding.Encode(out[:], in[:n])
			b.Write(out[:base64.RawURLEncoding.EncodedLen(n)])
		}
	}
	b.WriteString(suffix)
	return b.String()
}

// Decode is the inverse of Encode; false when s is no name's encoding.
func Decode(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	if s[0] != encodedMark {
		if !safe(s) {
			return "", false
		}
		return s, true
	}
	b, err := base64.RawURLEncoding.DecodeString(s[1:])
	if err != nil {
		return "", false
	}
	return string(b), true
}

// Shadow is the prefix of a shadow gate whose own prefix is prefix
// (gate.Options.Shadow): a gate that enforces never reads its keys.
func Shadow(prefix string) string { return prefix + "-shadow" }

// Job returns a job's key: <prefix>:{<job>}:job, the job's name encoded
// when it holds a byte outside the safe set.
func Job(prefix, job string) string {
	return tagged(prefix, job, "}:job")
}

// Done returns the done key of the job whose key is jobKey (Job),
// <prefix>:{<job>}:done: the token and fence of its last success, for a
// few seconds after it. A waiter for that run is told it is done. An
// acquire that finds the job free while its done mark did not reach
// Redis refuses it. An older run's failure that comes after its lease
// ended does not undo it. It shares the job's slot. The job's name is
// encoded once, in its key.
func Done(jobKey string) string {
	return strings.TrimSuffix(jobKey, ":job") + ":done"
}

// tagOf returns the encoded name in a job's key under prefix (Job).
func tagOf(prefix, jobKey string) string {
	return strings.TrimSuffix(strings.TrimPrefix(jobKey, prefix+":{"), "}:job")
}

// Calls returns the key of a gate's last call durations: every process
// of the gate records its calls there, so that any of them can tell a
// duplicate when a running call should end. A gate's settles send them,
// so the key shares its first upstream's slot,
// <prefix>:upstream:{<upstream>}:durations, whose node the settle visits
// anyway on a cluster; <prefix>:calls for a gate without upstreams.
func Calls(prefix, upstream string) string {
	if upstream == "" {
		return prefix + ":calls"
	}
	return prefix + ":upstream:{" + Encode(upstream) + "}:durations"
}

// JobFromKey returns the job whose key is key under prefix, and false when
// key is not such a key.
func JobFromKey(prefix, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix+":{")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "}:job")
	if !ok {
		return "", false
	}
	return Decode(name)
}

// JobPattern is the SCAN MATCH pattern of every job key under prefix.
func JobPattern(prefix string) string {
	return escapeGlob(prefix) + ":{*}:job"
}

// Upstream returns an upstream's key and its 5xx failure window's key.
func Upstream(prefix, name string) (key, fails string) {
	key = prefix + ":upstream:{" + Encode(name) + "}"
	return key, key + ":fails"
}

// Unreachable returns the key of the window that counts the distinct jobs
// of an upstream whose calls could not reach its address; it lives in the
// upstream's slot.
func Unreachable(prefix, upstream string) string {
	return prefix + ":upstream:{" + Encode(upstream) + "}:unreachable"
}

// Budget returns the keys of an upstream's budget: the rate limits its
// provider last reported (a hash), and the calls admitted against them and
// not yet settled (a sorted set). Both live in the upstream's slot.
func Budget(prefix, name string) (budget, calls string) {
	key := prefix + ":upstream:{" + Encode(name) + "}"
	return key + ":budget", key + ":calls"
}

// Wave returns the key of the window that counts the distinct jobs of an
// upstream failing permanently with reason; it lives in the upstream's
// slot.
func Wave(prefix, upstream, reason string) string {
	return prefix + ":upstream:{" + Encode(upstream) + "}:wave:" + reason
}
