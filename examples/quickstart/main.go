package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
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
		rdb, cfg, _, stop = localBackends(answerOK)
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

	fmt.Fprintln(w, summarise(ctx, g, client, "document-42"))
	return nil
}

// summarise runs one model call for doc under the gate and says what a
// user should see, for every outcome.
func summarise(ctx context.Context, g *gate.Gate, client *openai.Client, doc string) string {
	text, err := gate.Call(ctx, g, doc, func(ctx context.Context, _ *gate.Lease) (string, error) {
		resp, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
			Model:    openai.GPT4oMini,
			Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Summarise " + doc + "."}},
		})
		if err != nil {
			return "", err
		}
		if len(resp.Choices) == 0 {
			return "", classify.Transient(errors.New("the model returned no choices"), 0)
		}
		return resp.Choices[0].Message.Content, nil
	})
	if wait, ok := gate.RetryAfter(err); ok {
		return fmt.Sprintf("Not now: retry in %v.", wait.Round(time.Second)) // no model call until then
	}
	switch {
	case err == nil:
		return text
	case errors.Is(err, gate.ErrFailed):
		return "This document cannot be summarised; retrying will not help."
	case errors.Is(err, gate.ErrUnavailable), errors.Is(err, gate.ErrRedisRefused):
		log.Printf("summarise %s: %v", doc, err) // for operators, never for users
		return "The service is busy; please try again shortly."
	default:
		log.Printf("summarise %s: %v", doc, err)
		return "Something went wrong."
	}
}
