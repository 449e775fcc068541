package classify_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/classify/goopenai"
	"github.com/retrygate/retrygate/internal/code"
	"github.com/retrygate/retrygate/internal/corpus"
)

func FuzzParseRetryHint(f *testing.F) {
	f.Add("2500", "", "", "", "", "")
	f.Add("", "3", "", "", "", "")
	f.Add("", "1.5", "", "", "", "")
	f.Add("", "Mon, 02 Jan 2006 15:04:35 GMT", fixedDate, "", "", "")
	f.Add("", "", "", "1s", "6m0s", "")
	f.Add("-1", "NaN", "yesterday", "-1s", "9999999999999999999h", "")
	f.Add("1e400", "+Inf", "", "1.5.5s", "", "")
	f.Add("", "Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT", "", "", "")
	f.Fuzz(func(t *testing.T, ms, ra, date, resetReq, resetTok, shouldRetry string) {
		hd := http.Header{
			"Retry-After-Ms":             {ms},
			"Retry-After":                {ra},
			"Date":                       {date},
			"X-Ratelimit-Reset-Requests": {resetReq},
			"X-Ratelimit-Reset-Tokens":   {resetTok},
			"X-Should-Retry":             {shouldRetry},
		}
		d, ok := classify.ParseRetryHint(hd, time.Unix(1136214245, 0))
		if d < 0 || d > classify.MaxHint || (!ok && d != 0) {
			t.Fatalf("ParseRetryHint(%v) = %v, %v", hd, d, ok)
		}
		v := classify.Default(&classify.HTTPError{StatusCode: 429, Header: hd})
		if v.Class == classify.ClassPermanent && v.Reason != classify.ReasonShouldNotRetry {
			t.Fatalf("429 with garbage headers: %+v", v)
		}
		checkVerdict(t, v)
	})
}

// doerFunc is a fake HTTP endpoint: no sockets, so the fuzzer runs fast.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

// FuzzDefault feeds arbitrary statuses, bodies and hint headers through a real
// go-openai client and a Transport, plain and mid-stream.
func FuzzDefault(f *testing.F) {
	for _, tc := range apiCases {
		f.Add(tc.reply.status, []byte(tc.reply.body), tc.reply.header["retry-after-ms"], tc.reply.header["Retry-After"], tc.reply.header["x-should-retry"], false)
	}
	cases, err := corpus.Load("testdata/corpus")
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range cases {
		h := c.Header
		f.Add(c.Status, c.Body, h.Get("Retry-After-Ms"), h.Get("Retry-After"), h.Get("X-Should-Retry"), false)
		f.Add(200, c.Body, "", "", "", true)
	}
	f.Add(200, []byte(`{"error":{"message":"x","type":"server_error","code":503}}`), "", "", "", true)
	f.Add(200, []byte(`{"error":{"code":1e999}}`), "", "", "", true)
	f.Add(200, []byte(`{"error":{"message":["a","b"],"code":null,"innererror":{}}}`), "", "", "", true)
	f.Add(429, []byte(`{"error":{"message":"x","code":{"nested":true},"type":7}}`), "NaN", "-3", "TRUE", false)
	f.Add(1000, []byte(`{"error":null}`), "1e9", "", "false", false)
	f.Fuzz(func(t *testing.T, status int, body []byte, ms, ra, shouldRetry string, stream bool) {
		if stream {
			status = http.StatusOK
			body = append(append([]byte("data: "), bytes.ReplaceAll(body, []byte("\n"), nil)...), "\n\n"...)
		} else if status < 100 || status > 999 {
			status = 500 + (status&0x7fffffff)%100
		}
		doer := doerFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{
				Status:     http.StatusText(status),
				StatusCode: status,
				Header: http.Header{
					"Retry-After-Ms": {ms},
					"Retry-After":    {ra},
					"X-Should-Retry": {shouldRetry},
					"Content-Type":   {"application/json"},
				},
				Body:    io.NopCloser(bytes.NewReader(body)),
				Request: r,
			}, nil
		})
		cfg := openai.DefaultConfig("sk-fuzz")
		cfg.BaseURL = "http://fuzz.test/v1"
		cfg.HTTPClient = &goopenai.Transport{Doer: doer}
		c := openai.NewClientWithConfig(cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()

		var err error
		if stream {
			req := chatRequest()
			req.Stream = true
			var s *openai.ChatCompletionStream
			if s, err = c.CreateChatCompletionStream(ctx, req); err == nil {
				for err == nil {
					_, err = s.Recv()
				}
				s.Close()
			}
		} else {
			_, err = c.CreateChatCompletion(ctx, chatRequest())
		}
		if err == nil {
			return
		}
		checkVerdict(t, classify.Default(err))
	})
}

// checkVerdict asserts what holds for every verdict Default returns.
func checkVerdict(t *testing.T, v classify.Verdict) {
	t.Helper()
	if v.Class > classify.ClassCanceled {
		t.Fatalf("undefined class in %+v", v)
	}
	if v.RetryAfter < 0 || v.RetryAfter > classify.MaxHint {
		t.Fatalf("hint out of range in %+v", v)
	}
	if v.Class != classify.ClassTransient && v.RetryAfter != 0 {
		t.Fatalf("hint on a non-transient verdict %+v", v)
	}
	if v.Reason == "" || strings.Trim(v.Reason, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		t.Fatalf("reason is not a short code in %+v", v)
	}
	if !code.Evidence(v.Evidence) {
		t.Fatalf("Evidence is not of its form in %+v", v)
	}
	if v.Suspect && v.Class != classify.ClassPermanent {
		t.Fatalf("a suspect that is not permanent: %+v", v)
	}
}
