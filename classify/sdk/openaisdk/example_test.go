package openaisdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/alicebob/miniredis/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/classify/sdk/openaisdk"
	"github.com/retrygate/retrygate/gate"
)

// The official SDK wrapped by the gate: its own retries off, its errors
// classified by Rule. The provider rate-limits the key and says when to
// come back; the gate keeps the job's retries away from the provider.
func Example() {
	var upstream atomic.Int32
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		upstream.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "20")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM)","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`)
	}))
	defer provider.Close()

	client := openai.NewClient(
		option.WithAPIKey("sk-..."),
		option.WithBaseURL(provider.URL+"/v1/"),
		option.WithMaxRetries(0), // the gate decides when to call again
	)

	mr, err := miniredis.Run() // or your Redis
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	g, err := gate.New(redis.NewClient(&redis.Options{Addr: mr.Addr()}), gate.Options{
		Classify: classify.Chain(openaisdk.Rule),
	})
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	for range 3 {
		out, err := gate.Call(ctx, g, "doc-1", func(ctx context.Context, _ *gate.Lease) (*openai.ChatCompletion, error) {
			return client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model:    openai.ChatModelGPT4o,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Summarize doc-1.")},
			})
		})
		var ce *gate.CallError
		switch {
		case errors.As(err, &ce):
			v := ce.Verdict
			fmt.Println("called:", v.Class, v.Reason, "provider-wide:", v.ProviderWide, "hint:", v.RetryAfter)
		case errors.Is(err, gate.ErrUpstreamCooling), errors.Is(err, gate.ErrCoolingDown): // the key, or the job
			fmt.Println("refused without calling the provider")
		case err != nil:
			fmt.Println("error:", err)
		default:
			fmt.Println(out.Choices[0].Message.Content)
		}
	}
	fmt.Println("upstream calls:", upstream.Load())
	// Output:
	// called: transient rate_limited provider-wide: true hint: 20s
	// refused without calling the provider
	// refused without calling the provider
	// upstream calls: 1
}

// A Responses API stream: "error" and "response.failed" arrive as
// ordinary events and the stream's Err stays nil, so every event goes
// through EventError. The error it returns is classified like the same
// error outside a stream.
func ExampleEventError() {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: response.failed\n"+
			`data: {"type":"response.failed","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"failed","model":"gpt-4o","output":[],"error":{"code":"rate_limit_exceeded","message":"Rate limit reached."}}}`+"\n\n")
	}))
	defer provider.Close()
	client := openai.NewClient(option.WithAPIKey("sk-..."), option.WithBaseURL(provider.URL+"/v1/"), option.WithMaxRetries(0))
	ctx := context.Background()

	summarize := func(ctx context.Context) error {
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: openai.ChatModelGPT4o,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Summarize doc-1.")},
		})
		defer stream.Close()
		for stream.Next() {
			ev := stream.Current()
			if err := openaisdk.EventError(ev); err != nil {
				return err
			}
			_ = ev // use the event
		}
		return stream.Err()
	}

	v := classify.Chain(openaisdk.Rule)(summarize(ctx))
	fmt.Println(v.Class, v.Reason, "provider-wide:", v.ProviderWide)
	// Output:
	// transient rate_limited provider-wide: true
}

// A Chat Completions stream: an error event mid-stream ends the stream
// with a *ssestream.StreamError, which Rule reads.
func ExampleRule_stream() {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hel"}}]}`+"\n\n")
		io.WriteString(w, `data: {"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM).","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`+"\n\n")
	}))
	defer provider.Close()
	client := openai.NewClient(option.WithAPIKey("sk-..."), option.WithBaseURL(provider.URL+"/v1/"), option.WithMaxRetries(0))
	ctx := context.Background()

	summarize := func(ctx context.Context) error {
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:    openai.ChatModelGPT4o,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Summarize doc-1.")},
		})
		defer stream.Close()
		for stream.Next() {
			_ = stream.Current() // use the chunk
		}
		return stream.Err() // an error event mid-stream: Rule reads it
	}

	v := classify.Chain(openaisdk.Rule)(summarize(ctx))
	fmt.Println(v.Class, v.Reason, "provider-wide:", v.ProviderWide)
	// Output:
	// transient rate_limited provider-wide: true
}
