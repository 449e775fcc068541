package classify_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
)

// ValidationError is an application error: the model's answer did not match
// the required format.
type ValidationError struct{ Field string }

func (e *ValidationError) Error() string { return "invalid model output: " + e.Field }

// A custom rule in front of Default: output that fails validation is worth a
// few retries (the gate's MaxAttempts turns repeated failures into a
// permanent mark); everything else falls through to Default.
func ExampleChain() {
	classifyFn := classify.Chain(
		func(err error) (classify.Verdict, bool) {
			var v *ValidationError
			if errors.As(err, &v) {
				return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonBadOutput}, true
			}
			return classify.Verdict{}, false
		},
		// A self-hosted server that answers 400 when its queue is full.
		classify.StatusRule(http.StatusBadRequest, classify.Verdict{Class: classify.ClassTransient, Reason: "queue_full"}),
	)

	for _, err := range []error{
		fmt.Errorf("summarize: %w", &ValidationError{Field: "title"}),
		&openai.RequestError{HTTPStatusCode: http.StatusBadRequest},
		&openai.APIError{HTTPStatusCode: http.StatusUnauthorized, Code: "invalid_api_key"},
	} {
		v := classifyFn(err)
		fmt.Println(v.Class, v.Reason)
	}
	// Output:
	// transient bad_output
	// transient queue_full
	// systemic auth
}

func ExampleParseRetryHint() {
	h := http.Header{}
	h.Set("x-ratelimit-reset-requests", "1s")
	h.Set("x-ratelimit-reset-tokens", "6m0s")
	d, ok := classify.ParseRetryHint(h, time.Now())
	fmt.Println(d, ok)

	h.Set("Retry-After", "1.5")
	d, ok = classify.ParseRetryHint(h, time.Now())
	fmt.Println(d, ok)
	// Output:
	// 6m0s true
	// 1.5s true
}

// Application code marks its own errors; marks win over every other rule.
func ExamplePermanent() {
	err := classify.Permanent(fmt.Errorf("document %d is empty", 42))
	v := classify.Default(err)
	fmt.Println(v.Class, v.Reason)
	// Output: permanent permanent
}

// A go-openai stream: an error event in the middle of the stream comes out
// of Recv as an *openai.APIError without a status, which Default decides
// by its type and code, as it would the same error outside a stream.
func ExampleDefault_stream() {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hel"}}]}`+"\n\n")
		io.WriteString(w, `data: {"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM).","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`+"\n\n")
	}))
	defer provider.Close()
	cfg := openai.DefaultConfig("sk-...")
	cfg.BaseURL = provider.URL + "/v1"
	client := openai.NewClientWithConfig(cfg)
	ctx := context.Background()

	summarize := func(ctx context.Context) error {
		stream, err := client.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{
			Model:    openai.GPT4o,
			Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "Summarize doc-1."}},
		})
		if err != nil {
			return err
		}
		defer stream.Close()
		for {
			chunk, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err // an error event mid-stream: Default reads it
			}
			_ = chunk // use the chunk
		}
	}

	v := classify.Default(summarize(ctx))
	fmt.Println(v.Class, v.Reason, "provider-wide:", v.ProviderWide)
	// Output:
	// transient rate_limited provider-wide: true
}
