package redistest

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A go-redis client talks to a FakeSrv in RESP3 when HELLO 3 succeeds and
// in RESP2 when HELLO is unknown, and reads each kind of reply.
func TestFakeServer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hello any
	}{
		{"RESP3", Map{{"server", "redis"}, {"version", "7.4.0"}, {"proto", 3}}},
		{"RESP2", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := FakeServer(t, func(cmd []string) any {
				switch cmd[0] {
				case "HELLO":
					if tc.hello == nil {
						return UnknownCommand(cmd)
					}
					return tc.hello
				case "CLIENT":
					return Status("OK")
				case "CONFIG":
					return Map{{"maxmemory-policy", "noeviction"}}
				case "GET":
					return "v"
				case "INCR":
					return 7
				case "EXISTS":
					return nil
				}
				return errors.New("NOPERM no")
			})
			ctx := context.Background()
			c := f.Client(t)
			if m, err := c.ConfigGet(ctx, "maxmemory-policy").Result(); err != nil || m["maxmemory-policy"] != "noeviction" {
				t.Fatalf("CONFIG GET: %v %v", m, err)
			}
			if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
				t.Fatalf("GET: %q %v", v, err)
			}
			if n, err := c.Incr(ctx, "k").Result(); err != nil || n != 7 {
				t.Fatalf("INCR: %d %v", n, err)
			}
			if err := c.Do(ctx, "EXISTS", "k").Err(); !errors.Is(err, redis.Nil) {
				t.Fatalf("a null: exp redis.Nil, got %v", err)
			}
			var rerr redis.Error
			if err := c.Del(ctx, "k").Err(); !errors.As(err, &rerr) || err.Error() != "NOPERM no" {
				t.Fatalf("an error reply: %v", err)
			}
		})
	}
}
