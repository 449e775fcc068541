package classify_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
)

const sseChunk = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}` + "\n\n"

// sseThenError answers 200 with one chunk, then the error event event.
func sseThenError(event string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("x-ratelimit-reset-tokens", "6m0s")
		_, _ = io.WriteString(w, sseChunk)
		_, _ = io.WriteString(w, "data: "+event+"\n\n")
	}
}

// TestDefaultMidStream covers errors that arrive inside a 200 stream: go-openai
// returns an *APIError with status 0, classified by type and code.
func TestDefaultMidStream(t *testing.T) {
	tests := []struct {
		name  string
		event string
		exp   classify.Verdict
	}{
		{"server_error", `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`,
			transient(classify.ReasonUpstream5xx, false, 0)},
		{"rate_limit_exceeded", `{"error":{"message":"Rate limit reached","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			transient(classify.ReasonRateLimited, true, 0)},
		{"overloaded_error type", `{"error":{"message":"Overloaded","type":"overloaded_error"}}`,
			transient(classify.ReasonOverloaded, true, 0)},
		{"numeric code 503", `{"error":{"message":"The model is overloaded.","code":503}}`,
			transient(classify.ReasonOverloaded, true, 0)},
		{"numeric code not a status", `{"error":{"message":"odd","code":12345}}`,
			transient(classify.ReasonUnknown, false, 0)},
		{"context_length_exceeded", `{"error":{"message":"too long","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			permanent(classify.ReasonContextLength)},
		{"content_filter", `{"error":{"message":"filtered","type":null,"code":"content_filter"}}`,
			permanent(classify.ReasonContentFiltered)},
		{"invalid_request_error", `{"error":{"message":"bad","type":"invalid_request_error","code":null}}`,
			suspect(classify.ReasonInvalidRequest)},
		{"unknown type and code", `{"error":{"message":"something","type":"mystery","code":null}}`,
			transient(classify.ReasonUnknown, false, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, sseThenError(tc.event))
			err := callStream(t, newClient(t, srv.URL+"/v1", srv.Client(), false))
			var apiErr *openai.APIError
			if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 0 {
				t.Fatalf("want a mid-stream *openai.APIError with status 0, got %T %v", err, err)
			}
			assertVerdict(t, tc.exp, classify.Default(err), err)
		})
	}
}

// TestDefaultMidStreamDrop: the connection dies after the first chunk.
func TestDefaultMidStreamDrop(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sseChunk)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the server drops the connection
	})
	err := callStream(t, newClient(t, srv.URL+"/v1", srv.Client(), false))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("want io.ErrUnexpectedEOF, got %T %v", err, err)
	}
	assertVerdict(t, transient(classify.ReasonNetwork, false, 0), classify.Default(err), err)
}

// TestDefaultMidStreamCanceled: the caller cancels while reading the stream.
func TestDefaultMidStreamCanceled(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sseChunk)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	c := newClient(t, srv.URL+"/v1", srv.Client(), false)
	ctx, cancel := context.WithCancel(t.Context())
	req := chatRequest()
	req.Stream = true
	stream, err := c.CreateChatCompletionStream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.Close() })
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	_, err = stream.Recv()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %T %v", err, err)
	}
	exp := classify.Verdict{Class: classify.ClassCanceled, Reason: classify.ReasonCanceled}
	assertVerdict(t, exp, classify.Default(err), err)
}
