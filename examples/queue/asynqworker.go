package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hibiken/asynq"
	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateasynq"
)

const taskSummarise = "summarise"

// summariseTask is the task for one document.
func summariseTask(doc string) *asynq.Task {
	body, _ := json.Marshal(docPayload{Doc: doc})
	return asynq.NewTask(taskSummarise, body, asynq.MaxRetry(10))
}

type docPayload struct {
	Doc string `json:"doc"`
}

// taskDocument keys the gate by document, so two tasks for one document
// share its lock, cooldown and failed mark.
func taskDocument(_ context.Context, t *asynq.Task) (string, error) {
	var p docPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return "", err
	}
	return "summarise:" + p.Doc, nil
}

// asynqServer is an asynq worker whose tasks run under g.
func asynqServer(redis asynq.RedisConnOpt, cfg asynq.Config, g *gate.Gate, client *openai.Client, save saveFunc) (*asynq.Server, *asynq.ServeMux) {
	srv := asynq.NewServer(redis, gateasynq.Config(cfg))
	mux := asynq.NewServeMux()
	mux.Use(gateasynq.Middleware(g, gateasynq.Options{Job: taskDocument}))
	mux.HandleFunc(taskSummarise, func(ctx context.Context, t *asynq.Task) error {
		var p docPayload
		if err := json.Unmarshal(t.Payload(), &p); err != nil {
			return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
		}
		summary, err := summarise(ctx, client, p.Doc)
		if err != nil {
			return err
		}
		return save(ctx, p.Doc, summary)
	})
	return srv, mux
}
