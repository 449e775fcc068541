package gate

import (
	"encoding/base64"
	"fmt"
	"strings"
)

// Key layout. Every key of a job shares the hash tag {<job>} so the
// multi-key scripts stay in one cluster slot; scope keys have their own tag
// so jobs spread over the cluster.
//
//	<prefix>:{<job>}:lock          state and TTL (running/cooling/failed/done)
//	<prefix>:{<job>}:meta          hash: a = attempts, f = last fence token
//	<prefix>:scope:{<scope>}       upstream cooldown or pause
//	<prefix>:scope:{<scope>}:fails sliding window of 5xx failures
//
// A job or scope made only of safe characters appears as is, so operators can
// read keys; anything else (braces, spaces, '~', control bytes, invalid
// UTF-8) is written as '~' + base64url, which keeps the encoding injective.

const encodedMark = '~'

func safeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("-_.:/@+=,|#", c) >= 0
}

// encodeName makes a job or scope safe inside a hash tag.
func encodeName(s string) string {
	for i := 0; i < len(s); i++ {
		if !safeByte(s[i]) {
			return string(encodedMark) + base64.RawURLEncoding.EncodeToString([]byte(s))
		}
	}
	return s
}

// decodeName is the inverse of encodeName.
func decodeName(s string) (string, bool) {
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

// checkJob validates a job key.
func checkJob(job string) error {
	switch {
	case job == "":
		return &InvalidJobError{Why: "empty"}
	case len(job) > MaxJobLen:
		return &InvalidJobError{Why: fmt.Sprintf("%d bytes, over the %d-byte limit", len(job), MaxJobLen)}
	}
	return nil
}

type jobKeys struct {
	lock, meta string
	both       [2]string // {lock, meta}: the scripts' KEYS without a slice allocation
}

// jobKeys builds both keys from one allocation.
func (g *Gate) jobKeys(job string) jobKeys {
	var b strings.Builder
	enc := encodeName(job)
	n := len(g.opts.Prefix) + len(enc) + len(":{}:lock")
	b.Grow(2 * n)
	for _, suffix := range [...]string{"}:lock", "}:meta"} {
		b.WriteString(g.opts.Prefix)
		b.WriteString(":{")
		b.WriteString(enc)
		b.WriteString(suffix)
	}
	s := b.String()
	k := jobKeys{lock: s[:n], meta: s[n:]}
	k.both = [2]string{k.lock, k.meta}
	return k
}

// Keys returns the Redis keys the gate uses for job, for operators and
// tools: the lock (state and TTL) and the meta hash (attempts, last fence).
func (g *Gate) Keys(job string) (lock, meta string, err error) {
	if err := checkJob(job); err != nil {
		return "", "", err
	}
	k := g.jobKeys(job)
	return k.lock, k.meta, nil
}

// JobFromKey returns the job whose lock key is key under prefix, and false
// when key is not such a key. It lets tools that SCAN for
// "<prefix>:{*}:lock" report job names.
func JobFromKey(prefix, key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix+":{")
	if !ok {
		return "", false
	}
	name, ok := strings.CutSuffix(rest, "}:lock")
	if !ok {
		return "", false
	}
	return decodeName(name)
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

func scopeKeys(prefix, scope string) (key, fails string) {
	key = prefix + ":scope:{" + encodeName(scope) + "}"
	return key, key + ":fails"
}
