package httpmw_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// mustPanic returns the panic message of fn, failing when it does not panic.
func mustPanic(t *testing.T, fn func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("no panic")
		}
		msg, _ = r.(string)
	}()
	fn()
	return ""
}

// TestNewPanicsNamingTheOption: bad options fail at construction, naming
// every bad option, as chi's middleware constructors do.
func TestNewPanicsNamingTheOption(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	job := httpmw.URLParamAs(evaluatePattern, "id")
	cases := []struct {
		name string
		g    *gate.Gate
		opts httpmw.Options
		exp  []string
	}{
		{"nil gate", nil, httpmw.Options{Job: job}, []string{"gate: nil"}},
		{"no Job", g, httpmw.Options{}, []string{"Options.Job"}},
		{"bad Retry-After name", g, httpmw.Options{Job: job, Headers: httpmw.Headers{RetryAfter: "Retry After"}}, []string{"Options.Headers.RetryAfter"}},
		{"bad RateLimit name", g, httpmw.Options{Job: job, Headers: httpmw.Headers{RateLimit: "Rate\nLimit"}}, []string{"Options.Headers.RateLimit"}},
		{"same header twice", g, httpmw.Options{Job: job, Headers: httpmw.Headers{RetryAfter: "x-wait", RateLimit: "X-Wait"}}, []string{"same header"}},
		{"negative UnavailableRetryAfter", g, httpmw.Options{Job: job, UnavailableRetryAfter: -time.Second}, []string{"Options.UnavailableRetryAfter"}},
		{"TenantWeight without Tenant", g, httpmw.Options{Job: job, TenantWeight: func(string) float64 { return 2 }}, []string{"Options.TenantWeight"}},
		{"all at once", nil, httpmw.Options{UnavailableRetryAfter: -1}, []string{"gate: nil", "Options.Job", "Options.UnavailableRetryAfter"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for fn, build := range map[string]func(){
				"New":           func() { httpmw.New(c.g, c.opts) },
				"StatusHandler": func() { httpmw.StatusHandler(c.g, c.opts) },
			} {
				msg := mustPanic(t, build)
				if !strings.HasPrefix(msg, "httpmw: "+fn+": ") {
					t.Errorf("%s panic %q does not name the constructor", fn, msg)
				}
				for _, e := range c.exp {
					if !strings.Contains(msg, e) {
						t.Errorf("%s panic %q does not name %q", fn, msg, e)
					}
				}
			}
		})
	}
	for name, fn := range map[string]func(){
		"URLParam":   func() { httpmw.URLParam("") },
		"URLParamAs": func() { httpmw.URLParamAs("", "id") },
		"PerTenant":  func() { httpmw.PerTenant(nil, nil) },
		"SiblingURL": func() { httpmw.SiblingURL("a/b") },
		"next":       func() { httpmw.New(g, httpmw.Options{Job: job})(nil) },
	} {
		if msg := mustPanic(t, fn); !strings.HasPrefix(msg, "httpmw: ") {
			t.Errorf("%s: panic %q", name, msg)
		}
	}
}

// TestHeaders: Retry-After can be renamed or turned off, and the IETF
// RateLimit header turned on.
func TestHeaders(t *testing.T) {
	cases := []struct {
		name    string
		headers httpmw.Headers
		exp     map[string]string
	}{
		{"default", httpmw.Headers{}, map[string]string{"Retry-After": "300", "RateLimit": ""}},
		{"renamed", httpmw.Headers{RetryAfter: "X-Retry-In"}, map[string]string{"Retry-After": "", "X-Retry-In": "300"}},
		{"off", httpmw.Headers{RetryAfter: "-"}, map[string]string{"Retry-After": "", "RateLimit": ""}},
		{"RateLimit on", httpmw.Headers{RateLimit: httpmw.RateLimitHeader}, map[string]string{"Retry-After": "300", "RateLimit": `"retry";r=0;t=300`}},
		// Any RFC 9110 token is a header name: letters and digits at the
		// ends of their ranges, and every other token character.
		{"token characters", httpmw.Headers{RetryAfter: "X-az-AZ-09", RateLimit: "!#$%&'*+-.^_`|~"},
			map[string]string{"Retry-After": "", "X-az-AZ-09": "300", "!#$%&'*+-.^_`|~": `"retry";r=0;t=300`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, mc := redistest.Miniredis(t)
			g := newGate(t, mc, gate.Options{})
			h := router(g, httpmw.Options{Headers: c.headers}, func(w http.ResponseWriter, r *http.Request) { httpmw.Fail(r, errBoom) })
			for i := 0; i < 2; i++ { // the settled answer and the refusal
				rec := post(t, h, "/documents/1/evaluate")
				for k, v := range c.exp {
					if exp, got := v, rec.Header().Get(k); exp != got {
						t.Errorf("%s: exp %q, got %q", k, exp, got)
					}
				}
				// The body keeps the wait whatever the headers.
				if p := decodeProblem(t, rec); p.RetryAfterSeconds == nil || *p.RetryAfterSeconds != 300 {
					t.Errorf("retry_after_seconds: %v", p.RetryAfterSeconds)
				}
			}
		})
	}
}

