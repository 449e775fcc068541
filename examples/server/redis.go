package main

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// clockStep is how often the embedded Redis's clock is moved forward.
// Countdowns on the page are as precise as this.
const clockStep = 50 * time.Millisecond

// connectRedis returns a client for url, or for an embedded Redis when url
// is empty. close releases both.
func connectRedis(ctx context.Context, url string) (rdb *redis.Client, desc string, close func(), err error) {
	if url != "" {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, "", nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		rdb = redis.NewClient(opts)
		if err := rdb.Ping(ctx).Err(); err != nil {
			_ = rdb.Close()
			return nil, "", nil, fmt.Errorf("redis at %s: %w", opts.Addr, err)
		}
		return rdb, "Redis at " + opts.Addr, func() { _ = rdb.Close() }, nil
	}

	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, "", nil, fmt.Errorf("embedded redis: %w", err)
	}
	stop := runClock(m, clockStep)
	rdb = redis.NewClient(&redis.Options{Addr: m.Addr()})
	return rdb, "embedded Redis (in-process, set REDIS_URL for a real one)", func() {
		_ = rdb.Close()
		stop()
		m.Close()
	}, nil
}

// runClock makes m's TTLs run in real time: miniredis only expires keys when
// told to with FastForward, so a ticker tells it how much time passed.
func runClock(m *miniredis.Miniredis, step time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(step)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
