package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrygate/retrygate/internal/corpus"
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
			[]string{"status         429", "verdict        transient", "retry hint     3s", "decided by     message:rate_limit", "The upstream scope cools"}},
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
