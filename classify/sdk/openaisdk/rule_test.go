package openaisdk_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/classify/sdk/openaisdk"
	"github.com/retrygate/retrygate/internal/testkit/corpus"
)

func newClient(t *testing.T, h http.Handler) openai.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return openai.NewClient(
		option.WithAPIKey("sk-test"),
		option.WithBaseURL(srv.URL+"/v1/"),
		option.WithHTTPClient(srv.Client()),
		option.WithMaxRetries(0),
	)
}

var params = openai.ChatCompletionNewParams{
	Model:    openai.ChatModelGPT4o,
	Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
}

func chat(t *testing.T, c openai.Client) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Chat.Completions.New(ctx, params)
	if err == nil {
		t.Fatal("call succeeded, want an error")
	}
	return err
}

func stream(t *testing.T, c openai.Client) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := c.Chat.Completions.NewStreaming(ctx, params)
	defer s.Close()
	for s.Next() {
	}
	if s.Err() == nil {
		t.Fatal("stream succeeded, want an error")
	}
	return s.Err()
}

// TestCorpus replays every real provider response of classify's corpus to
// the official OpenAI SDK: Rule must reach the verdict classify.Default
// reaches through go-openai and goopenai.Transport.
func TestCorpus(t *testing.T) {
	corpus.ReplayRule(t, "../../testdata/corpus", openaisdk.Rule, newClient, map[string]func(*testing.T, openai.Client) error{"chat": chat, "stream": stream})
}

func TestRulePasses(t *testing.T) {
	for _, err := range []error{nil, errors.New("x"), context.Canceled, &classify.HTTPError{StatusCode: 429}} {
		if v, ok := openaisdk.Rule(err); ok {
			t.Errorf("Rule(%v) decided %+v, want a pass", err, v)
		}
	}
}

func TestRuleKeepsMarks(t *testing.T) {
	client := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	err := classify.Permanent(chat(t, client))
	v, ok := openaisdk.Rule(err)
	if exp := (classify.Verdict{Class: classify.ClassPermanent, Reason: classify.ReasonMarkedPermanent, Evidence: "mark:permanent"}); !ok || v != exp {
		t.Errorf("Rule on a marked SDK error = %+v %v, want %+v true", v, ok, exp)
	}
}

// TestRuleRestoresBody: for a body the SDK keeps only in Response.Body,
// Rule reads it and puts the same bytes back, so a second classification,
// and the SDK's own DumpResponse, still see them.
func TestRuleRestoresBody(t *testing.T) {
	const arrayBody = `[{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}]`
	client := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, arrayBody)
	}))
	err := chat(t, client)
	exp := classify.Verdict{Class: classify.ClassSystemic, Reason: classify.ReasonAuth, ProviderWide: true, Evidence: "errorinfo:API_KEY_INVALID"}
	for i := range 2 {
		if v, _ := openaisdk.Rule(err); v != exp {
			t.Errorf("classification %d: exp %+v, got %+v", i+1, exp, v)
		}
	}
	var e *openai.Error
	if !errors.As(err, &e) || !strings.Contains(string(e.DumpResponse(true)), arrayBody) {
		t.Errorf("the response body is gone after Rule")
	}
}
