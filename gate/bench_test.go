package gate_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/redistest"
)

// Benchmarks run against a real redis-server: round trips are the cost.
// Compare ratios within one run (make bench), never absolute numbers.

var releaseScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

func benchClient(b *testing.B) *redis.Client {
	b.Helper()
	srv := redistest.Server(b)
	return srv.Client(b)
}

func reportTrips(b *testing.B, rt *roundTrips, start int64) {
	b.ReportMetric(float64(rt.n.Load()-start)/float64(b.N), "trips/op")
}

func BenchmarkDo(b *testing.B) {
	rdb := benchClient(b)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	ctx := context.Background()
	ok := func(context.Context, *gate.Lease) error { return nil }

	// The floor: a hand-written SET NX PX and compare-and-delete pair on
	// the same client.
	b.Run("baseline-setnx", func(b *testing.B) {
		_ = releaseScript.Load(ctx, rdb).Err()
		start := rt.n.Load()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			tok := strconv.Itoa(i)
			if !rdb.SetNX(ctx, "bench:base", tok, time.Minute).Val() {
				b.Fatal("not acquired")
			}
			if err := releaseScript.Run(ctx, rdb, []string{"bench:base"}, tok).Err(); err != nil {
				b.Fatal(err)
			}
		}
		reportTrips(b, rt, start)
	})
	b.Run("success", func(b *testing.B) {
		g, _ := gate.New(rdb, gate.Options{Prefix: "bench-s"})
		_ = g.Do(ctx, "job", ok) // load the scripts
		start := rt.n.Load()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := g.Do(ctx, "job", ok); err != nil {
				b.Fatal(err)
			}
		}
		reportTrips(b, rt, start)
	})
	b.Run("baseline-get", func(b *testing.B) {
		rdb.Set(ctx, "bench:get", "c:x", time.Hour)
		start := rt.n.Load()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_ = rdb.Get(ctx, "bench:get").Val()
		}
		reportTrips(b, rt, start)
	})
	b.Run("blocked", func(b *testing.B) {
		g, _ := gate.New(rdb, gate.Options{Prefix: "bench-b", Cooldown: time.Hour})
		_ = g.Do(ctx, "job", func(context.Context, *gate.Lease) error { return errors.New("fail") })
		start := rt.n.Load()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := g.Do(ctx, "job", ok); !errors.Is(err, gate.ErrCoolingDown) {
				b.Fatal(err)
			}
		}
		reportTrips(b, rt, start)
	})
	b.Run("coalesced", func(b *testing.B) {
		g, _ := gate.New(rdb, gate.Options{Prefix: "bench-c"})
		l, err := g.Acquire(ctx, "job")
		if err != nil {
			b.Fatal(err)
		}
		defer l.Succeed(ctx)
		start := rt.n.Load()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := g.Do(ctx, "job", ok); !errors.Is(err, gate.ErrInFlight) {
				b.Fatal(err)
			}
		}
		reportTrips(b, rt, start)
	})
	b.Run("success-parallel", func(b *testing.B) {
		g, _ := gate.New(rdb, gate.Options{Prefix: "bench-p"})
		_ = g.Do(ctx, "warm", ok)
		var n int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			job := "job-" + strconv.FormatInt(atomicAdd(&n), 10)
			for pb.Next() {
				if err := g.Do(ctx, job, ok); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
