package faultproxy

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// proxied starts a redis-server behind a proxy and a client through it
// that neither retries commands nor redials, so every fault shows.
func proxied(t *testing.T, opts *redis.Options) (*Proxy, *redis.Client, *redistest.Srv) {
	t.Helper()
	srv := redistest.Server(t)
	p := New(t, srv.Addr())
	opts.Addr = p.Addr()
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	// Not 1: once PoolSize dials in a row have failed, go-redis answers
	// with the last dial error until a background redial, a second
	// later, succeeds. A refused dial must not trip that here.
	opts.PoolSize = 4
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return p, c, srv
}

func TestRedisLatency(t *testing.T) {
	p, c, _ := proxied(t, &redis.Options{})
	ctx := context.Background()
	const d = 50 * time.Millisecond
	p.SetLatency(d)
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got := time.Since(start); got < 2*d {
		t.Fatalf("PING through %v each way took %v, want >= %v", d, got, 2*d)
	}
}

func TestRedisBlackholeTimesOut(t *testing.T) {
	const readTimeout = 200 * time.Millisecond
	p, c, _ := proxied(t, &redis.Options{ReadTimeout: readTimeout})
	ctx := context.Background()

	p.Blackhole(true)
	start := time.Now()
	err := c.Ping(ctx).Err()
	elapsed := time.Since(start)
	var nerr net.Error
	if !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("PING in blackhole: exp a timeout, got %v", err)
	}
	if elapsed < readTimeout {
		t.Fatalf("PING in blackhole failed after %v, before ReadTimeout %v", elapsed, readTimeout)
	}

	p.Blackhole(false)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after blackhole: %v", err)
	}
}

func TestRedisResetAll(t *testing.T) {
	p, c, srv := proxied(t, &redis.Options{})
	ctx := context.Background()
	key := redistest.UniqueKey(t)

	// A command in flight on the pooled conn fails on the reset.
	errc := make(chan error, 1)
	go func() { errc <- c.BLPop(ctx, 10*time.Second, key).Err() }()
	direct := srv.Client(t)
	deadline := time.Now().Add(5 * time.Second)
	for !containsLine(direct.Info(ctx, "clients").Val(), "blocked_clients:1") {
		if time.Now().After(deadline) {
			t.Fatal("BLPOP never blocked")
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.ResetAll()
	select {
	case err := <-errc:
		if err == nil || errors.Is(err, redis.Nil) {
			t.Fatalf("BLPOP on a reset conn: exp a connection error, got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("BLPOP did not return after ResetAll")
	}

	// Recovery: the next command dials a new conn.
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after ResetAll: %v", err)
	}
	// go-redis checks idle pooled conns before use and redials when it
	// finds them reset, so an idle reset costs a dial, not an error.
	p.ResetAll()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after an idle ResetAll: %v", err)
	}
	if exp, got := 3, p.Accepted(); exp != got {
		t.Fatalf("Accepted: exp %d (one dial per reset), got %d", exp, got)
	}
}

func TestRedisRefuse(t *testing.T) {
	p, c, _ := proxied(t, &redis.Options{})
	ctx := context.Background()
	p.Refuse(true)
	p.ResetAll()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING while refusing: exp an error")
	}
	p.Refuse(false)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Refuse(false): %v", err)
	}
}
