package redistest

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestServerPingSetGet(t *testing.T) {
	start := time.Now()
	s := Server(t)
	t.Logf("started %s in %v", s.Addr(), time.Since(start))
	c := s.Client(t)
	ctx := context.Background()
	if got, err := c.Ping(ctx).Result(); err != nil || got != "PONG" {
		t.Fatalf("PING: got %q, %v", got, err)
	}
	key := UniqueKey(t)
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if exp, got := "v", c.Get(ctx, key).Val(); exp != got {
		t.Fatalf("GET: exp %q, got %q", exp, got)
	}
	if s.Pid() == 0 {
		t.Fatal("Pid() = 0 for a running server")
	}
}

func TestServerNoPersistence(t *testing.T) {
	s := Server(t)
	c := s.Client(t)
	ctx := context.Background()
	cfg, err := c.ConfigGet(ctx, "save").Result()
	if err != nil {
		t.Fatal(err)
	}
	if exp, got := "", cfg["save"]; exp != got {
		t.Fatalf("save: exp %q, got %q", exp, got)
	}
	if exp, got := "no", c.ConfigGet(ctx, "appendonly").Val()["appendonly"]; exp != got {
		t.Fatalf("appendonly: exp %q, got %q", exp, got)
	}
}

func TestServerWithArgs(t *testing.T) {
	s := Server(t, WithArgs("--maxmemory-policy", "allkeys-lru"))
	got := s.Client(t).ConfigGet(context.Background(), "maxmemory-policy").Val()["maxmemory-policy"]
	if exp := "allkeys-lru"; exp != got {
		t.Fatalf("maxmemory-policy: exp %q, got %q", exp, got)
	}
}

func TestServerKillRestart(t *testing.T) {
	s := Server(t)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	key := UniqueKey(t)
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	oldPid, addr := s.Pid(), s.Addr()

	s.Kill()
	if got := s.Pid(); got != 0 {
		t.Fatalf("Pid() after Kill: exp 0, got %d", got)
	}
	if err := c.Get(ctx, key).Err(); err == nil || errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Kill: exp a connection error, got %v", err)
	}

	s.Restart(t)
	if exp, got := addr, s.Addr(); exp != got {
		t.Fatalf("Addr after Restart: exp %s, got %s", exp, got)
	}
	if s.Pid() == 0 || s.Pid() == oldPid {
		t.Fatalf("Pid after Restart: got %d, old %d", s.Pid(), oldPid)
	}
	if err := c.Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart: exp redis.Nil (empty server), got %v", err)
	}
}

func TestServerRestartRunning(t *testing.T) {
	s := Server(t)
	old := s.Pid()
	s.Restart(t)
	if s.Pid() == old || s.Pid() == 0 {
		t.Fatalf("Pid after Restart: got %d, old %d", s.Pid(), old)
	}
}

func TestServerStoppedByCleanup(t *testing.T) {
	var s *Srv
	t.Run("inner", func(t *testing.T) { s = Server(t) })
	if s == nil {
		t.Skip("inner test skipped")
	}
	if got := s.Pid(); got != 0 {
		t.Fatalf("Pid after cleanup: exp 0, got %d", got)
	}
	if _, err := command(s.Addr(), time.Second, "PING"); err == nil {
		t.Fatal("server still answers after cleanup")
	}
}

// TestServerPortInUseDetected checks the signal newSrv retries on with a
// fresh port.
func TestServerPortInUseDetected(t *testing.T) {
	Require(t)
	l := listen(t)
	port := l.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	s := &Srv{dir: dir, port: port, args: serverArgs(dir, port, false, nil)}
	s.mu.Lock()
	err := s.startLocked()
	s.mu.Unlock()
	if !errors.Is(err, errPortInUse) {
		t.Fatalf("start on a held port: exp errPortInUse, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, logName)); err != nil {
		t.Fatalf("no log written: %v", err)
	}
}
