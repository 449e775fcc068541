package redistest

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// keySeq makes keys unique within the test binary, which owns its servers.
var keySeq atomic.Uint64

// UniqueKey returns a key no other call in this test binary returns, named
// after the test for readable MONITOR output. Keys from separate calls hash
// to unrelated cluster slots.
func UniqueKey(t testing.TB) string {
	return "rt:" + keyName(t) + ":" + strconv.FormatUint(keySeq.Add(1), 10)
}

// Prefix returns a unique key prefix whose unique part is a hash tag, so
// every key built from one Prefix lives in the same cluster slot and
// multi-key commands and scripts work on a cluster too.
func Prefix(t testing.TB) string {
	return "rt:{" + keyName(t) + ":" + strconv.FormatUint(keySeq.Add(1), 10) + "}:"
}

// keyName is t.Name() without braces, which would break hash tags.
func keyName(t testing.TB) string {
	return strings.NewReplacer("{", "_", "}", "_").Replace(t.Name())
}
