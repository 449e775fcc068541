package classify_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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

// roundTripFunc is a fake http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

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

// listen returns a request for url whose context reports to b.
func (b *budgets) listen(t *testing.T, url string) *http.Request {
	t.Helper()
	ctx := classify.WithBudgetFunc(context.Background(), b.add)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
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

// Groq's documented rate-limit headers on a 429, and the body of a real
// Groq 429 (testdata/corpus/groq.json: https://console.groq.com/docs/rate-limits,
// https://github.com/Aider-AI/aider/issues/3265).
var (
	groqHeader = map[string]string{
		"retry-after": "2", "x-ratelimit-limit-requests": "14400", "x-ratelimit-limit-tokens": "18000",
		"x-ratelimit-remaining-requests": "14370", "x-ratelimit-remaining-tokens": "17997",
		"x-ratelimit-reset-requests": "2m59.56s", "x-ratelimit-reset-tokens": "7.66s",
	}
	groqRateLimited = `{"error":{"message":"Rate limit reached for model gemma2-9b-it in organization ... service tier on_demand on tokens per minute (TPM): Limit 15000, Used 11972, Requested 4351. Please try again in 5.289s. Visit https://console.groq.com/docs/rate-limits for more information.","type":"tokens","code":"rate_limit_exceeded"}}`
)

// checkGroqBudget checks the budget of groqHeader read between before and
// after; retryIn is what the body's message said.
func checkGroqBudget(t *testing.T, b classify.Budget, before, after time.Time, retryIn time.Duration) {
	t.Helper()
	if b.At.Before(before) || b.At.After(after) {
		t.Fatalf("read at %v, outside [%v, %v]", b.At, before, after)
	}
	exp := classify.Quota{Reported: true, Remaining: 17997, Limit: 18000, Reset: b.At.Add(7670 * time.Millisecond)} // "7.66s", stated to 10 ms: 10 ms more
	if !sameQuota(b.Tokens, exp) || b.Requests.Remaining != 14370 || b.RetryIn != retryIn {
		t.Fatalf("got %+v, want tokens %+v, 14370 requests left, retry in %v", b, exp, retryIn)
	}
}

func TestTransportReportsBudget(t *testing.T) {
	t.Run("RoundTrip, success: the response untouched", func(t *testing.T) {
		var got budgets
		body := &trackBody{r: strings.NewReader("{}")}
		sent := &http.Response{StatusCode: 200, Header: header("x-ratelimit-remaining-tokens", "17997", "x-ratelimit-limit-tokens", "18000", "x-ratelimit-reset-tokens", "7.66s", "x-ratelimit-remaining-requests", "14370"), Body: body}
		tr := &classify.Transport{Base: roundTripFunc(func(*http.Request) (*http.Response, error) { return sent, nil })}
		before := time.Now()
		resp, err := tr.RoundTrip(got.listen(t, "http://fake.test/v1/chat/completions"))
		if err != nil || resp != sent || resp.Body != body {
			t.Fatalf("got %v, %v: want the response as sent", resp, err)
		}
		checkGroqBudget(t, got.one(t), before, time.Now(), 0)
	})
	t.Run("RoundTrip, 429: the body reads the same after the peek", func(t *testing.T) {
		var got budgets
		// The message comes first; the body runs past the 1 MiB peek.
		bodyText := groqRateLimited + strings.Repeat(" ", 2<<20)
		body := &trackBody{r: strings.NewReader(bodyText)}
		h := make(http.Header)
		for k, v := range groqHeader {
			h.Set(k, v)
		}
		tr := &classify.Transport{Base: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 429, Header: h, Body: body}, nil
		})}
		before := time.Now()
		resp, err := tr.RoundTrip(got.listen(t, "http://fake.test/v1/chat/completions"))
		if err != nil || resp.StatusCode != 429 {
			t.Fatalf("got %v, %v: want the 429 handed back", resp, err)
		}
		checkGroqBudget(t, got.one(t), before, time.Now(), 5289*time.Millisecond)
		read, err := io.ReadAll(resp.Body)
		if err != nil || string(read) != bodyText {
			t.Fatalf("body read %d bytes (err %v), want the %d sent", len(read), err, len(bodyText))
		}
		if resp.Body.Close(); !body.closed {
			t.Fatal("closing the response did not close the body")
		}
	})
	t.Run("RoundTrip, 429 and nobody listening: the body is not read", func(t *testing.T) {
		body := &trackBody{r: strings.NewReader(groqRateLimited)}
		tr := &classify.Transport{Base: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 429, Header: header("x-ratelimit-remaining-tokens", "0"), Body: body}, nil
		})}
		req, _ := http.NewRequest(http.MethodPost, "http://fake.test/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.Body != body {
			t.Fatalf("got %v, %v: want the body as sent", resp, err)
		}
	})
	t.Run("RoundTrip, a body that fails to read fails the client's read", func(t *testing.T) {
		var got budgets
		body := &trackBody{readErr: syscall.ECONNRESET}
		tr := &classify.Transport{Base: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 503, Header: header("x-ratelimit-remaining-requests", "3"), Body: body}, nil
		})}
		resp, err := tr.RoundTrip(got.listen(t, "http://fake.test/"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(resp.Body); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("want the read error, got %v", err)
		}
		if b := got.one(t); b.Requests.Remaining != 3 || b.RetryIn != 0 {
			t.Fatalf("got %+v", b)
		}
	})
	t.Run("RoundTrip, a transport error passes through unreported", func(t *testing.T) {
		var got budgets
		tr := &classify.Transport{Base: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, syscall.ECONNREFUSED })}
		if _, err := tr.RoundTrip(got.listen(t, "http://fake.test/")); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("got %v", err)
		}
		if len(got.got) != 0 {
			t.Fatalf("reported %+v", got.got)
		}
	})
	t.Run("a response with no limit and no wait is not reported", func(t *testing.T) {
		var got budgets
		srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) { reply{500, nil, openAIServerError}.write(w) })
		resp, err := (&http.Client{Transport: &classify.Transport{}}).Do(got.listen(t, srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(got.got) != 0 {
			t.Fatalf("reported %+v", got.got)
		}
	})
}

