package openaisdk_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/classify/sdk/openaisdk"
)

// sse answers 200 with a text/event-stream body.
func sse(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, body)
	})
}

// A chunk as OpenAI streams it, before the error event.
const firstChunk = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}` + "\n\n"

// TestRuleReadsStreamErrors: an error event in the middle of a Chat
// Completions stream (openai-go's *ssestream.StreamError) gets the verdict
// the same error object gets outside a stream. The error objects are
// OpenAI's own (the corpus's 429 and 400 bodies; the event form is
// openai-go's ssestream test, data: {"error":{...}}).
func TestRuleReadsStreamErrors(t *testing.T) {
	tests := []struct {
		name  string
		event string
		exp   classify.Verdict
	}{
		// The wait its message states ("Please try again in 1s") is the hint.
		{"rate limit", `{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 29000, Requested 1500. Please try again in 1s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonRateLimited, RetryAfter: time.Second, ProviderWide: true, Evidence: "code:rate_limit_exceeded"}},
		{"context length", `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			classify.Verdict{Class: classify.ClassPermanent, Reason: classify.ReasonContextLength, Evidence: "code:context_length_exceeded"}},
		{"server error", `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`,
			classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonUpstream5xx, Evidence: "type:server_error"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := stream(t, newClient(t, sse(firstChunk+"data: "+tc.event+"\n\n")))
			v, ok := openaisdk.Rule(err)
			if !ok || v != tc.exp {
				t.Errorf("Rule(%v) = %+v %v, want %+v", err, v, ok, tc.exp)
			}
			if got := classify.Chain(openaisdk.Rule)(err); got != tc.exp {
				t.Errorf("Chain(Rule) = %+v, want %+v", got, tc.exp)
			}
		})
	}
}

// responseEvents streams Responses API events, ending with last.
func responseEvents(last string) string {
	return "event: response.created\n" +
		`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-4o","output":[]}}` + "\n\n" +
		last
}

// TestEventError: the Responses API reports a failure as an "error" or
// "response.failed" event and the SDK's stream ends with a nil Err; the
// loop of EventError's doc returns an error the classifier reads as it
// reads the same error outside a stream. Event shapes from the API
// reference (ResponseErrorEvent, ResponseFailedEvent) and openai-go's
// ResponseErrorCode values.
func TestEventError(t *testing.T) {
	tests := []struct {
		name  string
		event string
		exp   classify.Verdict
	}{
		{"response.failed rate limit", "event: response.failed\n" +
			`data: {"type":"response.failed","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"failed","model":"gpt-4o","output":[],"error":{"code":"rate_limit_exceeded","message":"Rate limit reached for gpt-4o on tokens per min (TPM)."}}}` + "\n\n",
			classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonRateLimited, ProviderWide: true, Evidence: "code:rate_limit_exceeded"}},
		{"response.failed server error", "event: response.failed\n" +
			`data: {"type":"response.failed","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"failed","model":"gpt-4o","output":[],"error":{"code":"server_error","message":"The model failed to generate a response."}}}` + "\n\n",
			classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonUpstream5xx, Evidence: "type:server_error"}},
		{"response.failed image content policy", "event: response.failed\n" +
			`data: {"type":"response.failed","sequence_number":1,"response":{"id":"resp_1","object":"response","status":"failed","model":"gpt-4o","output":[],"error":{"code":"image_content_policy_violation","message":"The image violates the content policy."}}}` + "\n\n",
			classify.Verdict{Class: classify.ClassPermanent, Reason: classify.ReasonContentFiltered, Evidence: "code:image_content_policy_violation"}},
		{"error event", "event: error\n" +
			`data: {"type":"error","sequence_number":1,"code":"rate_limit_exceeded","message":"Rate limit reached.","param":null}` + "\n\n",
			classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonRateLimited, ProviderWide: true, Evidence: "code:rate_limit_exceeded"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(t, sse(responseEvents(tc.event)))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: openai.ChatModelGPT4o, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
			defer s.Close()
			var err error
			for s.Next() {
				if err = openaisdk.EventError(s.Current()); err != nil {
					break
				}
			}
			if s.Err() != nil {
				t.Fatalf("the SDK's stream failed itself: %v", s.Err())
			}
			if err == nil {
				t.Fatal("EventError found no failure in the stream")
			}
			if got := classify.Chain(openaisdk.Rule)(err); got != tc.exp {
				t.Errorf("verdict for %v: %+v, want %+v", err, got, tc.exp)
			}
			var he *classify.HTTPError
			if !errors.As(err, &he) || he.StatusCode != 0 {
				t.Errorf("EventError = %T %v, want a *classify.HTTPError without a status", err, err)
			}
		})
	}
	var none responses.ResponseStreamEventUnion
	if err := openaisdk.EventError(none); err != nil {
		t.Errorf("EventError of an ordinary event = %v, want nil", err)
	}
}
