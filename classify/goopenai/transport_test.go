package goopenai_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/classify/goopenai"
)

// Real responses, each with its source.
var (
	// OpenAI's 429 for an exhausted quota, from the Vercel AI SDK's
	// fixture (testdata/corpus/openai.json):
	// https://github.com/vercel/ai/blob/ed857f50f112e23930b0c2dd8d532cc8bebbc911/packages/openai/src/responses/__fixtures__/openai-error.1.json
	openAIQuota = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	// OpenAI's 404 for a model the key cannot use:
	// https://github.com/rd-1-2022/ai-openai-helloworld/issues/9
	openAIModelNotFound = "{\"error\":{\"message\":\"The model `gpt-4o` does not exist or you do not have access to it.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}"
	// OpenAI's 503 when a model is overloaded:
	// https://github.com/waylaidwanderer/node-chatgpt-api/issues/34
	openAIOverloaded = `{"error":{"message":"That model is currently overloaded with other requests. You can retry your request, or contact us through our help center at help.openai.com if the error persists. (Please include the request ID 169bee8d  in your message.)","type":"server_error","param":null,"code":null}}`
	// OpenAI's 400 for a prompt over the context window:
	// https://github.com/mckaywrigley/chatbot-ui/issues/102
	openAIContextLength = `{"error":{"message":"This model's maximum context length is 4097 tokens. However, you requested 4120 tokens (3120 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	// nginx's own 502 page, as a proxy in front of a model server sends
	// it (src/http/ngx_http_special_response.c: ngx_http_error_502_page
	// and ngx_http_error_tail).
	nginxBadGateway = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
	// Groq's documented rate-limit headers on a 429, and the body of a
	// real Groq 429 (https://console.groq.com/docs/rate-limits,
	// https://github.com/Aider-AI/aider/issues/3265).
	groqHeader = map[string]string{
		"retry-after": "2", "x-ratelimit-limit-requests": "14400", "x-ratelimit-limit-tokens": "18000",
		"x-ratelimit-remaining-requests": "14370", "x-ratelimit-remaining-tokens": "17997",
		"x-ratelimit-reset-requests": "2m59.56s", "x-ratelimit-reset-tokens": "7.66s",
	}
	groqRateLimited = `{"error":{"message":"Rate limit reached for model gemma2-9b-it in organization ... service tier on_demand on tokens per minute (TPM): Limit 15000, Used 11972, Requested 4351. Please try again in 5.289s. Visit https://console.groq.com/docs/rate-limits for more information.","type":"tokens","code":"rate_limit_exceeded"}}`
)

// server answers every request with status, header and body.
func server(t *testing.T, status int, header map[string]string, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// chat makes one call with a real go-openai client whose HTTPClient is
// doer, and returns its error.
func chat(t *testing.T, ctx context.Context, baseURL string, doer openai.HTTPDoer) error {
	t.Helper()
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = baseURL
	cfg.HTTPClient = doer
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := openai.NewClientWithConfig(cfg).CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model:    openai.GPT4o,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}},
	})
	if err == nil {
		t.Fatal("call succeeded, want an error")
	}
	return err
}

// TestTransportKeepsGoOpenAIErrors: callers who inspect go-openai's error
// types see exactly what go-openai would have returned, and the
// *classify.HTTPError around it holds the hint headers and the body.
func TestTransportKeepsGoOpenAIErrors(t *testing.T) {
	// retry-after-ms is the header OpenAI's SDKs read first
	// (openai-python's _base_client.py, _calculate_retry_timeout).
	srv := server(t, 429, map[string]string{"retry-after-ms": "2500", "x-request-id": "req_123"}, openAIQuota)
	ctx := context.Background()
	bare := chat(t, ctx, srv.URL+"/v1", srv.Client())
	wrapped := chat(t, ctx, srv.URL+"/v1", &goopenai.Transport{Doer: srv.Client()})

	if exp, got := bare.Error(), wrapped.Error(); exp != got {
		t.Errorf("message changed:\nexp %q\ngot %q", exp, got)
	}
	var apiErr *openai.APIError
	if !errors.As(wrapped, &apiErr) {
		t.Fatalf("errors.As(%T, *openai.APIError) = false", wrapped)
	}
	if exp, got := "insufficient_quota", apiErr.Code; exp != got {
		t.Errorf("APIError.Code: exp %v, got %v", exp, got)
	}
	if exp, got := 429, apiErr.HTTPStatusCode; exp != got {
		t.Errorf("APIError.HTTPStatusCode: exp %d, got %d", exp, got)
	}
	var he *classify.HTTPError
	if !errors.As(wrapped, &he) {
		t.Fatalf("errors.As(%T, *classify.HTTPError) = false", wrapped)
	}
	if exp, got := "2500", he.Header.Get("retry-after-ms"); exp != got {
		t.Errorf("captured retry-after-ms: exp %q, got %q", exp, got)
	}
	if exp, got := openAIQuota, string(he.Body); exp != got {
		t.Errorf("HTTPError.Body: exp %q, got %q", exp, got)
	}
	if exp, got := "insufficient_quota", he.Type; exp != got {
		t.Errorf("HTTPError.Type: exp %q, got %q", exp, got)
	}
	exp := classify.Verdict{Class: classify.ClassSystemic, Reason: classify.ReasonQuotaExhausted, ProviderWide: true}
	checkVerdict(t, exp, wrapped)

	html := server(t, 502, map[string]string{"Content-Type": "text/html"}, nginxBadGateway)
	bareHTML := chat(t, ctx, html.URL+"/v1", html.Client())
	wrappedHTML := chat(t, ctx, html.URL+"/v1", &goopenai.Transport{Doer: html.Client()})
	if exp, got := bareHTML.Error(), wrappedHTML.Error(); exp != got {
		t.Errorf("RequestError message changed:\nexp %q\ngot %q", exp, got)
	}
	var reqErr *openai.RequestError
	if !errors.As(wrappedHTML, &reqErr) || reqErr.HTTPStatusCode != 502 || string(reqErr.Body) != nginxBadGateway {
		t.Errorf("errors.As(*openai.RequestError) on %v: want status 502 and the page, got %+v", wrappedHTML, reqErr)
	}
}

// checkVerdict compares classify.Default's verdict for err with exp,
// Evidence aside.
func checkVerdict(t *testing.T, exp classify.Verdict, err error) {
	t.Helper()
	got := classify.Default(err)
	got.Evidence = ""
	if exp != got {
		t.Errorf("verdict for %v (%T):\nexp %+v\ngot %+v", err, err, exp, got)
	}
}

// doerFunc is a fake HTTP endpoint.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

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
	req, err := http.NewRequest(http.MethodGet, "http://fake.test/v1/models", nil)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("success passes through", func(t *testing.T) {
		body := &trackBody{r: strings.NewReader("{}")}
		resp, err := (&goopenai.Transport{Doer: fakeResponse(200, body)}).Do(req)
		if err != nil || resp == nil || resp.Body != body || body.closed {
			t.Fatalf("got %v %v, body closed %v", resp, err, body.closed)
		}
	})
	t.Run("failure closes the body", func(t *testing.T) {
		body := &trackBody{r: strings.NewReader(openAIOverloaded)}
		resp, err := (&goopenai.Transport{Doer: fakeResponse(503, body)}).Do(req)
		if resp != nil || err == nil || !body.closed {
			t.Fatalf("got %v %v, body closed %v", resp, err, body.closed)
		}
		checkVerdict(t, classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonOverloaded, ProviderWide: true, RetryAfter: 2 * time.Second}, err)
	})
	t.Run("400, the lowest failure, is an error", func(t *testing.T) {
		body := &trackBody{r: strings.NewReader(openAIContextLength)}
		resp, err := (&goopenai.Transport{Doer: fakeResponse(400, body)}).Do(req)
		var apiErr *openai.APIError
		if resp != nil || !errors.As(err, &apiErr) || apiErr.Code != "context_length_exceeded" || apiErr.HTTPStatusCode != 400 {
			t.Fatalf("got %v, %v: want go-openai's APIError for the 400", resp, err)
		}
		checkVerdict(t, classify.Verdict{Class: classify.ClassPermanent, Reason: classify.ReasonContextLength}, err)
	})
	t.Run("body read error keeps the status", func(t *testing.T) {
		body := &trackBody{readErr: syscall.ECONNRESET}
		_, err := (&goopenai.Transport{Doer: fakeResponse(503, body)}).Do(req)
		if !errors.Is(err, syscall.ECONNRESET) || !body.closed {
			t.Fatalf("want the read error wrapped and the body closed, got %v, closed %v", err, body.closed)
		}
		checkVerdict(t, classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonOverloaded, ProviderWide: true, RetryAfter: 2 * time.Second}, err)
	})
	t.Run("nil body", func(t *testing.T) {
		_, err := (&goopenai.Transport{Doer: fakeResponse(502, nil)}).Do(req)
		var reqErr *openai.RequestError
		if !errors.As(err, &reqErr) || reqErr.HTTPStatusCode != 502 {
			t.Fatalf("want a RequestError with status 502, got %T %v", err, err)
		}
		checkVerdict(t, classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonUpstream5xx, RetryAfter: 2 * time.Second}, err)
	})
	t.Run("huge body is bounded", func(t *testing.T) {
		big := io.NopCloser(io.MultiReader(strings.NewReader(`{"error":{"message":"`), bytes.NewReader(bytes.Repeat([]byte("x"), 4<<20))))
		_, err := (&goopenai.Transport{Doer: fakeResponse(429, big)}).Do(req)
		var reqErr *openai.RequestError
		if !errors.As(err, &reqErr) || len(reqErr.Body) > 1<<20 {
			t.Fatalf("want a RequestError with at most 1 MiB of body, got %T", err)
		}
		checkVerdict(t, classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonRateLimited, ProviderWide: true, RetryAfter: 2 * time.Second}, err)
	})
	t.Run("a Doer's error passes through", func(t *testing.T) {
		_, err := (&goopenai.Transport{Doer: doerFunc(func(*http.Request) (*http.Response, error) { return nil, syscall.ECONNREFUSED })}).Do(req)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("zero value uses http.DefaultClient", func(t *testing.T) {
		srv := server(t, 404, nil, openAIModelNotFound)
		r, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		var zero goopenai.Transport
		_, err = zero.Do(r)
		checkVerdict(t, classify.Verdict{Class: classify.ClassSystemic, Reason: classify.ReasonModelNotFound}, err)
	})
}

// budgets collects the budgets a Transport reports.
type budgets struct {
	mu  sync.Mutex
	got []classify.Budget
}

func (b *budgets) add(x classify.Budget) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, x)
}

