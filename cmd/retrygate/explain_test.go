package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/internal/testkit/corpus"
)

// rawResponse writes c as an HTTP/1.1 response, as copied from a log.
func rawResponse(c corpus.Case, eol string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d Whatever%s", c.Status, eol)
	for k, vs := range c.Header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s%s", k, v, eol)
		}
	}
	b.WriteString("Content-Type: application/json" + eol + eol)
	b.Write(c.Body)
	return b.String()
}

func withStdin(t *testing.T, s string) {
	t.Helper()
	old := explainStdin
	explainStdin = strings.NewReader(s)
	t.Cleanup(func() { explainStdin = old })
}

// Every real response of the corpus, copied as a raw response into a
// file, gets the verdict the corpus expects.
func TestExplainCorpus(t *testing.T) {
	cases, err := corpus.Load("../../classify/testdata/corpus")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i, c := range cases {
		eol := "\r\n"
		if i%2 == 1 {
			eol = "\n"
		}
		p := filepath.Join(dir, fmt.Sprintf("case%d.txt", i))
		if err := os.WriteFile(p, []byte(rawResponse(c, eol)), 0o600); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, nil, "explain", p, "--json")
		if r.code != exitOK {
			t.Fatalf("%s: exit %d: %s", c.Name, r.code, r.stderr)
		}
		var got explainJSON
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("%s: %v in %s", c.Name, err, r.stdout)
		}
		exp := c.Expect
		if got.Status != c.Status || got.Class != exp.Class.String() || got.Reason != exp.Reason ||
			got.ProviderWide != exp.ProviderWide || got.Suspect != exp.Suspect || got.RetryAfterMS != exp.RetryAfter.Milliseconds() {
			t.Errorf("%s: got %+v, want %+v", c.Name, got, exp)
		}
		if got.Evidence == "" || got.WhatTheGateDoes == "" {
			t.Errorf("%s: no evidence or no sentence: %+v", c.Name, got)
		}
	}
}

