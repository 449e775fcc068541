package store

import (
	"cmp"
	"context"
	"slices"

	"github.com/retrygate/retrygate/internal/persistence"
)

// Persistence reads whether every server the client reaches (every master
// of a cluster, every shard of a ring) keeps its keys across a restart,
// sorted by address. checked is false when the client cannot be asked. An
// error is a network failure.
func (s *Store) Persistence(ctx context.Context) ([]persistence.Finding, bool, error) {
	fs, checked, err := eachServer(ctx, s.rdb, func(ctx context.Context, c persistence.Server, addr string) (persistence.Finding, error) {
		return persistence.Read(ctx, c, addr)
	})
	// ForEachMaster runs in parallel: a stable order.
	slices.SortStableFunc(fs, func(a, b persistence.Finding) int { return cmp.Compare(a.Addr, b.Addr) })
	return fs, checked, err
}
