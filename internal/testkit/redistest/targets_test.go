package redistest

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	var exp []string
	for _, name := range backends {
		if leftOut(t, name) == "" && (name == "miniredis" || missing("redis-server", "redis-cli") == "") {
			exp = append(exp, name)
		}
	}
	for _, name := range exp {
		if !names[name] {
			t.Fatalf("target %s missing from %v", name, names)
		}
	}
	if len(names) != len(exp) {
		t.Fatalf("targets %v, want %v", names, exp)
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

// TestTargetsShared checks that real backends start once per binary: a
// second Targets call returns the same server process (its run_id), not a
// restarted one.
func TestTargetsShared(t *testing.T) {
	Require(t)
	runID := func() (addr, id string) {
		for _, tg := range Targets(t) {
			if tg.Name == "redis" {
				c := tg.Client.(*redis.Client)
				info, err := c.Info(context.Background(), "server").Result()
				if err != nil {
					t.Fatal(err)
				}
				_, rest, _ := strings.Cut(info, "run_id:")
				id, _, _ := strings.Cut(rest, "\r\n")
				return c.Options().Addr, id
			}
		}
		return "", ""
	}
	addr, id := runID()
	if addr == "" {
		t.Skip("no redis target")
	}
	if addr2, id2 := runID(); addr2 != addr || id2 != id || id == "" {
		t.Fatalf("second Targets call: exp the shared server %s (run_id %s), got %s (run_id %s)", addr, id, addr2, id2)
	}
}

// TestTargetsEnv checks that RETRYGATE_TARGETS leaves the backends it
// does not list out, without starting them, even with
// RETRYGATE_REQUIRE_REDIS=1, and that a typo in it fails.
func TestTargetsEnv(t *testing.T) {
	t.Setenv(RequireEnv, "1")
	skips := func(t *testing.T, name string, fn func(t *testing.T)) {
		t.Helper()
		var skipped bool
		inner := t.Run(name, func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			fn(t)
			t.Error("returned instead of skipping")
		})
		if !inner || !skipped {
			t.Errorf("%s: exp a skip, got passed=%v skipped=%v", name, inner, skipped)
		}
	}
	names := func(targets []Target) string {
		var out []string
		for _, tg := range targets {
			out = append(out, tg.Name)
		}
		return strings.Join(out, ",")
	}

	t.Run("miniredis", func(t *testing.T) {
		t.Setenv(TargetsEnv, "miniredis")
		if exp, got := "miniredis", names(Targets(t)); exp != got {
			t.Fatalf("targets: exp %q, got %q", exp, got)
		}
		skips(t, "RealTargets", func(t *testing.T) { RealTargets(t) })
		skips(t, "Server", func(t *testing.T) { Server(t) })
		skips(t, "Cluster", func(t *testing.T) { Cluster(t, 3, 0) })
	})
	t.Run("miniredis,redis", func(t *testing.T) {
		Require(t)
		t.Setenv(TargetsEnv, "miniredis, redis")
		if exp, got := "miniredis,redis", names(Targets(t)); exp != got {
			t.Fatalf("targets: exp %q, got %q", exp, got)
		}
		if exp, got := "redis", names(RealTargets(t)); exp != got {
			t.Fatalf("real targets: exp %q, got %q", exp, got)
		}
		skips(t, "Cluster", func(t *testing.T) { Cluster(t, 3, 0) })
	})
	t.Run("typo", func(t *testing.T) {
		t.Setenv(TargetsEnv, "miniredis,clutser")
		f := &fatalTB{TB: t}
		func() {
			defer func() { _ = recover() }()
			leftOut(f, "redis")
		}()
		if !strings.Contains(f.msg, `unknown backend "clutser"`) {
			t.Errorf("fatal message %q, want it to name the unknown backend", f.msg)
		}
	})
}

// fatalTB records Fatalf's message and stops the calling function.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}