func TestExplainInputs(t *testing.T) {
	const quota = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}`
	for _, tc := range []struct {
		name, in string
		args     []string
		want     []string
	}{
		{"HTTP/2 status line, LF", "HTTP/2 429\nretry-after: 3\n\n{\"error\":{\"message\":\"Rate limit\"}}", nil,
			[]string{"status         429", "verdict        transient", "retry hint     3s", "decided by     message:rate_limit", "The upstream cools"}},
		{"headers without a status line", "Content-Type: application/json\r\n\r\n" + quota, []string{"--status", "429"},
			[]string{"verdict        systemic", "reason         quota_exhausted", "provider-wide  yes", "decided by     code:insufficient_quota", "pauses"}},
		{"a bare body", quota, []string{"--status", "429"}, []string{"reason         quota_exhausted"}},
		{"a suspect", "HTTP/1.1 400 Bad Request\n\n{\"error\":{\"message\":\"nope\",\"type\":\"invalid_request_error\"}}", nil,
			[]string{"suspect        yes", "the same rejection on its next attempt marks it Failed"}},
		{"proof", "HTTP/1.1 400 Bad Request\n\n{\"error\":{\"message\":\"too long\",\"code\":\"context_length_exceeded\"}}", nil,
			[]string{"suspect        no", "marked Failed"}},
		{"an HTML page", "HTTP/1.1 502 Bad Gateway\nContent-Type: text/html\n\n<html>\x1b[31mbad</html>", nil,
			[]string{"reason         upstream_5xx", "decided by     status:502"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withStdin(t, tc.in)
			r := runCLI(t, nil, append([]string{"explain"}, tc.args...)...)
			if r.code != exitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, r.stdout)
				}
			}
			if strings.ContainsAny(r.stdout, "\x1b\x00") || strings.Contains(r.stdout, "billing details") {
				t.Errorf("output shows upstream text or control bytes:\n%q", r.stdout)
			}
		})
	}
}

func TestExplainRejectsGarbage(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		args     []string
		want     string
	}{
		{"empty", "", nil, "empty input"},
		{"only blanks", " \r\n\n", nil, "empty input"},
		{"binary, no status", "\x00\x01\x02\xff{", nil, "no status line"},
		{"bad status line", "HTTP/1.1 abc Nope\n\n{}", nil, "not a status line"},
		{"status line without a code", "HTTP/1.1\n\n{}", nil, "not a status line"},
		{"--status disagrees", "HTTP/1.1 429 x\n\n{}", []string{"--status", "400"}, "disagrees"},
		{"--status out of range", "{}", []string{"--status", "5"}, "not an HTTP status"},
		{"--status 999", "{}", []string{"--status", "999"}, "not an HTTP status"},
		{"--status 600", "{}", []string{"--status", "600"}, "not an HTTP status"},
		{"status line 999", "HTTP/1.1 999 Whatever\n\n{}", nil, "not an HTTP status"},
		{"go-openai text with status 999", "error, status code: 999, status: 999, message: x", nil, "no HTTP status"},
		{"go-openai text without a number", "error, status code: many, status: x, message: x", nil, "no HTTP status"},
		{"SDK text with status 999", `POST "https://api.openai.com/v1/chat/completions": 999  {"message":"x"}`, nil, "not an HTTP status"},
		{"go-openai text, --status disagrees", "error, status code: 429, status: 429 Too Many Requests, message: x", []string{"--status", "400"}, "disagrees"},
		{"two files", "", []string{"a", "b"}, "unexpected argument"},
		{"missing file", "", []string{"/nonexistent/response.txt"}, "no such file"},
		{"broken header block", "HTTP/1.1 400 x\n: no name\n\n{}", nil, "headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withStdin(t, tc.in)
			r := runCLI(t, nil, append([]string{"explain"}, tc.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, exitUsage, tc.want)
			}
			if strings.ContainsAny(r.stderr, "\x00\x01\x02\xff") {
				t.Errorf("stderr echoes raw bytes: %q", r.stderr)
			}
		})
	}
}

// TestExplainClientErrors: explain reads what the Go clients log. Each
// text is the client's Error() for a real response: go-openai's *APIError
// ("error, status code: %d, status: %s, message: %s", go-openai
// error.go) for OpenAI's documented 429 bodies, go-openai's *RequestError
// for a body it cannot decode, openai-go's *Error ("%s %q: %d %s %s" with
// the body's error object) and anthropic-sdk-go's *Error (the same with
// its Request-ID and the whole body), each for a response of the corpus.
func TestExplainClientErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		exp      explainJSON
	}{
		{"go-openai APIError, quota",
			"summarize doc-1: error, status code: 429, status: 429 Too Many Requests, message: You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
			explainJSON{Status: 429, Class: "systemic", Reason: "quota_exhausted", ProviderWide: true}},
		{"go-openai APIError, rate limit",
			"error, status code: 429, status: 429 Too Many Requests, message: Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Used 30000, Requested 500. Please try again in 1s.",
			explainJSON{Status: 429, Class: "transient", Reason: "rate_limited", ProviderWide: true}},
		{"go-openai APIError, prompt too long",
			"error, status code: 400, status: 400 Bad Request, message: prompt is too long: 208310 tokens > 200000 maximum",
			explainJSON{Status: 400, Class: "permanent", Reason: "context_length_exceeded"}},
		{"go-openai RequestError with its body",
			`error, status code: 400, status: 400 Bad Request, message: json: cannot unmarshal array into Go value of type openai.ErrorResponse, body: [{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}]`,
			explainJSON{Status: 400, Class: "systemic", Reason: "auth", ProviderWide: true}},
		{"openai-go Error",
			`POST "https://api.openai.com/v1/chat/completions": 429 Too Many Requests {"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}`,
			explainJSON{Status: 429, Class: "systemic", Reason: "quota_exhausted", ProviderWide: true}},
		{"anthropic-sdk-go Error",
			`POST "https://api.anthropic.com/v1/messages": 529 (Request-ID: req_011CSHoEeqs5C35K2UUqR7Fy) {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			explainJSON{Status: 529, Class: "transient", Reason: "overloaded", ProviderWide: true}},
		{"anthropic-sdk-go Error, credit balance",
			`POST "https://api.anthropic.com/v1/messages": 400 Bad Request (Request-ID: req_1) {"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`,
			explainJSON{Status: 400, Class: "systemic", Reason: "quota_exhausted", ProviderWide: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withStdin(t, tc.in)
			r := runCLI(t, nil, "explain", "--json")
			if r.code != exitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			var got explainJSON
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("%v in %s", err, r.stdout)
			}
			if got.Status != tc.exp.Status || got.Class != tc.exp.Class || got.Reason != tc.exp.Reason || got.ProviderWide != tc.exp.ProviderWide {
				t.Errorf("got %+v, want %+v", got, tc.exp)
			}
		})
	}
}

