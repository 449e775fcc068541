package anthropicsdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/alicebob/miniredis/v2"
	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/classify/sdk/anthropicsdk"
	"github.com/retrygate/retrygate/gate"
)

// The official SDK wrapped by the gate: its own retries off, its errors
// classified by Rule. The organisation ran out of credits: a billing
// problem, so the job is neither failed nor charged an attempt.
func Example() {
	var upstream atomic.Int32
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		upstream.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`)
	}))
	defer provider.Close()

	client := anthropic.NewClient(
		option.WithAPIKey("sk-ant-..."),
		option.WithBaseURL(provider.URL),
		option.WithMaxRetries(0), // the gate decides when to call again
	)

	mr, err := miniredis.Run() // or your Redis
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	g, err := gate.New(redis.NewClient(&redis.Options{Addr: mr.Addr()}), gate.Options{
		Classify: classify.Chain(anthropicsdk.Rule),
	})
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	for range 2 {
		msg, err := gate.Call(ctx, g, "doc-1", func(ctx context.Context, _ *gate.Lease) (*anthropic.Message, error) {
			return client.Messages.New(ctx, anthropic.MessageNewParams{
				Model:     anthropic.Model("claude-sonnet-4-5"),
				MaxTokens: 1024,
				Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Summarize doc-1."))},
			})
		})
		var ce *gate.CallError
		switch {
		case errors.As(err, &ce):
			v := ce.Verdict
			fmt.Println("called:", v.Class, v.Reason, "provider-wide:", v.ProviderWide, "job failed:", ce.State == gate.Failed)
		case errors.Is(err, gate.ErrFailed):
			fmt.Println("job failed")
		case err != nil:
			fmt.Println("refused without calling the provider:", errors.Is(err, gate.ErrUpstreamCooling) || errors.Is(err, gate.ErrCoolingDown))
		default:
			fmt.Println(msg.Content[0].Text)
		}
	}
	fmt.Println("upstream calls:", upstream.Load())
	// Output:
	// called: systemic quota_exhausted provider-wide: true job failed: false
	// refused without calling the provider: true
	// upstream calls: 1
}

// A Messages stream: an error event mid-stream (here the overload
// Anthropic's streaming docs show) ends the stream with an
// *anthropic.Error, which Rule reads as the same error outside a stream.
func ExampleRule_stream() {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\n"+
			`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`+"\n\n")
		io.WriteString(w, "event: error\n"+`data: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`+"\n\n")
	}))
	defer provider.Close()
	client := anthropic.NewClient(option.WithAPIKey("sk-ant-..."), option.WithBaseURL(provider.URL), option.WithMaxRetries(0))
	ctx := context.Background()

	summarize := func(ctx context.Context) error {
		stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model:     anthropic.Model("claude-sonnet-4-5"),
			MaxTokens: 1024,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Summarize doc-1."))},
		})
		defer stream.Close()
		for stream.Next() {
			_ = stream.Current() // use the event
		}
		return stream.Err() // an error event mid-stream: Rule reads it
	}

	v := classify.Chain(anthropicsdk.Rule)(summarize(ctx))
	fmt.Println(v.Class, v.Reason, "provider-wide:", v.ProviderWide)
	// Output:
	// transient overloaded provider-wide: true
}
