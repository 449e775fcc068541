package corpus_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/internal/testkit/corpus"
)

const dir = "../../../classify/testdata/corpus"

func TestLoadRealCorpus(t *testing.T) {
	cases, err := corpus.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(cases); got < 60 {
		t.Errorf("corpus has %d cases, want at least 60", got)
	}
	perProvider := map[string]int{}
	for _, c := range cases {
		perProvider[c.Provider]++
	}
	for _, p := range []string{"openai", "azure-openai", "anthropic", "gemini", "groq", "mistral", "deepseek", "openrouter", "vllm", "ollama"} {
		if perProvider[p] == 0 {
			t.Errorf("no case for provider %s", p)
		}
	}
}

func write(t *testing.T, name, content string) string {
	t.Helper()
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestLoadRejectsBadCases(t *testing.T) {
	d := write(t, "bad.json", `{"provider": "p", "cases": [
		{"name": "a", "source": "https://x", "status": 429, "body": {"error": {}}, "expect": {"class": "transient", "reason": "rate_limited"}},
		{"name": "a", "source": "https://x", "status": 429, "expect": {"class": "transient", "reason": "r"}},
		{"name": "b", "source": "http://x", "status": 200, "expect": {"class": "sometimes", "reason": "", "retry_after": "soon"}}
	]}`)
	_, err := corpus.Load(d)
	if err == nil {
		t.Fatal("Load accepted bad cases")
	}
	for _, want := range []string{"duplicate name", "source must start with https://", "status 200", `unknown class "sometimes"`, "no reason", `bad retry_after "soon"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), `case 0 ("a")`) {
		t.Errorf("the good case is reported as bad:\n%v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := corpus.Load(t.TempDir()); err == nil {
		t.Error("Load of an empty directory: want an error")
	}
	if _, err := corpus.Load(write(t, "x.json", `{"provider": "p", "cases": [], "extra": 1}`)); err == nil {
		t.Error("Load of a file with an unknown field: want an error")
	}
	if _, err := corpus.Load(write(t, "x.json", `{"cases": []}`)); err == nil || !strings.Contains(err.Error(), "no provider") {
		t.Errorf("Load of a file without provider: want \"no provider\", got %v", err)
	}
}

func TestCaseReplays(t *testing.T) {
	d := write(t, "p.json", `{"provider": "p", "cases": [
		{"name": "json", "source": "https://x", "status": 429, "header": {"retry-after": "3"}, "body": {"error": {"code": 1}},
		 "expect": {"class": "transient", "reason": "rate_limited", "provider_wide": true, "retry_after": "3s"}},
		{"name": "text", "source": "https://x", "status": 502, "header": {"Content-Type": "text/html"}, "body": "<html>bad gateway</html>",
		 "expect": {"class": "transient", "reason": "upstream_5xx"}}
	]}`)
	cases, err := corpus.Load(d)
	if err != nil {
		t.Fatal(err)
	}
	if exp, got := (classify.Verdict{Class: classify.ClassTransient, Reason: "rate_limited", ProviderWide: true, RetryAfter: 3 * time.Second}), cases[0].Expect; exp != got {
		t.Errorf("Expect: exp %+v, got %+v", exp, got)
	}
	for _, tc := range []struct {
		c           corpus.Case
		body, ctype string
	}{
		{cases[0], `{"error": {"code": 1}}`, "application/json"},
		{cases[1], "<html>bad gateway</html>", "text/html"},
	} {
		rec := httptest.NewRecorder()
		tc.c.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
		b, _ := io.ReadAll(rec.Result().Body)
		if rec.Code != tc.c.Status || string(b) != tc.body || rec.Header().Get("Content-Type") != tc.ctype {
			t.Errorf("%s: replayed %d %q %q, want %d %q %q", tc.c.Name, rec.Code, rec.Header().Get("Content-Type"), b, tc.c.Status, tc.ctype, tc.body)
		}
	}
	if exp, got := "3", cases[0].Header.Get("Retry-After"); exp != got {
		t.Errorf("header: exp %q, got %q", exp, got)
	}
}
