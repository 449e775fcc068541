package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

func main() {
	if err := run(context.Background(), os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, w io.Writer) error {
	var rdb *redis.Client
	cfg := openai.DefaultConfig(getenv("OPENAI_API_KEY"))
	if getenv("OPENAI_API_KEY") == "" {
		var stop func()
		rdb, cfg, _, stop = localBackends(false)
		defer stop()
	} else {
		opts, err := redis.ParseURL(getenv("REDIS_URL")) // e.g. redis://localhost:6379/0
		if err != nil {
			return fmt.Errorf("REDIS_URL: %w", err)
		}
		rdb = redis.NewClient(opts)
		defer rdb.Close()
	}

	g, err := gate.New(rdb, gate.Options{Cooldown: time.Minute})
	if err != nil {
		return err
	}
	cfg.HTTPClient = &classify.Transport{Doer: cfg.HTTPClient} // keeps retry-after headers
	client := openai.NewClientWithConfig(cfg)

	resp, err := gate.Call(ctx, g, "document-42", func(ctx context.Context, _ *gate.Lease) (openai.ChatCompletionResponse, error) {
		return client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
			Model:    openai.GPT4oMini,
			Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Summarise document 42."}},
		})
	})
	if wait, ok := gate.RetryAfter(err); ok {
		fmt.Fprintln(w, "not now: retry in", wait.Round(time.Second)) // no model call until then
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(w, resp.Choices[0].Message.Content)
	return nil
}
