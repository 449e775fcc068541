package gatetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
)

// ErrDown is the error Flaky returns while Down is set and Err is nil.
var ErrDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

// Flaky wraps a gate.Client to inject Redis faults into the gate
// (redislock's flakyScripter): while Down is set every command and
// pipeline fails with Err (ErrDown if nil); while Hang is set each waits
// for its context to end, as a Redis that accepts and never answers. It
// has only the two methods of gate.Client, so a gate over it cannot
// subscribe (waits poll) or pin connections. Late, when set, delays each
// fault of Down by that long, as a dial's timeout does. Safe for
// concurrent use.
type Flaky struct {
	gate.Client
	Err  error
	Late time.Duration
	Down atomic.Bool
	Hang atomic.Bool
}

var _ gate.Client = (*Flaky)(nil)

func (f *Flaky) faulty() bool { return f.Down.Load() || f.Hang.Load() }

// fault is the error a command meets while f is faulty.
func (f *Flaky) fault(ctx context.Context) error {
	if f.Hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if f.Late > 0 {
		t := time.NewTimer(f.Late)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	switch {
	case f.Err != nil:
		return f.Err
	}
	return ErrDown
}

// Process implements gate.Client.
func (f *Flaky) Process(ctx context.Context, cmd redis.Cmder) error {
	if f.faulty() {
		err := f.fault(ctx)
		cmd.SetErr(err)
		return err
	}
	return f.Client.Process(ctx, cmd)
}

// Pipeline implements gate.Client: its Exec meets the same faults.
func (f *Flaky) Pipeline() redis.Pipeliner {
	return &flakyPipe{Pipeliner: f.Client.Pipeline(), f: f}
}

type flakyPipe struct {
	redis.Pipeliner
	f    *Flaky
	mu   sync.Mutex
	cmds []redis.Cmder
}

func (p *flakyPipe) Process(ctx context.Context, cmd redis.Cmder) error {
	return p.BatchProcess(ctx, cmd)
}

func (p *flakyPipe) BatchProcess(ctx context.Context, cmds ...redis.Cmder) error {
	p.mu.Lock()
	p.cmds = append(p.cmds, cmds...)
	p.mu.Unlock()
	return p.Pipeliner.BatchProcess(ctx, cmds...)
}

func (p *flakyPipe) Exec(ctx context.Context) ([]redis.Cmder, error) {
	if !p.f.faulty() {
		return p.Pipeliner.Exec(ctx)
	}
	err := p.f.fault(ctx)
	p.mu.Lock()
	cmds := p.cmds
	p.cmds = nil
	p.mu.Unlock()
	for _, c := range cmds {
		c.SetErr(err)
	}
	p.Pipeliner.Discard()
	return cmds, err
}
