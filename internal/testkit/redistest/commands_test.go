package redistest

import (
	"context"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Commands records one entry a round trip, the caller's commands only
// (the client's handshake and PING are not its), and runs AfterNextPipeline's
// function once, after the pipeline was answered.
func TestCommandsRecordsRoundTrips(t *testing.T) {
	ctx := context.Background()
	_, c := Miniredis(t)
	rec := &Commands{}
	c.AddHook(rec) // before the first connection: its handshake passes the hook
	var seen []string
	rec.AfterNextPipeline(func() { seen = append(seen, c.Get(ctx, "k").Val()) })
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "k", "a", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"b", "c"} {
		if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "k", v, 0)
			p.Ping(ctx)
			p.Get(ctx, "k")
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if exp, got := []string{"set", "[set get]", "get", "[set get]"}, rec.Take(); !slices.Equal(got, exp) {
		t.Fatalf("recorded %v, want %v: one entry a round trip, the caller's commands only", got, exp)
	}
	if exp := []string{"b"}; !slices.Equal(seen, exp) {
		t.Fatalf("AfterNextPipeline's function read %v, want %v: once, after the first pipeline was answered", seen, exp)
	}
	if got := rec.Take(); len(got) != 0 {
		t.Fatalf("a second Take returned %v, want nothing: Take empties the record", got)
	}
}
