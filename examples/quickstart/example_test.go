package main

import (
	"context"
	"fmt"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// Wrap one model call with gate.Call. The README's quickstart is this
// example's body from gate.New on.
func Example() {
	rdb, cfg, _, stop := localBackends(false) // embedded Redis, local model
	defer stop()
	ctx := context.Background()

	g, _ := gate.New(rdb, gate.Options{Cooldown: time.Minute})
	cfg.HTTPClient = &classify.Transport{Doer: cfg.HTTPClient} // keeps retry-after headers
	client := openai.NewClientWithConfig(cfg)

	resp, err := gate.Call(ctx, g, "document-42", func(ctx context.Context, _ *gate.Lease) (openai.ChatCompletionResponse, error) {
		return client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
			Model:    openai.GPT4oMini,
			Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Summarise document 42."}},
		})
	})
	if wait, ok := gate.RetryAfter(err); ok {
		fmt.Println("not now: retry in", wait.Round(time.Second)) // no model call until then
		return
	}
	fmt.Println(resp.Choices[0].Message.Content)
	// Output:
	// A supplier contract: 400 units a month, 90 days' notice.
}

// A rate-limited call cools the job down for the provider's hint when that
// is longer than the gate's cooldown; retries meanwhile are refused without
// calling the model.
func Example_cooldown() {
	rdb, cfg, calls, stop := localBackends(true) // the model answers 429, retry-after-ms: 30000
	defer stop()
	ctx := context.Background()

	g, _ := gate.New(rdb, gate.Options{Cooldown: 10 * time.Second, NoJitter: true})
	cfg.HTTPClient = &classify.Transport{Doer: cfg.HTTPClient}
	client := openai.NewClientWithConfig(cfg)

	for try := 1; try <= 3; try++ {
		_, err := gate.Call(ctx, g, "document-42", func(ctx context.Context, _ *gate.Lease) (openai.ChatCompletionResponse, error) {
			return client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
				Model:    openai.GPT4oMini,
				Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Summarise document 42."}},
			})
		})
		wait, _ := gate.RetryAfter(err)
		fmt.Printf("try %d: retry in %v\n", try, wait.Round(time.Second))
	}
	fmt.Println("model calls:", calls.Load())
	// Output:
	// try 1: retry in 30s
	// try 2: retry in 30s
	// try 3: retry in 30s
	// model calls: 1
}
