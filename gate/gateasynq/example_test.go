package gateasynq_test

import (
	"context"
	"encoding/json"
	"log"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateasynq"
)

// A task per document: tasks for one document share the gate's lock,
// cooldown and failed mark, keyed from the payload.
func ExampleMiddleware() {
	g, err := gate.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}), gate.Options{Cooldown: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	byDocument := func(_ context.Context, t *asynq.Task) (string, error) {
		var p struct {
			Doc string `json:"doc"`
		}
		if err := json.Unmarshal(t.Payload(), &p); err != nil {
			return "", err // archives the task
		}
		return "summarise:" + p.Doc, nil
	}
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: "localhost:6379"}, gateasynq.Config(asynq.Config{Concurrency: 10}))
	mux := asynq.NewServeMux()
	mux.Use(gateasynq.Middleware(g, gateasynq.Options{Job: byDocument}))
	mux.HandleFunc("summarise", func(ctx context.Context, t *asynq.Task) error {
		return nil // the model call; its error is classified by the gate
	})
	_ = srv // srv.Run(mux)
}
