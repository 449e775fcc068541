package gateprom_test

import (
	"context"
	"fmt"
	"log"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateprom"
)

func ExampleNew() {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		panic(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()

	obs := gateprom.New(gateprom.Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)
	g, err := gate.New(rdb, gate.Options{Upstream: "openai:prod", Observer: obs})
	if err != nil {
		log.Fatal(err)
	}

	if err := g.Do(context.Background(), "doc-42", func(context.Context, *gate.Lease) error { return nil }); err != nil {
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
	// retrygate_acquisitions_total 1
	// retrygate_line_calls_total 1
	// retrygate_settles_total 1
}
