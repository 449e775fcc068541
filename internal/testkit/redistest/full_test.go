package redistest

import (
	"context"
	"testing"
)

func TestFullServer(t *testing.T) {
	s := FullServer(t)
	c := s.Client(t)
	ctx := context.Background()
	if exp, got := "noeviction", c.ConfigGet(ctx, "maxmemory-policy").Val()["maxmemory-policy"]; exp != got {
		t.Fatalf("maxmemory-policy: exp %s, got %s", exp, got)
	}
	key := UniqueKey(t)
	if err := c.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatalf("SET before Fill: %v", err)
	}
	n := s.Fill(t)
	t.Logf("full after %d filler keys", n)
	if n == 0 {
		t.Fatal("Fill wrote nothing: the server was full from the start")
	}
	if err := c.Set(ctx, UniqueKey(t), "v", 0).Err(); !IsOOM(err) {
		t.Fatalf("SET when full: exp OOM, got %v", err)
	}
	if err := c.Eval(ctx, "return redis.call('SET', KEYS[1], 'v')", []string{UniqueKey(t)}).Err(); !IsOOM(err) {
		t.Fatalf("a script's SET when full: exp OOM, got %v", err)
	}
	// Reads and deletes still work on a full noeviction Redis.
	if exp, got := "before", c.Get(ctx, key).Val(); exp != got {
		t.Fatalf("GET when full: exp %q, got %q", exp, got)
	}
	s.Drain(t)
	if err := c.Set(ctx, UniqueKey(t), "v", 0).Err(); err != nil {
		t.Fatalf("SET after Drain: %v", err)
	}
}
