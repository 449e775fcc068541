package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
)

// stormParams shape the retry storm: clients retrying one failing job.
type stormParams struct {
	clients    int
	dur        time.Duration
	callTime   time.Duration // how long the failing upstream call takes
	retryEvery time.Duration // a client's pause between two attempts
	cooldown   time.Duration // the gate's cooldown after a failure
}

// Storm rows.
const (
	sRedislock = "redislock, release in defer"
	sRedsync   = "redsync, unlock in defer"
	sRaw       = "raw SET NX, CAD in defer"
	sGate      = "gate, one process"
	sGateProcs = "gate, one Gate per client"
)

// attemptFunc is one client's attempt; called reports whether it reached
// the upstream. err is for unexpected failures only.
type attemptFunc func(ctx context.Context, client int) (called bool, err error)

type stormLib struct {
	name string
	// attempt returns the attempt function for a fresh job named key.
	attempt func(key string) attemptFunc
}

type stormResult struct {
	attempts, calls, refused int64
	cmds                     int64 // every Redis round trip of the run
	refusedCmds, calledCmds  int64 // charged by the attempt's context
	localRefused             int64 // refused without a Redis command
}

func (r stormResult) perRefused() float64 { return ratio(r.refusedCmds, r.refused) }
func (r stormResult) perCall() float64    { return ratio(r.calledCmds, r.calls) }

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// upstream is the failing model call: slow, then a 503.
func upstream(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return errUpstream
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newStormLibs builds each library "the usual way": a lock is taken, the
// call made and the lock released in a defer whatever the outcome.
func newStormLibs(rdb *redis.Client, p stormParams) ([]stormLib, error) {
	const ttl = 10 * time.Second
	locker := redislock.New(rdb)
	rs := redsync.New(redsyncgoredis.NewPool(rdb))
	gopts := gate.Options{Prefix: "storm", Cooldown: p.cooldown, Backoff: gate.Backoff{Factor: 1, Jitter: -1}}
	shared, err := gate.New(rdb, gopts)
	if err != nil {
		return nil, err
	}
	own := make([]*gate.Gate, p.clients)
	for i := range own {
		if own[i], err = gate.New(rdb, gopts); err != nil {
			return nil, err
		}
	}
	return []stormLib{
		{sRedislock, func(key string) attemptFunc {
			return func(ctx context.Context, _ int) (bool, error) {
				l, err := locker.Obtain(ctx, key, ttl, nil)
				if errors.Is(err, redislock.ErrNotObtained) {
					return false, nil
				} else if err != nil {
					return false, err
				}
				defer l.Release(ctx)
				_ = upstream(ctx, p.callTime)
				return true, nil
			}
		}},
		{sRedsync, func(key string) attemptFunc {
			// One try per attempt, as TryLock: the client's own retry loop
			// is the storm (redsync's default would sleep-retry 32 times).
			opts := []redsync.Option{redsync.WithExpiry(ttl), redsync.WithTries(1)}
			return func(ctx context.Context, _ int) (bool, error) {
				m := rs.NewMutex(key, opts...)
				err := m.LockContext(ctx)
				var taken *redsync.ErrTaken
				if errors.As(err, &taken) || errors.Is(err, redsync.ErrFailed) {
					return false, nil
				} else if err != nil {
					return false, err
				}
				defer m.UnlockContext(ctx)
				_ = upstream(ctx, p.callTime)
				return true, nil
			}
		}},
		{sRaw, func(key string) attemptFunc {
			return func(ctx context.Context, _ int) (bool, error) {
				tok := token()
				ok, err := rdb.SetNX(ctx, key, tok, ttl).Result()
				if err != nil || !ok {
					return false, err
				}
				defer casDelete.Run(ctx, rdb, []string{key}, tok)
				_ = upstream(ctx, p.callTime)
				return true, nil
			}
		}},
		{sGate, func(key string) attemptFunc {
			return gateAttempt(func(int) *gate.Gate { return shared }, key, p)
		}},
		{sGateProcs, func(key string) attemptFunc {
			return gateAttempt(func(c int) *gate.Gate { return own[c] }, key, p)
		}},
	}, nil
}

func gateAttempt(gateOf func(client int) *gate.Gate, job string, p stormParams) attemptFunc {
	return func(ctx context.Context, c int) (bool, error) {
		called := false
		err := gateOf(c).Do(ctx, job, func(ctx context.Context, _ *gate.Lease) error {
			called = true
			return upstream(ctx, p.callTime)
		})
		var blocked *gate.BlockedError
		switch {
		case called:
			if !errors.Is(err, errUpstream) {
				return true, fmt.Errorf("gate: exp the upstream's error, got %v", err)
			}
			return true, nil
		case errors.As(err, &blocked):
			return false, nil
		default:
			return false, err
		}
	}
}

// warmStorm opens the pool's connections and loads each library's
// scripts, so the storm counts steady-state commands only.
func warmStorm(ctx context.Context, rdb *redis.Client, libs []stormLib, p stormParams) error {
	if err := warmPool(ctx, rdb, p.clients); err != nil {
		return err
	}
	for i, l := range libs {
		// Twice: a call that takes the lock, then one refused.
		a := l.attempt(fmt.Sprintf("storm:warm:%d", i))
		for range 2 {
			if _, err := a(ctx, 0); err != nil {
				return fmt.Errorf("warm %s: %w", l.name, err)
			}
		}
	}
	return nil
}

// runStorm lets p.clients clients retry one failing job for p.dur.
func runStorm(ctx context.Context, rt *tripCounter, attempt attemptFunc, p stormParams) (stormResult, error) {
	var (
		res    stormResult
		mu     sync.Mutex
		runErr error
		wg     sync.WaitGroup
	)
	cmds0 := rt.n.Load()
	deadline := time.Now().Add(p.dur)
	for c := range p.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r stormResult
			for time.Now().Before(deadline) {
				var n atomic.Int64
				called, err := attempt(withAttempt(ctx, &n), c)
				if err != nil {
					mu.Lock()
					runErr = errors.Join(runErr, err)
					mu.Unlock()
					return
				}
				r.attempts++
				if called {
					r.calls++
					r.calledCmds += n.Load()
				} else {
					r.refused++
					r.refusedCmds += n.Load()
					if n.Load() == 0 {
						r.localRefused++
					}
				}
				time.Sleep(p.retryEvery) // the client's retry pace
			}
			mu.Lock()
			res.attempts += r.attempts
			res.calls += r.calls
			res.refused += r.refused
			res.calledCmds += r.calledCmds
			res.refusedCmds += r.refusedCmds
			res.localRefused += r.localRefused
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.cmds = rt.n.Load() - cmds0
	return res, runErr
}
