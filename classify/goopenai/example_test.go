package goopenai_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/classify/goopenai"
)

// Wire a Transport into go-openai so classify.Default sees the retry hint
// headers.
func ExampleTransport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("retry-after-ms", "2500")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
	}))
	defer srv.Close()

	cfg := openai.DefaultConfig("sk-...")
	cfg.BaseURL = srv.URL + "/v1"
	cfg.HTTPClient = &goopenai.Transport{Doer: cfg.HTTPClient}
	client := openai.NewClientWithConfig(cfg)

	_, err := client.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model:    openai.GPT4o,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}},
	})
	v := classify.Default(err)
	fmt.Println(v.Class, v.Reason, v.ProviderWide, v.RetryAfter)

	var apiErr *openai.APIError // go-openai's error is still there
	fmt.Println(errors.As(err, &apiErr), apiErr.Code)
	// Output:
	// transient rate_limited true 2.5s
	// true rate_limit_exceeded
}
