package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
	"github.com/retrygate/retrygate/internal/testkit/syncbuf"
)

// TestRunSaysWhatBecameOfEachDocument runs the command's asynq worker as a
// user would: every document gets a line. A summary is printed; a
// document the model cannot take (a prompt over the context window) is
// archived and says why; a document submitted again after its summary is
// completed without a model call, and says so (both were dropped without
// a word).
func TestRunSaysWhatBecameOfEachDocument(t *testing.T) {
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req openai.ChatCompletionRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		doc := strings.TrimSuffix(strings.TrimPrefix(req.Messages[0].Content, "Summarise "), ".")
		w.Header().Set("Content-Type", "application/json")
		if doc == "too-long" {
			// The body OpenAI returns for a prompt over the context window, as
			// reported in https://github.com/mckaywrigley/chatbot-ui/issues/102.
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"This model's maximum context length is 4097 tokens. However, you requested 4120 tokens (3120 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`)
			return
		}
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Summary of %s."},"finish_reason":"stop"}]}`, doc)
	}))
	t.Cleanup(model.Close)
	env := map[string]string{
		"REDIS_URL":       "redis://" + redistest.Server(t).Addr(),
		"OPENAI_API_KEY":  "sk-test",
		"OPENAI_BASE_URL": model.URL + "/v1",
	}
	work := func(docs []string, want ...string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		out := &syncbuf.Buffer{}
		done := make(chan error, 1)
		go func() { done <- run(ctx, "asynq", func(k string) string { return env[k] }, docs, out) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		}()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			all := true
			for _, w := range want {
				all = all && strings.Contains(out.String(), w)
			}
			if all {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 30 s the output is\n%s\nwant lines %q", out.String(), want)
			}
		}
	}
	work([]string{"doc-1", "too-long"},
		"doc-1: Summary of doc-1.\n",
		"too-long: cannot be summarised (context_length_exceeded); it will not be retried\n")
	work([]string{"doc-1", "too-long"},
		"doc-1: already summarised; this job completes without a model call\n",
		"too-long: failed for good earlier (context_length_exceeded); this job is not run\n")
}
