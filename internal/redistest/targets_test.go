package redistest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestTargets(t *testing.T) {
	targets := Targets(t)
	names := map[string]bool{}
	for _, tg := range targets {
		names[tg.Name] = true
	}
	exp := []string{"miniredis"}
	if missing("redis-server", "redis-cli") == "" && onlyMiniredis() == "" {
		exp = append(exp, "redis", "cluster")
	}
	for _, name := range exp {
		if !names[name] {
			t.Fatalf("target %s missing from %v", name, names)
		}
	}

	for _, tg := range targets {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			if exp, got := tg.Name == "cluster", tg.IsCluster; exp != got {
				t.Fatalf("IsCluster: exp %v, got %v", exp, got)
			}
			if _, ok := tg.Client.(*redis.ClusterClient); ok != tg.IsCluster {
				t.Fatalf("client %T does not match IsCluster=%v", tg.Client, tg.IsCluster)
			}
			// Two keys under one Prefix must share a slot, even on a cluster.
			p := Prefix(t)
			if err := tg.Client.MSet(ctx, p+"a", "1", p+"b", "2").Err(); err != nil {
				t.Fatalf("MSET under one Prefix: %v", err)
			}
			key := UniqueKey(t)
			if err := tg.Client.Set(ctx, key, "v", time.Second).Err(); err != nil {
				t.Fatal(err)
			}
			if tg.FastForward == nil {
				if tg.Name == "miniredis" {
					t.Fatal("miniredis target without FastForward")
				}
				return
			}
			tg.FastForward(2 * time.Second)
			if err := tg.Client.Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
				t.Fatalf("GET after FastForward past the TTL: exp redis.Nil, got %v", err)
			}
		})
	}
}

// TestTargetsShared checks that real backends start once per binary.
func TestTargetsShared(t *testing.T) {
	Require(t)
	addr := func() string {
		for _, tg := range Targets(t) {
			if tg.Name == "redis" {
				return tg.Client.(*redis.Client).Options().Addr
			}
		}
		return ""
	}
	first := addr()
	if first == "" {
		t.Skip("no redis target")
	}
	start := time.Now()
	if exp, got := first, addr(); exp != got {
		t.Fatalf("second Targets call: exp the shared server %s, got %s", exp, got)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("second Targets call took %v: backends restarted?", d)
	}
}

// TestOnlyMiniredis checks that RETRYGATE_ONLY_MINIREDIS=1 leaves the real
// backends out without starting them, even with RETRYGATE_REQUIRE_REDIS=1.
func TestOnlyMiniredis(t *testing.T) {
	t.Setenv(OnlyMiniredisEnv, "1")
	t.Setenv(RequireEnv, "1")
	targets := Targets(t)
	if exp, got := 1, len(targets); exp != got {
		t.Fatalf("targets: exp %d (miniredis), got %d: %+v", exp, got, targets)
	}
	if exp, got := "miniredis", targets[0].Name; exp != got {
		t.Fatalf("target: exp %q, got %q", exp, got)
	}
	for name, fn := range map[string]func(t *testing.T){
		"RealTargets": func(t *testing.T) { RealTargets(t) },
		"Server":      func(t *testing.T) { Server(t) },
		"Cluster":     func(t *testing.T) { Cluster(t, 3, 0) },
	} {
		t.Run(name, func(t *testing.T) {
			var skipped bool
			inner := t.Run("inner", func(t *testing.T) {
				defer func() { skipped = t.Skipped() }()
				fn(t)
				t.Error("returned instead of skipping")
			})
			if !inner || !skipped {
				t.Fatalf("%s: exp a skip, got passed=%v skipped=%v", name, inner, skipped)
			}
		})
	}
}
