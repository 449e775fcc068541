package gateotel_test

import (
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateotel"
)

func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	// The global providers, as set up by the program's OpenTelemetry SDK.
	obs, err := gateotel.New(gateotel.Options{})
	if err != nil {
		log.Fatal(err)
	}
	g, err := gate.New(rdb, gate.Options{Upstream: "openai:prod", Observer: obs})
	if err != nil {
		log.Fatal(err)
	}
	_ = g // g.Do(ctx, job, fn) under the caller's span records the gate's spans
}
