package anthropicsdk_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/classify/sdk/anthropicsdk"
	"github.com/retrygate/retrygate/internal/testkit/corpus"
)

func newClient(t *testing.T, h http.Handler) anthropic.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return anthropic.NewClient(
		option.WithAPIKey("sk-ant-test"),
		option.WithBaseURL(srv.URL),
		option.WithHTTPClient(srv.Client()),
		option.WithMaxRetries(0),
	)
}

var params = anthropic.MessageNewParams{
	Model:     anthropic.Model("claude-sonnet-4-5"),
	MaxTokens: 1024,
	Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
}

func message(t *testing.T, c anthropic.Client) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Messages.New(ctx, params)
	if err == nil {
		t.Fatal("call succeeded, want an error")
	}
	return err
}

func stream(t *testing.T, c anthropic.Client) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := c.Messages.NewStreaming(ctx, params)
	defer s.Close()
	for s.Next() {
	}
	if s.Err() == nil {
		t.Fatal("stream succeeded, want an error")
	}
	return s.Err()
}

// TestCorpus replays every real provider response of classify's corpus to
// the official Anthropic SDK: Rule must reach the verdict classify.Default
// reaches through go-openai and goopenai.Transport.
func TestCorpus(t *testing.T) {
	corpus.ReplayRule(t, "../../testdata/corpus", anthropicsdk.Rule, newClient, map[string]func(*testing.T, anthropic.Client) error{"message": message, "stream": stream})
}

func TestRulePasses(t *testing.T) {
	for _, err := range []error{nil, errors.New("x"), context.DeadlineExceeded, &classify.HTTPError{StatusCode: 529}} {
		if v, ok := anthropicsdk.Rule(err); ok {
			t.Errorf("Rule(%v) decided %+v, want a pass", err, v)
		}
	}
}

func TestRuleKeepsMarks(t *testing.T) {
	client := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(529)
	}))
	err := classify.Systemic(message(t, client))
	v, ok := anthropicsdk.Rule(err)
	if exp := (classify.Verdict{Class: classify.ClassSystemic, Reason: classify.ReasonMarkedSystemic, Evidence: "mark:systemic"}); !ok || v != exp {
		t.Errorf("Rule on a marked SDK error = %+v %v, want %+v true", v, ok, exp)
	}
}
