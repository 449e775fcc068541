package llmfake_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/internal/testkit/llmfake"
)

// clock is a hand-driven clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 4, 21, 14, 38, 7, 250e6, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newProvider(t *testing.T, c llmfake.Config) *llmfake.Provider {
	t.Helper()
	p, err := llmfake.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// chat is a request body with a prompt of chars characters (chars/4
// tokens) and maxTokens (omitted when negative).
func chat(chars, maxTokens int) string {
	body := map[string]any{"model": "gpt-4o", "messages": []map[string]string{{"role": "user", "content": strings.Repeat("x", chars)}}}
	if maxTokens >= 0 {
		body["max_tokens"] = maxTokens
	}
	b, _ := json.Marshal(body)
	return string(b)
}

// call sends body to p in-process.
func call(p http.Handler, body string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	p.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
	return w
}

// wantHeaders checks that h holds exp; a "" value must be absent.
func wantHeaders(t *testing.T, h http.Header, exp map[string]string) {
	t.Helper()
	for k, v := range exp {
		if got := h.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
}

// openAIErr decodes an OpenAI error body.
func openAIErr(t *testing.T, w *httptest.ResponseRecorder) (typ, code, message string) {
	t.Helper()
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	return e.Error.Type, code, e.Error.Message
}

func TestOpenAIHeadersOnEveryAnswer(t *testing.T) {
	clk := newClock()
	p := newProvider(t, llmfake.Config{RPM: 60, TPM: 150000, Now: clk.Now})
	w := call(p, chat(64, -1)) // 16 tokens
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	// One request of 60/min refills in 1 s; 16 tokens of 150000/min (2500/s)
	// in 6.4 ms, sent rounded up to the millisecond.
	wantHeaders(t, w.Header(), map[string]string{
		"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59", "x-ratelimit-reset-requests": "1s",
		"x-ratelimit-limit-tokens": "150000", "x-ratelimit-remaining-tokens": "149984", "x-ratelimit-reset-tokens": "7ms",
		"Date": "Tue, 21 Apr 2026 14:38:07 GMT",
	})
	var resp struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || len(resp.Choices) != 1 || resp.Usage.PromptTokens != 16 {
		t.Fatalf("completion %s: %v", w.Body, err)
	}
}

func TestOpenAIRequestLimit(t *testing.T) {
	clk := newClock()
	p := newProvider(t, llmfake.Config{RPM: 3, Now: clk.Now})
	for i := range 3 {
		if w := call(p, chat(4, 1)); w.Code != 200 {
			t.Fatalf("call %d: %d", i, w.Code)
		}
	}
	w := call(p, chat(4, 1))
	if w.Code != 429 {
		t.Fatalf("the fourth call of 3/min: %d", w.Code)
	}
	typ, code, msg := openAIErr(t, w)
	// The message of a real 429 at Limit 3 says 20s: one request of 3 a
	// minute refills in 20 s.
	if exp := "Rate limit reached for gpt-4o in organization org-llmfake on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. Visit https://platform.openai.com/account/rate-limits to learn more."; typ != "requests" || code != "rate_limit_exceeded" || msg != exp {
		t.Fatalf("got %q %q %q", typ, code, msg)
	}
	wantHeaders(t, w.Header(), map[string]string{
		"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1m0s",
		"x-ratelimit-limit-tokens": "", "Retry-After": "",
	})

	clk.Advance(20*time.Second - time.Millisecond)
	if w := call(p, chat(4, 1)); w.Code != 429 {
		t.Fatalf("a millisecond early: %d", w.Code)
	}
	clk.Advance(time.Millisecond)
	if w := call(p, chat(4, 1)); w.Code != 200 {
		t.Fatalf("after the stated wait: %d %s", w.Code, w.Body)
	}
	if exp, got := (llmfake.Stats{Served: 4, Refused: 2}), p.Stats(); got != exp {
		t.Fatalf("stats %+v, want %+v", got, exp)
	}
}

func TestOpenAITokenLimit(t *testing.T) {
	clk := newClock()
	p := newProvider(t, llmfake.Config{RPM: 60, TPM: 1000, Now: clk.Now})
	if w := call(p, chat(0, 600)); w.Code != 200 {
		t.Fatalf("first: %d", w.Code)
	}
	w := call(p, chat(0, 600))
	typ, _, msg := openAIErr(t, w)
	// 400 left of 1000/min: 200 more take 12 s.
	if w.Code != 429 || typ != "tokens" || !strings.Contains(msg, "on tokens per min (TPM): Limit 1000, Used 600, Requested 600. Please try again in 12s.") {
		t.Fatalf("got %d %q %q", w.Code, typ, msg)
	}
	// OpenAI: "unsuccessful requests contribute to your per-minute limit".
	wantHeaders(t, w.Header(), map[string]string{"x-ratelimit-remaining-requests": "58", "x-ratelimit-remaining-tokens": "400"})

	w = call(p, chat(0, 2000))
	typ, _, msg = openAIErr(t, w)
	if w.Code != 429 || typ != "tokens" || strings.Contains(msg, "try again") ||
		!strings.HasPrefix(msg, "Request too large for gpt-4o in organization org-llmfake on tokens per min (TPM): Limit 1000, Requested 2000.") {
		t.Fatalf("a call above the limit: %d %q %q", w.Code, typ, msg)
	}
}

func TestAnthropic(t *testing.T) {
	clk := newClock() // 14:38:07.25
	p := newProvider(t, llmfake.Config{Dialect: llmfake.Anthropic, RPM: 50, TPM: 40000, OutputTPM: 8000, Now: clk.Now})
	body := `{"model":"claude-sonnet-4-5","max_tokens":1000,"system":"` + strings.Repeat("s", 200) + `","messages":[{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("u", 200) + `"}]}]}`
	w := call(p, body)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	// 1 of 50/min refills in 1.2 s; 100 input tokens of 40000/min in
	// 0.15 s; 1000 output tokens of 8000/min in 7.5 s; resets rounded up to
	// the second. tokens-* is the most restrictive: output's. Tokens left
	// are said to the nearest thousand: 39900 as 40000.
	wantHeaders(t, w.Header(), map[string]string{
		"Date":                                        "Tue, 21 Apr 2026 14:38:07 GMT",
		"anthropic-ratelimit-requests-limit":          "50",
		"anthropic-ratelimit-requests-remaining":      "49",
		"anthropic-ratelimit-requests-reset":          "2026-04-21T14:38:09Z",
		"anthropic-ratelimit-input-tokens-limit":      "40000",
		"anthropic-ratelimit-input-tokens-remaining":  "40000",
		"anthropic-ratelimit-input-tokens-reset":      "2026-04-21T14:38:08Z",
		"anthropic-ratelimit-output-tokens-limit":     "8000",
		"anthropic-ratelimit-output-tokens-remaining": "7000",
		"anthropic-ratelimit-output-tokens-reset":     "2026-04-21T14:38:15Z",
		"anthropic-ratelimit-tokens-limit":            "8000",
		"anthropic-ratelimit-tokens-remaining":        "7000",
		"anthropic-ratelimit-tokens-reset":            "2026-04-21T14:38:15Z",
		"x-ratelimit-remaining-requests":              "",
	})
	for range 7 {
		if w := call(p, body); w.Code != 200 {
			t.Fatalf("status %d", w.Code)
		}
	}
	w = call(p, body)
	if w.Code != 429 {
		t.Fatalf("the ninth 1000 output tokens of 8000/min: %d", w.Code)
	}
	// 1000 output tokens of an empty 8000/min bucket: 7.5 s, in whole seconds.
	wantHeaders(t, w.Header(), map[string]string{"retry-after": "8", "anthropic-ratelimit-output-tokens-remaining": "0", "anthropic-ratelimit-requests-remaining": "42"})
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Type != "error" || e.Error.Type != "rate_limit_error" || e.Error.Message == "" {
		t.Fatalf("body %s: %v", w.Body, err)
	}
}

func TestBadRequest(t *testing.T) {
	for _, d := range []llmfake.Dialect{llmfake.OpenAI, llmfake.Anthropic} {
		p := newProvider(t, llmfake.Config{Dialect: d, RPM: 1})
		for _, body := range []string{"not json", `{"max_tokens":-1}`} {
			w := call(p, body)
			if w.Code != 400 || !strings.Contains(w.Body.String(), `"invalid_request_error"`) {
				t.Fatalf("dialect %d, %q: %d %s", d, body, w.Code, w.Body)
			}
		}
		if p.Stats() != (llmfake.Stats{}) {
			t.Fatalf("a bad request counts nothing: %+v", p.Stats())
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := llmfake.New(llmfake.Config{Dialect: 7, RPM: -1, OutputTPM: -2})
	if err == nil {
		t.Fatal("want an error")
	}
	for _, field := range []string{"Dialect", "RPM", "OutputTPM"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("the error does not name %s: %v", field, err)
		}
	}
}

// At a frozen clock, no more calls than the limit get through, however many
// arrive at once.
func TestConcurrentCallsNeverExceedTheLimit(t *testing.T) {
	clk := newClock()
	p := newProvider(t, llmfake.Config{RPM: 100, TPM: 100 * 10, Now: clk.Now})
	var wg sync.WaitGroup
	for range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call(p, chat(0, 10))
		}()
	}
	wg.Wait()
	if exp, got := (llmfake.Stats{Served: 100, Refused: 200}), p.Stats(); got != exp {
		t.Fatalf("stats %+v, want %+v", got, exp)
	}
}

