package main

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// tripCounter is a go-redis hook that counts round trips: one per command,
// one per pipeline. A context made by withAttempt also gets its own count,
// so the storm can charge Redis commands to refused and admitted retries.
type tripCounter struct{ n atomic.Int64 }

type attemptKey struct{}

func withAttempt(ctx context.Context, n *atomic.Int64) context.Context {
	return context.WithValue(ctx, attemptKey{}, n)
}

func (c *tripCounter) add(ctx context.Context) {
	c.n.Add(1)
	if a, ok := ctx.Value(attemptKey{}).(*atomic.Int64); ok {
		a.Add(1)
	}
}

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(ctx)
		return next(ctx, cmd)
	}
}

func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.add(ctx)
		return next(ctx, cmds)
	}
}

// poolSize leaves room for 64 goroutines with a command each in flight.
const poolSize = 128

// newClient returns a client with its own round-trip counter.
func newClient(addr string) (*redis.Client, *tripCounter) {
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: poolSize})
	tc := &tripCounter{}
	c.AddHook(tc)
	return c, tc
}

// warmPool opens n of c's pool connections: go-redis sends a new
// connection's handshake through the hooks, which would count as round
// trips of the first requests that need one.
func warmPool(ctx context.Context, c *redis.Client, n int) error {
	conns := make([]*redis.Conn, 0, n)
	defer func() {
		for _, cn := range conns {
			_ = cn.Close() // back to the pool
		}
	}()
	for range n {
		cn := c.Conn()
		conns = append(conns, cn)
		if err := cn.Ping(ctx).Err(); err != nil {
			return err
		}
	}
	return nil
}
