package gateslog_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateprom"
	"github.com/retrygate/retrygate/gate/gateslog"
)

// observers sends each event to every observer in turn.
type observers []gate.Observer

func (obs observers) Observe(ctx context.Context, e gate.Event) {
	for _, o := range obs {
		o.Observe(ctx, e)
	}
}

// Metrics and logs together, and the start-up check of Redis.
func Example_withMetrics() {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		panic(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	// The example logs without what changes from run to run (the time, the
	// fence, the hold time, the error text naming miniredis's port).
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, "fence", "held", "err":
				return slog.Attr{}
			}
			return a
		},
	}))

	prom := gateprom.New(gateprom.Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(prom)
	logs := gateslog.New(logger, gateslog.Options{HashJobs: true})

	g, err := gate.New(rdb, gate.Options{
		Upstream: "openai:prod-key",
		Observer: observers{prom, logs},
	})
	if err != nil {
		log.Fatal(err)
	}
	// At start-up: warn if Redis may evict cooldown keys. Each warning is
	// also logged through the observer.
	if _, err := g.Check(ctx); err != nil {
		log.Print(err) // Redis unreachable: the gate fails closed meanwhile
	}

	if err := g.Do(ctx, "doc-42", func(context.Context, *gate.Lease) error { return nil }); err != nil {
		log.Print(err)
	}

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				fmt.Println(mf.GetName(), c.GetValue())
			}
		}
	}
	// Output:
	// level=WARN msg="retrygate warning" event=warning upstream=openai:prod-key reason=config_unchecked
	// level=INFO msg="retrygate acquired" event=acquired job_hash=6767023ae1fd50c6 upstream=openai:prod-key state=running attempt=1
	// level=INFO msg="retrygate settled" event=settled job_hash=6767023ae1fd50c6 upstream=openai:prod-key state=ready attempt=1
	// retrygate_acquisitions_total 1
	// retrygate_line_calls_total 1
	// retrygate_settles_total 1
	// retrygate_warnings_total 1
}