// A provider that reports nothing: no rate-limit header on a 200 or a
// 429, and a 429 whose body states no wait, as Vertex AI's
// (https://github.com/google-gemini/gemini-cli/issues/14811); its limit
// still holds, and SetRPM changes it from then on.
func TestNoHeaders(t *testing.T) {
	clk := newClock()
	p := newProvider(t, llmfake.Config{Dialect: llmfake.NoHeaders, RPM: 2, Now: clk.Now})
	for i := range 2 {
		w := call(p, chat(4, 1))
		if w.Code != 200 {
			t.Fatalf("call %d: %d", i, w.Code)
		}
		if b, ok := classify.ParseBudget(w.Header(), clk.Now()); ok {
			t.Fatalf("call %d reported a budget: %+v", i, b)
		}
	}
	w := call(p, chat(4, 1))
	if w.Code != 429 {
		t.Fatalf("the third call of 2/min: %d", w.Code)
	}
	if b, ok := classify.ParseBudget(w.Header(), clk.Now()); ok || w.Header().Get("Retry-After") != "" {
		t.Fatalf("the 429 reported a budget or a wait: %+v %v", b, w.Header())
	}
	if exp, got := `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`, w.Body.String(); got != exp {
		t.Fatalf("body %s, want %s", got, exp)
	}
	// Doubled: the empty bucket refills a unit in 15 s, not 30.
	p.SetRPM(4)
	clk.Advance(15*time.Second - time.Millisecond)
	if w := call(p, chat(4, 1)); w.Code != 429 {
		t.Fatalf("a millisecond before a unit at 4/min: %d", w.Code)
	}
	clk.Advance(time.Millisecond)
	if w := call(p, chat(4, 1)); w.Code != 200 {
		t.Fatalf("a unit at 4/min: %d", w.Code)
	}
	// Halved to 1/min: a unit in 60 s.
	p.SetRPM(1)
	clk.Advance(time.Minute - time.Millisecond)
	if w := call(p, chat(4, 1)); w.Code != 429 {
		t.Fatalf("a millisecond before a unit at 1/min: %d", w.Code)
	}
	clk.Advance(time.Millisecond)
	if w := call(p, chat(4, 1)); w.Code != 200 {
		t.Fatalf("a unit at 1/min: %d", w.Code)
	}
}
