package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A command sent while the server is paused is answered only once it
// resumes, and a key whose TTL ended during the pause is gone then.
func TestServerPause(t *testing.T) {
	s := Server(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, ReadTimeout: 5 * time.Second})
	probe := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close(); _ = probe.Close() })
	ctx := context.Background()
	key := UniqueKey(t)
	if err := c.Set(ctx, key, "v", 50*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	const pause = 500 * time.Millisecond
	paused := make(chan time.Time)
	go func() {
		start := time.Now()
		s.Pause(pause)
		paused <- start
	}()
	// The pause has begun once a PING goes unanswered for a while.
	deadline := time.Now().Add(startTimeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		err := probe.Ping(pctx).Err()
		cancel()
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server kept answering: not paused")
		}
	}
	sent := time.Now()
	got, err := c.Exists(ctx, key).Result()
	answered := time.Now()
	start := <-paused
	if err != nil {
		t.Fatalf("EXISTS after the pause: %v", err)
	}
	if exp := start.Add(pause); answered.Before(exp) {
		t.Fatalf("EXISTS sent %v into the pause answered %v before it ended", sent.Sub(start), exp.Sub(answered))
	}
	if got != 0 {
		t.Fatal("a key whose 50ms TTL ended during the pause is still there")
	}
}
