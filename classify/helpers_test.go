package classify_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/classify/goopenai"
)

// reply is one canned HTTP response.
type reply struct {
	status int
	header map[string]string
	body   string
}

func (r reply) write(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header().Set(k, v)
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(r.status)
	_, _ = io.WriteString(w, r.body)
}

// newServer starts an httptest server for h, closed at cleanup.
func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// newClient returns a real go-openai client for baseURL whose HTTPClient is
// doer wrapped in a goopenai.Transport (unless bare).
func newClient(t *testing.T, baseURL string, doer openai.HTTPDoer, bare bool) *openai.Client {
	t.Helper()
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = baseURL
	cfg.HTTPClient = doer
	if !bare {
		cfg.HTTPClient = &goopenai.Transport{Doer: doer}
	}
	return openai.NewClientWithConfig(cfg)
}

func chatRequest() openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:    openai.GPT4o,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}},
	}
}

// callChat makes one non-streaming call and returns its error.
func callChat(t *testing.T, c *openai.Client) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	_, err := c.CreateChatCompletion(ctx, chatRequest())
	if err == nil {
		t.Fatal("call succeeded, want an error")
	}
	return err
}

// callStream opens a stream and reads it to its first error (io.EOF
// excluded).
func callStream(t *testing.T, c *openai.Client) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	req := chatRequest()
	req.Stream = true
	stream, err := c.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return err
	}
	t.Cleanup(func() { stream.Close() })
	for {
		_, err := stream.Recv()
		if err == io.EOF {
			t.Fatal("stream ended cleanly, want an error")
		}
		if err != nil {
			return err
		}
	}
}

// assertVerdict compares verdicts; an exp without Evidence does not check
// got's (TestEvidence and the corpus do).
func assertVerdict(t *testing.T, exp, got classify.Verdict, err error) {
	t.Helper()
	if exp.Evidence == "" {
		got.Evidence = ""
	}
	if exp != got {
		t.Errorf("verdict for %v (%T):\nexp %+v\ngot %+v", err, err, exp, got)
	}
}

func transient(reason string, pw bool, hint time.Duration) classify.Verdict {
	return classify.Verdict{Class: classify.ClassTransient, Reason: reason, ProviderWide: pw, RetryAfter: hint}
}

func permanent(reason string) classify.Verdict {
	return classify.Verdict{Class: classify.ClassPermanent, Reason: reason}
}

// suspect is a permanent verdict without proof.
func suspect(reason string) classify.Verdict {
	return classify.Verdict{Class: classify.ClassPermanent, Reason: reason, Suspect: true}
}

func systemic(reason string, pw bool) classify.Verdict {
	return classify.Verdict{Class: classify.ClassSystemic, Reason: reason, ProviderWide: pw}
}
