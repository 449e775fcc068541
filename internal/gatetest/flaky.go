package gatetest

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// ErrDown is the error Flaky returns while Down is set and Err is nil.
var ErrDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

// Flaky wraps a redis.Scripter to inject Redis faults into the gate (redislock's
// flakyScripter): while Down is set every script fails with Err (ErrDown
// if nil); while Hang is set every script waits for its context to end, as
// a Redis that accepts and never answers. Safe for concurrent use.
type Flaky struct {
	redis.Scripter
	Err  error
	Down atomic.Bool
	Hang atomic.Bool
}

var _ redis.Scripter = (*Flaky)(nil)

func (f *Flaky) fault(ctx context.Context) *redis.Cmd {
	c := redis.NewCmd(ctx)
	switch {
	case f.Hang.Load():
		<-ctx.Done()
		c.SetErr(ctx.Err())
	case f.Err != nil:
		c.SetErr(f.Err)
	default:
		c.SetErr(ErrDown)
	}
	return c
}

func (f *Flaky) faulty() bool { return f.Down.Load() || f.Hang.Load() }

// Eval implements redis.Scripter.
func (f *Flaky) Eval(ctx context.Context, s string, k []string, a ...any) *redis.Cmd {
	if f.faulty() {
		return f.fault(ctx)
	}
	return f.Scripter.Eval(ctx, s, k, a...)
}

// EvalSha implements redis.Scripter.
func (f *Flaky) EvalSha(ctx context.Context, s string, k []string, a ...any) *redis.Cmd {
	if f.faulty() {
		return f.fault(ctx)
	}
	return f.Scripter.EvalSha(ctx, s, k, a...)
}

// EvalRO implements redis.Scripter.
func (f *Flaky) EvalRO(ctx context.Context, s string, k []string, a ...any) *redis.Cmd {
	if f.faulty() {
		return f.fault(ctx)
	}
	return f.Scripter.EvalRO(ctx, s, k, a...)
}

// EvalShaRO implements redis.Scripter.
func (f *Flaky) EvalShaRO(ctx context.Context, s string, k []string, a ...any) *redis.Cmd {
	if f.faulty() {
		return f.fault(ctx)
	}
	return f.Scripter.EvalShaRO(ctx, s, k, a...)
}

// Get lets the gate's refusal fast path (a GET of a lock it saw cooling)
// through the same faults; it needs a wrapped client that has Get.
func (f *Flaky) Get(ctx context.Context, key string) *redis.StringCmd {
	if f.faulty() {
		c := redis.NewStringCmd(ctx)
		c.SetErr(f.fault(ctx).Err())
		return c
	}
	g, ok := f.Scripter.(interface {
		Get(context.Context, string) *redis.StringCmd
	})
	if !ok {
		c := redis.NewStringCmd(ctx)
		c.SetErr(errors.New("gatetest: the wrapped client has no Get"))
		return c
	}
	return g.Get(ctx, key)
}
