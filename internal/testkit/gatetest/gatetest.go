package gatetest

import (
	"testing"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

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
	return g
}