// TestExplainNotAFailure: a 2xx (or any status below 400) is no failure:
// the clients return no error and the gate records a success.
func TestExplainNotAFailure(t *testing.T) {
	for _, tc := range []struct {
		in   string
		args []string
	}{
		{"HTTP/1.1 200 OK\nContent-Type: application/json\n\n{\"id\":\"chatcmpl-1\"}", nil},
		{`{"id":"chatcmpl-1"}`, []string{"--status", "200"}},
		{"HTTP/2 204\n\n", nil},
	} {
		withStdin(t, tc.in)
		r := runCLI(t, nil, append([]string{"explain"}, tc.args...)...)
		if r.code != exitOK || !strings.Contains(r.stdout, "Not a failure") || strings.Contains(r.stdout, "transient") {
			t.Errorf("%q: exit %d, stdout %q", tc.in, r.code, r.stdout)
		}
		withStdin(t, tc.in)
		r = runCLI(t, nil, append([]string{"explain", "--json"}, tc.args...)...)
		var got explainJSON
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Class != "none" || got.Reason != "" {
			t.Errorf("%q --json: %v %+v", tc.in, err, got)
		}
	}
}

// TestExplainUpstreamOnlyWhenProviderWide: the sentence speaks of the
// upstream exactly when the verdict is provider-wide, whatever the class.
func TestExplainUpstreamOnlyWhenProviderWide(t *testing.T) {
	cases, err := corpus.Load("../../classify/testdata/corpus")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		withStdin(t, rawResponse(c, "\n"))
		r := runCLI(t, nil, "explain")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		sentence := lines[len(lines)-1] // the table's reason may be upstream_5xx
		if exp, got := c.Expect.ProviderWide, strings.Contains(sentence, "upstream"); exp != got {
			t.Errorf("%s: provider-wide %v, but the sentence mentions the upstream: %v\n%s", c.Name, exp, got, r.stdout)
		}
		if strings.Contains(sentence, "scope") {
			t.Errorf("%s: the sentence says scope, the word is upstream:\n%s", c.Name, r.stdout)
		}
	}
}

// TestExplainHelp: explain's help lists the flags it uses and none of the
// Redis connection flags it ignores.
func TestExplainHelp(t *testing.T) {
	r := runCLI(t, nil, "help", "explain")
	mustOK(t, r)
	for _, want := range []string{"--status STATUS", "--json"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("help explain lacks %s:\n%s", want, r.stdout)
		}
	}
	for _, unused := range []string{"--redis", "--cluster", "--sentinel", "--tls-ca", "--prefix", "--upstream", "--timeout"} {
		if strings.Contains(r.stdout, unused) {
			t.Errorf("help explain lists %s, which explain does not use:\n%s", unused, r.stdout)
		}
	}
}

// TestExplainGoOpenAICorpus: go-openai's own Error() text for every real
// response of the corpus is read with the response's status. go-openai
// keeps only the message of a decoded error, so the verdict may be less
// specific than the body's; an account, key, budget or model problem is
// still never Failed.
func TestExplainGoOpenAICorpus(t *testing.T) {
	cases, err := corpus.Load("../../classify/testdata/corpus")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		srv := httptest.NewServer(c)
		cfg := openai.DefaultConfig("sk-test")
		cfg.BaseURL = srv.URL + "/v1"
		_, callErr := openai.NewClientWithConfig(cfg).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
			Model: openai.GPT4o, Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}},
		})
		srv.Close()
		if callErr == nil {
			t.Fatalf("%s: the call succeeded", c.Name)
		}
		withStdin(t, "job doc-1: "+callErr.Error())
		r := runCLI(t, nil, "explain", "--json")
		var got explainJSON
		if err := json.Unmarshal([]byte(r.stdout), &got); r.code != exitOK || err != nil {
			t.Fatalf("%s: exit %d, %v: %s%s\ninput: %s", c.Name, r.code, err, r.stdout, r.stderr, callErr)
		}
		if got.Status != c.Status {
			t.Errorf("%s: status %d, want %d", c.Name, got.Status, c.Status)
		}
		if c.Expect.Class == classify.ClassSystemic && got.Class == "permanent" {
			t.Errorf("%s: an account problem Failed from go-openai's text %q: %+v", c.Name, callErr, got)
		}
	}
}