// listen returns a context that reports to b.
func (b *budgets) listen() context.Context {
	return classify.WithBudgetFunc(context.Background(), b.add)
}

// one returns the only budget reported.
func (b *budgets) one(t *testing.T) classify.Budget {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.got) != 1 {
		t.Fatalf("want one budget reported, got %d: %+v", len(b.got), b.got)
	}
	return b.got[0]
}

// checkGroqBudget checks the budget of groqHeader read between before and
// after; retryIn is what the body's message said.
func checkGroqBudget(t *testing.T, b classify.Budget, before, after time.Time, retryIn time.Duration) {
	t.Helper()
	if b.At.Before(before) || b.At.After(after) {
		t.Fatalf("read at %v, outside [%v, %v]", b.At, before, after)
	}
	if b.Tokens.Remaining != 17997 || b.Tokens.Limit != 18000 || !b.Tokens.Reset.Equal(b.At.Add(7670*time.Millisecond)) ||
		b.Requests.Remaining != 14370 || b.RetryIn != retryIn {
		t.Fatalf("got %+v, want 17997 of 18000 tokens left resetting in 7.66s (stated to 10 ms: 7.67s), 14370 requests left, retry in %v", b, retryIn)
	}
}

// The Budget of every response reaches the function on the request's
// context through go-openai, as it does through classify.Transport.
func TestTransportReportsBudget(t *testing.T) {
	t.Run("success", func(t *testing.T) {
		var got budgets
		srv := server(t, 200, groqHeader, `{}`)
		req, err := http.NewRequestWithContext(got.listen(), http.MethodPost, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		resp, err := (&goopenai.Transport{}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		checkGroqBudget(t, got.one(t), before, time.Now(), 0)
	})
	t.Run("429 through go-openai: the message's wait and the error as before", func(t *testing.T) {
		var got budgets
		srv := server(t, 429, groqHeader, groqRateLimited)
		before := time.Now()
		err := chat(t, got.listen(), srv.URL, &goopenai.Transport{})
		checkGroqBudget(t, got.one(t), before, time.Now(), 5289*time.Millisecond)
		checkVerdict(t, classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonRateLimited, ProviderWide: true, RetryAfter: 2 * time.Second}, err)
		var he *classify.HTTPError
		if !errors.As(err, &he) || string(he.Body) != groqRateLimited {
			t.Fatalf("want the whole body in the error after the budget read it, got %#v", he)
		}
	})
	t.Run("a response with no limit and no wait is not reported", func(t *testing.T) {
		var got budgets
		srv := server(t, 503, nil, openAIOverloaded)
		_ = chat(t, got.listen(), srv.URL, &goopenai.Transport{})
		if len(got.got) != 0 {
			t.Fatalf("reported %+v", got.got)
		}
	})
}
