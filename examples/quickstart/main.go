// Command quickstart summarises a document with go-openai under a gate:
// a failed call cools the job down instead of letting every retry call the
// model again.
//
//	REDIS_URL=redis://localhost:6379/0 OPENAI_API_KEY=sk-... go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/classify/goopenai"
	"github.com/retrygate/retrygate/gate"
)

func main() {
	opts, err := redis.ParseURL(os.Getenv("REDIS_URL")) // e.g. redis://localhost:6379/0
	if err != nil {
		log.Fatalf("REDIS_URL: %v", err)
	}
	logging.Disable() // go-redis's own pool lines: the gate's error says it once
	rdb := redis.NewClient(opts)
	g, err := gate.New(rdb, gate.Options{Cooldown: time.Minute})
	if err != nil {
		log.Fatal(err) // invalid options: a programming error
	}
	defer rdb.Close()
	defer func() {
		// A success Redis refused is remembered by this process alone:
		// written before it exits, it is not paid for twice.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := g.Close(ctx); err != nil {
			log.Print(err)
		}
	}()

	cfg := openai.DefaultConfig(os.Getenv("OPENAI_API_KEY"))
	if base := os.Getenv("OPENAI_BASE_URL"); base != "" {
		cfg.BaseURL = base // an OpenAI-compatible server
	}
	cfg.HTTPClient = &goopenai.Transport{Doer: cfg.HTTPClient} // keeps retry-after headers
	client := openai.NewClientWithConfig(cfg)

	fmt.Println(summarise(context.Background(), g, client, "document-42"))
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
	var ce *gate.CallError
	if errors.As(err, &ce) && ce.Verdict.Class == classify.ClassSystemic {
		// A bad key, an exhausted quota, a closed account: users are asked
		// to wait, and no retry helps until an operator acts.
		log.Printf("summarise %s: %s (evidence %s): %v", doc, ce.Verdict.Reason, ce.Verdict.Evidence, ce.Err)
	}
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
