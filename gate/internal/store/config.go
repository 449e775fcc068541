package store

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Policy is one server's maxmemory-policy, as CONFIG GET reads it.
type Policy struct {
	// Addr names the server ("" when not known).
	Addr string
	// Value is the policy; "" when Refusal is set or Missing.
	Value string
	// Missing: the server does not report the policy.
	Missing bool
	// Refusal is the server's error reply to CONFIG GET (disabled or
	// renamed, as on many managed services; no ACL permission).
	Refusal error
}

// Policies reads the maxmemory-policy of every server the client reaches
// (every master of a cluster, every shard of a ring). checked is false
// when the client cannot be asked (no CONFIG GET). An error is a network
// failure.
func (s *Store) Policies(ctx context.Context) ([]Policy, bool, error) {
	return eachServer(ctx, s.rdb, readPolicy)
}

// eachServer reads every server the client reaches with read: every master
// of a cluster and every shard of a ring (in parallel, as go-redis runs
// them), or the one node of another client that is a C. checked is false
// when the client is none of these. An error is a network failure.
func eachServer[T any, C any](ctx context.Context, rdb Client, read func(context.Context, C, string) (T, error)) (out []T, checked bool, err error) {
	var mu sync.Mutex
	each := func(ctx context.Context, c *redis.Client) error {
		cc, ok := any(c).(C)
		if !ok {
			return nil
		}
		v, err := read(ctx, cc, nodeAddr(ctx, c))
		if err == nil {
			mu.Lock()
			out = append(out, v)
			mu.Unlock()
		}
		return err
	}
	switch c := rdb.(type) {
	case interface {
		ForEachMaster(context.Context, func(context.Context, *redis.Client) error) error
	}:
		err = c.ForEachMaster(ctx, each)
	case interface {
		ForEachShard(context.Context, func(context.Context, *redis.Client) error) error
	}:
		err = c.ForEachShard(ctx, each)
	default:
		cc, ok := any(rdb).(C)
		if !ok {
			return nil, false, nil
		}
		addr := ""
		if n, ok := rdb.(nodeClient); ok {
			addr = nodeAddr(ctx, n)
		}
		var v T
		if v, err = read(ctx, cc, addr); err == nil {
			out = append(out, v)
		}
	}
	return out, true, err
}

// configGetter is what Policies needs from a single-node client.
type configGetter interface {
	ConfigGet(ctx context.Context, parameter string) *redis.MapStringStringCmd
}

// readPolicy reads one server's policy. A reply error from the server
// (unknown command, NOPERM) is its Refusal; a network error is returned.
func readPolicy(ctx context.Context, c configGetter, addr string) (Policy, error) {
	m, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		var rerr redis.Error
		if errors.As(err, &rerr) {
			return Policy{Addr: addr, Refusal: err}, nil
		}
		return Policy{}, err
	}
	v, ok := m["maxmemory-policy"]
	return Policy{Addr: addr, Value: v, Missing: !ok}, nil
}

// nodeAddr names the server a one-node client talks to. Sentinel's failover
// client's Addr is the placeholder "FailoverClient": the server then says
// which address the connection reached (CLIENT INFO's laddr, Redis 6.2+).
func nodeAddr(ctx context.Context, c nodeClient) string {
	addr := c.Options().Addr
	if addr != "FailoverClient" {
		return addr
	}
	if ci, ok := c.(interface {
		ClientInfo(context.Context) *redis.ClientInfoCmd
	}); ok {
		if info, err := ci.ClientInfo(ctx).Result(); err == nil && info.LAddr != "" {
			return info.LAddr
		}
	}
	return addr
}
