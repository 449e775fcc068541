package store

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/internal/persistence"
)

// Persistence reads whether every server the client reaches (every master
// of a cluster, every shard of a ring) keeps its keys across a restart,
// sorted by address. checked is false when the client cannot be asked. An
// error is a network failure.
func (s *Store) Persistence(ctx context.Context) (fs []persistence.Finding, checked bool, err error) {
	var mu sync.Mutex
	each := func(ctx context.Context, c *redis.Client) error {
		f, err := persistence.Read(ctx, c, nodeAddr(ctx, c))
		if err == nil {
			mu.Lock()
			fs = append(fs, f)
			mu.Unlock()
		}
		return err
	}
	switch c := s.rdb.(type) {
	case interface {
		ForEachMaster(context.Context, func(context.Context, *redis.Client) error) error
	}:
		err = c.ForEachMaster(ctx, each)
	case interface {
		ForEachShard(context.Context, func(context.Context, *redis.Client) error) error
	}:
		err = c.ForEachShard(ctx, each)
	case interface {
		nodeClient
		persistence.Server
	}:
		var f persistence.Finding
		if f, err = persistence.Read(ctx, c, nodeAddr(ctx, c)); err == nil {
			fs = append(fs, f)
		}
	case persistence.Server:
		var f persistence.Finding
		if f, err = persistence.Read(ctx, c, ""); err == nil {
			fs = append(fs, f)
		}
	default:
		return nil, false, nil
	}
	// ForEachMaster runs in parallel: a stable order.
	slices.SortStableFunc(fs, func(a, b persistence.Finding) int { return cmp.Compare(a.Addr, b.Addr) })
	return fs, true, err
}
