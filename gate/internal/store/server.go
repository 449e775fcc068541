package store

import (
	"cmp"
	"context"
	"slices"

	"github.com/retrygate/retrygate/internal/engine"
)

// Servers reads what every server the client reaches (every master of a
// cluster, every shard of a ring) says about itself, sorted by address.
// checked is false when the client cannot be asked. An error is a network
// failure.
func (s *Store) Servers(ctx context.Context) ([]engine.Server, bool, error) {
	ss, checked, err := eachServer(ctx, s.rdb, func(ctx context.Context, c engine.Reader, addr string) (engine.Server, error) {
		return engine.Read(ctx, c, addr)
	})
	// ForEachMaster runs in parallel: a stable order.
	slices.SortStableFunc(ss, func(a, b engine.Server) int { return cmp.Compare(a.Addr, b.Addr) })
	return ss, checked, err
}