// Through net/http with the RoundTripper form, against a server sending
// Groq's 429: the budget is reported and the client reads the whole body.
func TestTransportBudgetThroughNetHTTP(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) { reply{429, groqHeader, groqRateLimited}.write(w) })
	var got budgets
	before := time.Now()
	resp, err := (&http.Client{Transport: &classify.Transport{}}).Do(got.listen(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	checkGroqBudget(t, got.one(t), before, time.Now(), 5289*time.Millisecond)
	if body, err := io.ReadAll(resp.Body); err != nil || string(body) != groqRateLimited {
		t.Fatalf("body %q, %v", body, err)
	}
}

func TestWithBudgetFunc(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) { reply{200, groqHeader, `{}`}.write(w) })
	var outer, inner budgets
	ctx := classify.WithBudgetFunc(context.Background(), outer.add)

	hc := &http.Client{Transport: &classify.Transport{}}
	req, _ := http.NewRequestWithContext(classify.WithBudgetFunc(ctx, inner.add), http.MethodGet, srv.URL, nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(inner.got) != 1 || len(outer.got) != 0 {
		t.Fatalf("the innermost function wins: inner got %d, outer %d", len(inner.got), len(outer.got))
	}

	req, _ = http.NewRequestWithContext(classify.WithBudgetFunc(ctx, nil), http.MethodGet, srv.URL, nil)
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(outer.got) != 0 {
		t.Fatalf("a nil function turns reporting off: outer got %d", len(outer.got))
	}
}

// A zero Transport sends RoundTrip's requests with http.DefaultTransport.
func TestTransportRoundTripZeroValue(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) { reply{404, nil, openAIModelNotFound}.write(w) })
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	var zero classify.Transport
	resp, err := zero.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != 404 || string(body) != openAIModelNotFound {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
}

