package gatetest

import (
	"sync"
	"testing"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// prefixes holds the key prefix of every gate New built.
var prefixes sync.Map // *gate.Gate → string

// New builds a gate over rdb with opts, giving it a prefix no other test
// uses unless opts.Prefix is set, and fails t on invalid options.
func New(t testing.TB, rdb gate.Client, opts gate.Options) *gate.Gate {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = redistest.UniqueKey(t)
	}
	g, err := gate.New(rdb, opts)
	if err != nil {
		t.Fatalf("gate.New: %v", err)
	}
	prefixes.Store(g, opts.Prefix)
	t.Cleanup(func() { prefixes.Delete(g) })
	return g
}

// Prefix is the key prefix New gave g, for a test that builds a second
// gate on the same keys or names a key of g's. It panics for a gate New
// did not build.
func Prefix(g *gate.Gate) string {
	p, ok := prefixes.Load(g)
	if !ok {
		panic("gatetest.Prefix: the gate was not built by gatetest.New")
	}
	return p.(string)
}
