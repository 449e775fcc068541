package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/internal/persistence"
)

// persistenceNotes says, per master, why check could not tell whether
// Redis persists the gate's keys (CONFIG refused, and INFO persistence
// refused or showing the AOF off while the RDB schedule is unknown). The
// warning for a server that persists nothing comes from Gate.Check
// (gate.WarnNoPersistence), which reads the same settings
// (internal/persistence).
func persistenceNotes(ctx context.Context, rdb redis.UniversalClient) ([]string, error) {
	var (
		mu    sync.Mutex
		found []persistence.Finding
	)
	one := func(ctx context.Context, c *redis.Client) error {
		f, err := persistence.Read(ctx, c, serverAddr(ctx, c))
		if err != nil {
			return err
		}
		mu.Lock()
		found = append(found, f)
		mu.Unlock()
		return nil
	}
	err := eachNode(ctx, rdb, one)
	if errors.Is(err, errNoNodes) {
		return []string{fmt.Sprintf("cannot read the persistence settings through a %T; make sure Redis persists (appendonly yes)", rdb)}, nil
	}
	// ForEachMaster runs in parallel: report in a stable order.
	slices.SortStableFunc(found, func(a, b persistence.Finding) int { return cmp.Compare(a.Addr, b.Addr) })
	notes := []string{}
	for _, f := range found {
		if f.Unknown != "" {
			notes = append(notes, f.Unknown)
		}
	}
	return notes, err
}

// errNoNodes: eachNode cannot reach the servers through this client.
var errNoNodes = errors.New("no per-server client")

// eachNode runs fn on every master of a cluster, or the one server of a
// single-node client; errNoNodes for another client.
func eachNode(ctx context.Context, rdb redis.UniversalClient, fn func(context.Context, *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return errNoNodes
}

// serverAddr names the server a one-node client reached: a Sentinel
// failover client's Addr is the placeholder "FailoverClient", so the
// server says which address the connection reached (CLIENT INFO's laddr).
func serverAddr(ctx context.Context, c *redis.Client) string {
	addr := c.Options().Addr
	if addr != "FailoverClient" {
		return addr
	}
	if info, err := c.ClientInfo(ctx).Result(); err == nil && info.LAddr != "" {
		return info.LAddr
	}
	return ""
}
