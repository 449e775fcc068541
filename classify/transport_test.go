package classify_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
)

// trackBody records whether it was closed and can fail its reads.
type trackBody struct {
	r       io.Reader
	readErr error
	closed  bool
}

func (b *trackBody) Read(p []byte) (int, error) {
	if b.readErr != nil {
		return 0, b.readErr
	}
	return b.r.Read(p)
}

func (b *trackBody) Close() error { b.closed = true; return nil }

func fakeResponse(status int, body io.ReadCloser) doerFunc {
	return func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: http.Header{"Retry-After": {"2"}}, Body: body, Request: r}, nil
	}
}

func TestTransport(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "http://fuzz.test/v1/models", nil)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("success passes through", func(t *testing.T) {
		body := &trackBody{r: strings.NewReader("{}")}
		resp, err := (&classify.Transport{Doer: fakeResponse(200, body)}).Do(req)
		if err != nil || resp == nil || resp.Body != body || body.closed {
			t.Fatalf("got %v %v, body closed %v", resp, err, body.closed)
		}
	})
	t.Run("failure closes the body", func(t *testing.T) {
		body := &trackBody{r: strings.NewReader(openAIServerError)}
		resp, err := (&classify.Transport{Doer: fakeResponse(500, body)}).Do(req)
		if resp != nil || err == nil || !body.closed {
			t.Fatalf("got %v %v, body closed %v", resp, err, body.closed)
		}
	})
	t.Run("body read error keeps the status", func(t *testing.T) {
		body := &trackBody{readErr: syscall.ECONNRESET}
		_, err := (&classify.Transport{Doer: fakeResponse(503, body)}).Do(req)
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("want the read error wrapped, got %v", err)
		}
		assertVerdict(t, transient(classify.ReasonOverloaded, true, 2*time.Second), classify.Default(err), err)
	})
	t.Run("nil body", func(t *testing.T) {
		_, err := (&classify.Transport{Doer: fakeResponse(502, nil)}).Do(req)
		assertVerdict(t, transient(classify.ReasonUpstream5xx, false, 2*time.Second), classify.Default(err), err)
	})
	t.Run("huge body is bounded", func(t *testing.T) {
		big := io.NopCloser(io.MultiReader(strings.NewReader(`{"error":{"message":"`), bytes.NewReader(bytes.Repeat([]byte("x"), 4<<20))))
		_, err := (&classify.Transport{Doer: fakeResponse(429, big)}).Do(req)
		var reqErr *openai.RequestError
		if !errors.As(err, &reqErr) || len(reqErr.Body) > 1<<20 {
			t.Fatalf("want a RequestError with at most 1 MiB of body, got %T", err)
		}
		assertVerdict(t, transient(classify.ReasonRateLimited, true, 2*time.Second), classify.Default(err), err)
	})
	t.Run("zero value uses http.DefaultClient", func(t *testing.T) {
		srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) { reply{404, nil, openAIModelNotFound}.write(w) })
		r, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		var zero classify.Transport
		_, err = zero.Do(r)
		assertVerdict(t, systemic(classify.ReasonModelNotFound, false), classify.Default(err), err)
	})
}
