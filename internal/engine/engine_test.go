package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/internal/engine"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// Each engine is told by the fields its INFO has (the fakes' INFO texts
// cite their sources), and named as an operator reads it.
func TestEngine(t *testing.T) {
	for _, tc := range []struct {
		name          string
		info          string
		engine, name2 string
	}{
		{"Redis 6.2", redistest.FakeRedis62.Info, engine.Redis, "Redis 6.2.14 on a:1"},
		{"KeyDB", redistest.FakeKeyDBActiveReplica.Info, engine.KeyDB, "KeyDB 6.3.4 on a:1"},
		{"Valkey", redistest.FakeValkey8.Info, engine.Valkey, "Valkey 8.0.1 on a:1"},
		{"Dragonfly", redistest.FakeDragonfly("").Info, engine.Dragonfly, "Dragonfly df-v1.34.1 on a:1"},
		{"Garnet", redistest.FakeGarnet(true).Info, engine.Garnet, "Garnet 1.0.84 on a:1"},
		// miniredis answers INFO with clients and stats only.
		{"no version", "# Clients\r\nconnected_clients:1\r\n", "", "the server on a:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := engine.Server{Addr: "a:1"}
			s.Info, s.Sections = engine.Parse(tc.info)
			if got, _ := s.Engine(); got != tc.engine {
				t.Errorf("Engine: exp %q, got %q", tc.engine, got)
			}
			if got := s.Name(); got != tc.name2 {
				t.Errorf("Name: exp %q, got %q", tc.name2, got)
			}
		})
	}
}

// Read asks each engine what INFO does not tell, and records a server's
// error replies; a network failure is its error.
func TestRead(t *testing.T) {
	noConfig := func(e redistest.EngineFake) func([]string) any {
		return func(cmd []string) any {
			if cmd[0] == "CONFIG" {
				return errors.New("NOPERM no")
			}
			return e.Answer(cmd)
		}
	}
	for _, tc := range []struct {
		name   string
		answer func([]string) any
		active string
		probe  engine.Probe
	}{
		{"Redis: no probe", redistest.FakeRedis62.Answer, "", engine.ProbeNotSent},
		{"KeyDB", redistest.FakeKeyDBActiveReplica.Answer, "yes", engine.ProbeNotSent},
		{"KeyDB, CONFIG refused", noConfig(redistest.FakeKeyDBActiveReplica), "", engine.ProbeNotSent},
		{"Dragonfly", redistest.FakeDragonfly("").Answer, "", engine.ProbeUndeclared},
		{"Dragonfly non-atomic", redistest.FakeDragonfly("disable-atomicity").Answer, "", engine.ProbeRan},
		{"Garnet without Lua", redistest.FakeGarnet(false).Answer, "", engine.ProbeRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.FakeServer(t, tc.answer)
			s, err := engine.Read(context.Background(), srv.Client(t), srv.Addr())
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if s.ActiveReplica != tc.active || s.Probe != tc.probe {
				t.Fatalf("exp active-replica %q, probe %d; got %q, %d (%q)", tc.active, tc.probe, s.ActiveReplica, s.Probe, s.ProbeReply)
			}
			// It reads: INFO, CONFIG GET, the probe script (after go-redis's
			// handshake).
			for _, cmd := range srv.Seen() {
				switch {
				case cmd[0] == "CONFIG" && strings.EqualFold(cmd[1], "GET"),
					cmd[0] == "INFO", cmd[0] == "EVAL", cmd[0] == "EVALSHA", cmd[0] == "HELLO", cmd[0] == "CLIENT":
				default:
					t.Errorf("Read sent %v", cmd)
				}
			}
		})
	}
	t.Run("INFO refused", func(t *testing.T) {
		srv := redistest.FakeServer(t, func(cmd []string) any {
			if cmd[0] == "INFO" {
				return errors.New("NOPERM no")
			}
			return redistest.FakeRedis62.Answer(cmd)
		})
		s, err := engine.Read(context.Background(), srv.Client(t), srv.Addr())
		if err != nil || s.InfoRefusal == nil || s.Info != nil {
			t.Fatalf("exp the refusal recorded, got %+v, %v", s, err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		if _, err := engine.Read(context.Background(), c, "127.0.0.1:1"); err == nil {
			t.Fatal("exp a network error")
		}
	})
}