// TestCustomHandlers: teams with their own error format get every refusal,
// with the headers already set and the data to render.
func TestCustomHandlers(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	var got []httpmw.Refusal
	custom := func(w http.ResponseWriter, r *http.Request, ref httpmw.Refusal) {
		got = append(got, ref)
		w.Header().Set("Content-Type", "application/vnd.acme+json")
		w.WriteHeader(ref.Status)
		_, _ = w.Write([]byte(`{"acme_error":"` + ref.State + `"}`))
	}
	h := router(g, httpmw.Options{
		Blocked: custom, InvalidJob: custom, Unavailable: custom,
		RetryIn:         func(d time.Duration) string { return "Réessayez dans " + d.Round(time.Second).String() },
		ProblemTypeBase: "https://acme.example/problems/",
	}, func(w http.ResponseWriter, r *http.Request) { httpmw.Fail(r, errBoom) })
	post(t, h, "/documents/1/evaluate")
	rec := post(t, h, "/documents/1/evaluate")
	if exp, got := `429 {"acme_error":"cooling_down"} 300`, rec.Result().Status[:3]+" "+rec.Body.String()+" "+rec.Header().Get("Retry-After"); exp != got {
		t.Errorf("exp %q, got %q", exp, got)
	}
	post(t, h, "/documents//evaluate")
	if exp, n := 3, len(got); exp != n {
		t.Fatalf("custom calls: exp %d, got %d", exp, n)
	}
	ref := got[1]
	if ref.Type != "https://acme.example/problems/cooling_down" || ref.Title != "Job is cooling down" ||
		ref.Detail != "Réessayez dans 5m0s" || ref.Attempts != 1 || ref.Reason != "unknown" || ref.Err == nil {
		t.Errorf("refusal: %+v", ref)
	}
	if exp, got := 400, got[2].Status; exp != got {
		t.Errorf("invalid job: exp %d, got %d", exp, got)
	}
	if at := ref.RetryAt; ref.RetryAfter > 5*time.Minute || ref.RetryAfter < 299*time.Second || time.Until(at) < 298*time.Second || time.Until(at) > 301*time.Second {
		t.Errorf("cooling down: RetryAfter %v, RetryAt %v, want 5m and 5m from now", ref.RetryAfter, at)
	}

	// A refusal where waiting does not help carries neither a wait nor a
	// time to retry at.
	failed := router(g, httpmw.Options{Blocked: custom}, func(w http.ResponseWriter, r *http.Request) {
		httpmw.Fail(r, classify.Permanent(errBoom))
	})
	post(t, failed, "/documents/2/evaluate")
	post(t, failed, "/documents/2/evaluate")
	for _, ref := range got[3:] {
		if ref.Status != 422 || ref.RetryAfter != 0 || !ref.RetryAt.IsZero() {
			t.Errorf("failed job: Status %d, RetryAfter %v, RetryAt %v; want 422 and no wait", ref.Status, ref.RetryAfter, ref.RetryAt)
		}
	}
	if exp, n := 5, len(got); exp != n {
		t.Errorf("custom calls: exp %d, got %d", exp, n)
	}
}

// TestProblemTypeBase: with a base the problem type names the state; the
// title describes it.
func TestProblemTypeBase(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	h := router(g, httpmw.Options{ProblemTypeBase: "https://acme.example/problems/"},
		func(w http.ResponseWriter, r *http.Request) { httpmw.Fail(r, errBoom) })
	p := decodeProblem(t, post(t, h, "/documents/1/evaluate"))
	if exp, got := "https://acme.example/problems/cooling_down Job is cooling down", p.Type+" "+p.Title; exp != got {
		t.Errorf("exp %q, got %q", exp, got)
	}
	p = decodeProblem(t, post(t, h, "/documents//evaluate"))
	if exp, got := "https://acme.example/problems/invalid_job Invalid job", p.Type+" "+p.Title; exp != got {
		t.Errorf("exp %q, got %q", exp, got)
	}
	// Default: about:blank with the status text, as RFC 9457 asks.
	p = decodeProblem(t, post(t, router(g, httpmw.Options{}, ok), "/documents/1/evaluate"))
	if exp, got := "about:blank Too Many Requests", p.Type+" "+p.Title; exp != got {
		t.Errorf("exp %q, got %q", exp, got)
	}
}
