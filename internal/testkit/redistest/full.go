package redistest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

const (
	// fullHeadroom is how much memory a FullServer allows above what it
	// uses at start: room for a test's own keys, filled by Fill.
	fullHeadroom = 1 << 20
	fillValue    = 64 << 10 // bytes per filler key
	fullMargin   = 256 << 10
)

// FullSrv is a redis-server with a small maxmemory and
// maxmemory-policy noeviction: once Fill has run, every write that needs
// memory is refused with OOM, as on a production Redis that filled up.
type FullSrv struct {
	*Srv
	fillPrefix string
	maxmemory  string // as set at start, for Drain
}

// FullServer starts a redis-server (see Server) with maxmemory about 1 MiB
// above the memory it uses at start and maxmemory-policy noeviction (the
// policy the gate asks for). opts come last and may override both.
func FullServer(t testing.TB, opts ...Option) *FullSrv {
	t.Helper()
	s := Server(t, append([]Option{WithArgs("--maxmemory-policy", "noeviction")}, opts...)...)
	info, err := s.command(adminTimeout, "INFO", "memory")
	if err != nil {
		t.Fatal(err)
	}
	used, err := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
	if err != nil {
		t.Fatalf("redistest: used_memory in INFO: %v", err)
	}
	max := strconv.FormatInt(used+fullHeadroom, 10)
	if _, err := s.command(adminTimeout, "CONFIG", "SET", "maxmemory", max); err != nil {
		t.Fatal(err)
	}
	return &FullSrv{Srv: s, fillPrefix: "redistest:fill:" + UniqueKey(t) + ":", maxmemory: max}
}

// IsOOM reports whether err is Redis's reply to a write refused for lack
// of memory.
func IsOOM(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "OOM ")
}

// Fill writes filler keys (no TTL, outside any gate prefix) until Redis
// refuses a write with OOM, then lowers maxmemory 256 KiB below the memory
// in use, so that connections closing cannot make room again: from then
// on every write that needs memory is refused with OOM, while reads and
// deletes work. It returns how many keys it wrote, and fails t if Redis
// never refuses within a bound. Drain undoes it.
func (s *FullSrv) Fill(t testing.TB) int {
	t.Helper()
	n := s.fillWith(t, fillValue)
	info, err := s.command(adminTimeout, "INFO", "memory")
	if err != nil {
		t.Fatal(err)
	}
	used, err := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
	if err != nil {
		t.Fatalf("redistest: used_memory in INFO: %v", err)
	}
	if _, err := s.command(adminTimeout, "CONFIG", "SET", "maxmemory", strconv.FormatInt(used-fullMargin, 10)); err != nil {
		t.Fatal(err)
	}
	return n
}

// fillWith writes keys of size bytes on a connection of its own until OOM.
func (s *FullSrv) fillWith(t testing.TB, size int) int {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	ctx := context.Background()
	value := strings.Repeat("x", size)
	limit := 4 * fullHeadroom / size // far more than fits
	for i := range limit {
		err := c.Set(ctx, fmt.Sprintf("%s%d:%d", s.fillPrefix, size, i), value, 0).Err()
		if IsOOM(err) {
			return i
		}
		if err != nil {
			t.Fatalf("redistest: Fill: SET: %v", err)
		}
	}
	t.Fatalf("redistest: Fill: %d writes of %d bytes and still no OOM", limit, size)
	return 0
}

// Drain deletes Fill's keys and restores maxmemory, so writes succeed
// again.
func (s *FullSrv) Drain(t testing.TB) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	iter := c.Scan(ctx, 0, s.fillPrefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		if err := c.Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.command(adminTimeout, "CONFIG", "SET", "maxmemory", s.maxmemory); err != nil {
		t.Fatal(err)
	}
}
