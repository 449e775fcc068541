package gate

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestDecodeWellFormedReplies: each reply shape of the acquire's takeover
// and of the probe's claim decodes to what it means, and the same shape
// one member long is an error. (Races bring these replies: a job another
// call took over first, an upstream whose key ended between its read and
// the claim, a probe another process claimed.)
func TestDecodeWellFormedReplies(t *testing.T) {
	reply := func(v ...any) *redis.Cmd {
		c := redis.NewCmd(context.Background())
		c.SetVal(v)
		return c
	}
	const value = "c:5000:1:1::rate_limited:"
	if r, err := decodeAcquire(reply(int64(0), int64(1000), value, int64(4000))); err != nil ||
		r.taken || r.now != 1000 || r.value != value || r.pttl != 4000 {
		t.Errorf("acquire refused: %+v, %v", r, err)
	}
	if r, err := decodeAcquire(reply(int64(1), int64(1000), int64(1700000000000000), value, int64(-2))); err != nil ||
		!r.taken || r.fence != 1700000000000000 || r.value != value || r.pttl != -2 {
		t.Errorf("acquire taken: %+v, %v", r, err)
	}
	if c, err := decodeClaim(reply(int64(1))); err != nil || !c.open || c.claimed {
		t.Errorf("claim open: %+v, %v", c, err)
	}
	if c, err := decodeClaim(reply(int64(2), int64(3))); err != nil || !c.claimed || c.level != 3 || c.open {
		t.Errorf("claim claimed: %+v, %v", c, err)
	}
	if c, err := decodeClaim(reply(int64(0), value, int64(5000))); err != nil || c.open || c.claimed ||
		c.value != value || c.wait != 5*time.Second {
		t.Errorf("claim refused: %+v, %v", c, err)
	}
	for name, cmd := range map[string]*redis.Cmd{
		"acquire refused, one long": reply(int64(0), int64(1000), value, int64(4000), "x"),
		"claim open, one long":      reply(int64(1), "x"),
		"claim claimed, one long":   reply(int64(2), int64(3), "x"),
		"claim refused, one long":   reply(int64(0), value, int64(5000), "x"),
	} {
		var err error
		if name[:5] == "claim" {
			_, err = decodeClaim(cmd)
		} else {
			_, err = decodeAcquire(cmd)
		}
		if err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
