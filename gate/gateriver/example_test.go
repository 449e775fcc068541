package gateriver_test

import (
	"log"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateriver"
)

// Every worker's jobs run under the gate, keyed by kind and ID (the
// default); Options.Job keys them by document instead.
func ExampleNew() {
	g, err := gate.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}), gate.Options{Cooldown: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	cfg := &river.Config{
		Queues:     map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}},
		Middleware: []rivertype.Middleware{gateriver.New(g, gateriver.Options{})},
	}
	_ = cfg // river.NewClient(riverpgxv5.New(pool), cfg), with cfg.Workers set
}
