package classify_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/retrygate/retrygate/classify"
)

// failingBody fails every read with err.
type failingBody struct{ err error }

func (b failingBody) Read([]byte) (int, error) { return 0, b.err }
func (b failingBody) Close() error             { return nil }

func TestReadHTTPError(t *testing.T) {
	// OpenAI's 429 for an exhausted quota (testdata/corpus/openai.json,
	// from the Vercel AI SDK's fixture), with headers OpenAI documents
	// (x-ratelimit-reset-requests: platform.openai.com/docs/guides/rate-limits;
	// x-request-id: the API reference's "Debugging requests") and the
	// Cloudflare cookie its responses carry.
	h := header("Retry-After", "20", "X-Ratelimit-Reset-Requests", "1s", "X-Request-Id", "req_123", "Set-Cookie", "__cf_bm=x")

	t.Run("status, hint headers, body, type and code", func(t *testing.T) {
		resp := &http.Response{StatusCode: 429, Header: h, Body: io.NopCloser(strings.NewReader(openAIQuota))}
		he, err := classify.ReadHTTPError(resp)
		if err != nil {
			t.Fatal(err)
		}
		exp := http.Header{"Retry-After": {"20"}, "X-Ratelimit-Reset-Requests": {"1s"}}
		if he.StatusCode != 429 || len(he.Header) != len(exp) || he.Header.Get("Retry-After") != "20" || he.Header.Get("X-Ratelimit-Reset-Requests") != "1s" {
			t.Errorf("got status %d, header %v; want 429 and only the hint headers %v", he.StatusCode, he.Header, exp)
		}
		if string(he.Body) != openAIQuota || he.Type != "insufficient_quota" || he.Code != "insufficient_quota" || he.Err != nil {
			t.Errorf("got body %q, type %q, code %q, Err %v", he.Body, he.Type, he.Code, he.Err)
		}
		assertVerdict(t, systemic(classify.ReasonQuotaExhausted, true), classify.Default(he), he)
	})
	t.Run("the body is bounded to 1 MiB", func(t *testing.T) {
		big := io.MultiReader(strings.NewReader(`{"error":{"message":"`), bytes.NewReader(bytes.Repeat([]byte("x"), 4<<20)))
		he, err := classify.ReadHTTPError(&http.Response{StatusCode: 500, Body: io.NopCloser(big)})
		if err != nil || len(he.Body) != 1<<20 {
			t.Fatalf("read %d bytes (err %v), want 1 MiB", len(he.Body), err)
		}
	})
	t.Run("a read error keeps the status and headers", func(t *testing.T) {
		he, err := classify.ReadHTTPError(&http.Response{StatusCode: 503, Header: h, Body: failingBody{syscall.ECONNRESET}})
		if err != syscall.ECONNRESET || he == nil || he.StatusCode != 503 || he.Header.Get("Retry-After") != "20" || he.Body != nil {
			t.Fatalf("got %#v, %v", he, err)
		}
	})
	t.Run("no body", func(t *testing.T) {
		he, err := classify.ReadHTTPError(&http.Response{StatusCode: 502})
		if err != nil || he.StatusCode != 502 || he.Header != nil || he.Body != nil {
			t.Fatalf("got %#v, %v", he, err)
		}
	})
}