// A gate, or any caller, learns every response's budget from the context of
// the requests; fn needs no code for it.
func ExampleWithBudgetFunc() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Ratelimit-Remaining-Requests", "41")
		w.Header().Set("X-Ratelimit-Limit-Requests", "60")
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()

	ctx := classify.WithBudgetFunc(context.Background(), func(b classify.Budget) {
		fmt.Println("requests left:", b.Requests.Remaining, "of", b.Requests.Limit)
	})
	hc := &http.Client{Transport: &classify.Transport{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
	if err != nil {
		panic(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	// Output: requests left: 41 of 60
}

// The wait a failed response's message states, as Budget.RetryIn: real
// messages (the corpus in testdata/corpus cites each) and what each says.
func TestTransportReadsTheStatedWait(t *testing.T) {
	for _, tc := range []struct {
		name, source string
		status       int
		body         string
		exp          time.Duration // 0: nothing reported
	}{
		{"OpenAI, milliseconds", "https://github.com/binary-husky/gpt_academic/issues/1213", 429,
			`{"error":{"message":"Rate limit reached for gpt-4 in organization org-RQ60lN38PaYNYPNEiYrSqwvj on tokens per min. Limit: 10000 / min. Please try again in 6ms. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`,
			6 * time.Millisecond},
		{"Groq, seconds with a fraction", "https://github.com/Aider-AI/aider/issues/3265", 429, groqRateLimited, 5289 * time.Millisecond},
		{"Azure, retry after N seconds", "https://learn.microsoft.com/en-us/answers/questions/2140040/requests-to-the-chatcompletions-create-operation-u", 429,
			`{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-01-preview have exceeded token rate limit of your current AIServices S0 pricing tier. Please retry after 37 seconds. Please contact Azure support service if you would like to further increase the default rate limit."}}`,
			37 * time.Second},
		{"Azure, try again in N seconds", "https://github.com/microsoft/copilot-camp/issues/551", 429,
			`{"error":{"code":"429","message":"Rate limit is exceeded. Try again in 2 seconds."}}`, 2 * time.Second},
		{"Gemini, retry in a fractional duration", "https://github.com/googleapis/python-genai/issues/1875", 429,
			`{"error":{"code":429,"message":"You exceeded your current quota... Please retry in 53.016342224s.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"53s"}]}}`,
			53016342224 * time.Nanosecond},
		{"LocalAI 503, retry after", "https://github.com/mudler/LocalAI/blob/82c191afadf5f005281e798ccfa0ffd0d5805030/core/http/app.go#L82-L89", 503,
			`{"error":{"code":503,"message":"backend inference capacity reached (max_concurrent=4); retry after 3s"}}`, 3 * time.Second},
		{"Anthropic, later is no wait", "https://github.com/anthropics/claude-code/issues/71670", 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your account's rate limit. Please try again later."}}`, 0},
		{"Anthropic, a wait named by a header is no wait in the message", "Anthropic's Compliance API error reference, 429 example (platform.claude.com/docs)", 429,
			`{"error":{"type":"rate_limit_error","message":"Compliance API rate limit of 600 requests per minute per parent organization has been exceeded. Retry after the time indicated by the retry-after header. Quote the request-id response header when contacting Anthropic support."}}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got budgets
			send := func(*http.Request) (*http.Response, error) {
				return &http.Response{StatusCode: tc.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(tc.body))}, nil
			}
			_, _ = (&classify.Transport{Base: roundTripFunc(send)}).RoundTrip(got.listen(t, "http://fake.test/"))
			switch {
			case tc.exp == 0 && len(got.got) != 0:
				t.Fatalf("reported %+v for a message stating no wait (%s)", got.got, tc.source)
			case tc.exp != 0:
				if b := got.one(t); b.RetryIn != tc.exp {
					t.Fatalf("RetryIn %v, want %v (%s)", b.RetryIn, tc.exp, tc.source)
				}
			}
		})
	}
}

// 400 is the lowest failure: its message is read for a wait like any
// other failure's (Azure's message of "Azure, try again in N seconds"
// above, at 400).
func TestTransportReadsTheWaitOfA400(t *testing.T) {
	var got budgets
	send := func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{},
			Body: io.NopCloser(strings.NewReader(`{"error":{"code":"429","message":"Rate limit is exceeded. Try again in 2 seconds."}}`))}, nil
	}
	_, _ = (&classify.Transport{Base: roundTripFunc(send)}).RoundTrip(got.listen(t, "http://fake.test/"))
	if b := got.one(t); b.RetryIn != 2*time.Second {
		t.Fatalf("RetryIn %v, want 2s", b.RetryIn)
	}
}
