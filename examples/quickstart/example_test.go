package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify/goopenai"
	"github.com/retrygate/retrygate/gate"
)

// Wrap one model call with gate.Call, as main does (the README's
// quickstart is main.go, whole), against an embedded Redis and a local
// model; the examples below take summarise through every outcome.
func Example() {
	rdb, cfg, _, stop := localBackends(answerOK) // embedded Redis, local model
	defer stop()
	ctx := context.Background()

	g, err := gate.New(rdb, gate.Options{Cooldown: time.Minute})
	if err != nil {
		log.Fatal(err) // invalid options: a programming error
	}
	cfg.HTTPClient = &goopenai.Transport{Doer: cfg.HTTPClient} // keeps retry-after headers
	client := openai.NewClientWithConfig(cfg)

	fmt.Println(summarise(ctx, g, client, "document-42"))
	// Output:
	// A supplier contract: 400 units a month, 90 days' notice.
}

// A rate-limited call cools the job down for the provider's hint when that
// is longer than the gate's cooldown; retries meanwhile are refused without
// calling the model.
func Example_cooldown() {
	rdb, cfg, calls, stop := localBackends(answerRateLimited) // 429, retry-after-ms: 30000
	defer stop()
	ctx := context.Background()

	g, err := gate.New(rdb, gate.Options{Cooldown: 10 * time.Second, Backoff: gate.Backoff{Jitter: -1}})
	if err != nil {
		log.Fatal(err)
	}
	cfg.HTTPClient = &goopenai.Transport{Doer: cfg.HTTPClient}
	client := openai.NewClientWithConfig(cfg)

	for try := 1; try <= 3; try++ {
		fmt.Printf("try %d: %s\n", try, summarise(ctx, g, client, "document-42"))
	}
	fmt.Println("model calls:", calls.Load())
	// Output:
	// try 1: Not now: retry in 30s.
	// try 2: Not now: retry in 30s.
	// try 3: Not now: retry in 30s.
	// model calls: 1
}

// A prompt over the model's context window fails for good: the job is
// marked failed, and retries are refused without calling the model.
func Example_permanentFailure() {
	rdb, cfg, calls, stop := localBackends(answerTooLong) // 400 context_length_exceeded
	defer stop()
	ctx := context.Background()

	g, err := gate.New(rdb, gate.Options{})
	if err != nil {
		log.Fatal(err)
	}
	cfg.HTTPClient = &goopenai.Transport{Doer: cfg.HTTPClient}
	client := openai.NewClientWithConfig(cfg)

	for try := 1; try <= 2; try++ {
		fmt.Printf("try %d: %s\n", try, summarise(ctx, g, client, "document-42"))
	}
	fmt.Println("model calls:", calls.Load())
	// Output:
	// try 1: This document cannot be summarised; retrying will not help.
	// try 2: This document cannot be summarised; retrying will not help.
	// model calls: 1
}

// A response with no choices is a transient failure, not a crash: the job
// cools down.
func Example_noChoices() {
	rdb, cfg, calls, stop := localBackends(answerNoChoices)
	defer stop()
	ctx := context.Background()

	g, err := gate.New(rdb, gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{Jitter: -1}})
	if err != nil {
		log.Fatal(err)
	}
	cfg.HTTPClient = &goopenai.Transport{Doer: cfg.HTTPClient}
	client := openai.NewClientWithConfig(cfg)

	fmt.Println(summarise(ctx, g, client, "document-42"))
	fmt.Println(summarise(ctx, g, client, "document-42"))
	fmt.Println("model calls:", calls.Load())
	// Output:
	// Not now: retry in 1m0s.
	// Not now: retry in 1m0s.
	// model calls: 1
}

// With Redis unreachable the gate fails closed: no model call, and the
// user is asked to come back.
func Example_redisDown() {
	_, cfg, calls, stop := localBackends(answerOK)
	defer stop()
	ctx := context.Background()
	log.SetOutput(io.Discard) // the operator's log line is not part of the output
	defer log.SetOutput(os.Stderr)

	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}) // nothing listens there
	defer rdb.Close()
	g, err := gate.New(rdb, gate.Options{})
	if err != nil {
		log.Fatal(err)
	}
	client := openai.NewClientWithConfig(cfg)

	fmt.Println(summarise(ctx, g, client, "document-42"))
	fmt.Println("model calls:", calls.Load())
	// Output:
	// The service is busy; please try again shortly.
	// model calls: 0
}
