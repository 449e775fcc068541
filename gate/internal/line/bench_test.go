package line

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// trips counts a client's round trips: each command sent alone and each
// pipeline.
type trips struct{ n atomic.Int64 }

func (c *trips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// BenchmarkHundredThousandWaiting: 100,000 callers from 4 processes wait
// in one upstream's line (3 classes, 100 tenants), each with its job's
// mark as the gate writes it (JoinMarked: the place any process reads by
// job), then the budget gives
// turns 100 at a time until every caller has had its own. It reports the
// Redis memory per waiting caller (INFO memory's used_memory, and MEMORY
// USAGE of the line's keys), the round trips per admitted call (every
// join, turn and collection of every process), and what one process's
// renewal of its lease costs while it holds 25,000 places (one round
// trip, sent every Lease/3, whatever the places).
func BenchmarkHundredThousandWaiting(b *testing.B) {
	const callers, procs, batch = 100_000, 4, 100
	srv := redistest.Server(b)
	for range b.N {
		admin := srv.Client(b)
		ctx := context.Background()
		if err := admin.FlushAll(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		before := usedMemory(b, admin)
		count := &trips{}
		ls := make([]*Line, procs)
		for i := range ls {
			c := srv.Client(b)
			c.AddHook(count)
			ls[i] = process(b, c, "bench", Config{Lease: time.Minute})
		}
		tks := make([]*Ticket, 0, callers)
		b.StartTimer()
		for i := range callers {
			c := Caller{Class: i % 3, Tenant: "tenant-" + strconv.Itoa(i%100)}
			tk, err := ls[i%procs].JoinMarked(ctx, c, time.Now().Add(10*time.Minute), 0, keyspace.LineMark("bench", "up", keyspace.Job("bench", "job-"+strconv.Itoa(i))), nil)
			if err != nil {
				b.Fatal(err)
			}
			tks = append(tks, tk)
		}
		b.StopTimer()
		after := usedMemory(b, admin)
		var usage int64
		keys := []string{ls[0].keys.Line, ls[0].keys.Owners, ls[0].keys.Meta}
		for _, l := range ls {
			keys = append(keys, l.keys.Owners+":"+l.owner)
		}
		for _, k := range keys {
			n, err := admin.MemoryUsage(ctx, k, 0).Result()
			if err != nil {
				b.Fatal(err)
			}
			usage += n
		}
		// The marks, one key per caller, alike: one's usage for each.
		mark, err := admin.MemoryUsage(ctx, keyspace.LineMark("bench", "up", keyspace.Job("bench", "job-0")), 0).Result()
		if err != nil {
			b.Fatal(err)
		}
		usage += mark * callers
		// One process's renewal of its lease, which keeps its 25,000
		// places: the round trip it sends every Lease/3 while they wait.
		ls[0].collect(ctx, true) // loads the script
		renewStart := time.Now()
		ls[0].collect(ctx, true)
		renew := time.Since(renewStart)
		b.StartTimer()
		given := 0
		for given < callers {
			got, err := ls[given/batch%procs].Turn(ctx, batch)
			if err != nil {
				b.Fatal(err)
			}
			given += len(got)
			if len(got) == 0 {
				b.Fatalf("%d turns given of %d", given, callers)
			}
		}
		for i, tk := range tks {
			select {
			case <-tk.w.granted:
			case <-time.After(time.Minute):
				b.Fatalf("caller %d: no turn", i)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(after-before)/callers, "B/waiting(used_memory)")
		b.ReportMetric(float64(usage)/callers, "B/waiting(MEMORY_USAGE)")
		b.ReportMetric(float64(count.n.Load()-2)/callers, "roundtrips/admitted")
		b.ReportMetric(float64(renew.Nanoseconds()), "ns/renewal")
	}
}

func usedMemory(b *testing.B, c *redis.Client) int64 {
	b.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, ln := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(ln, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no used_memory in INFO memory")
	return 0
}
