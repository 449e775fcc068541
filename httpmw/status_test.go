package httpmw_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// TestStatusHandler: GET /documents/{id}/retry-status reports, for a page's
// countdown, the state the middleware on POST .../evaluate left.
func TestStatusHandler(t *testing.T) {
	type exp struct {
		state      string
		retryAfter [2]int64
		attempts   int
		reason     string
		message    string // prefix
	}
	cases := []struct {
		name    string
		gopts   gate.Options
		handler http.HandlerFunc // nil: no request before the status
		exp     exp
	}{
		{"ready", gate.Options{}, nil, exp{"ready", [2]int64{}, 0, "", "Retry available now."}},
		{"cooling down", gate.Options{}, func(w http.ResponseWriter, r *http.Request) { httpmw.Fail(r, errBoom) },
			exp{"cooling_down", [2]int64{299, 300}, 1, "unknown", "Retry available in 5 min."}},
		{"failed", gate.Options{}, func(w http.ResponseWriter, r *http.Request) { httpmw.Fail(r, classify.Permanent(errBoom)) },
			exp{"failed", [2]int64{}, 1, "permanent", "This job failed"}},
		{"done", gate.Options{Retention: gate.Retention{Done: time.Minute}}, ok, exp{"done", [2]int64{}, 0, "", "This job is already done."}},
		{"upstream cooling", gate.Options{Upstream: "s", Cooldown: time.Second},
			func(w http.ResponseWriter, r *http.Request) {
				httpmw.Fail(r, &classify.HTTPError{StatusCode: 429, Header: http.Header{"Retry-After": {"30"}}})
			},
			exp{"upstream_cooling", [2]int64{29, 30}, 0, "rate_limited", "Retry available in 30 s."}}, // provider-wide: no attempt counted
	}
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					if c.gopts.Upstream != "" {
						c.gopts.Upstream = "openai"
					}
					g := newGate(t, tg.Client, c.gopts)
					hd := c.handler
					if hd == nil {
						hd = ok
					}
					h := router(g, httpmw.Options{}, hd)
					if c.handler != nil {
						post(t, h, "/documents/42/evaluate")
					}
					rec := get(t, h, "/documents/42/retry-status")
					if exp, got := 200, rec.Code; exp != got {
						t.Fatalf("status: exp %d, got %d (%s)", exp, got, rec.Body)
					}
					if exp, got := "application/json no-store", rec.Header().Get("Content-Type")+" "+rec.Header().Get("Cache-Control"); exp != got {
						t.Errorf("headers: exp %q, got %q", exp, got)
					}
					checkLength(t, rec)
					var got map[string]any
					if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
						t.Fatal(err)
					}
					var st httpmw.RetryStatus
					_ = json.Unmarshal(rec.Body.Bytes(), &st)
					for _, k := range []string{"job_state", "retry_after_seconds", "attempts", "message"} {
						if _, ok := got[k]; !ok {
							t.Errorf("member %s missing: %s", k, rec.Body)
						}
					}
					if exp, got := c.exp.state, st.JobState; exp != got {
						t.Errorf("job_state: exp %q, got %q", exp, got)
					}
					if st.RetryAfterSeconds < c.exp.retryAfter[0] || st.RetryAfterSeconds > c.exp.retryAfter[1] {
						t.Errorf("retry_after_seconds: exp in %v, got %d", c.exp.retryAfter, st.RetryAfterSeconds)
					}
					if (st.RetryAt != "") != (c.exp.retryAfter[1] > 0) {
						t.Errorf("retry_at %q with retry_after_seconds %d", st.RetryAt, st.RetryAfterSeconds)
					} else if st.RetryAt != "" {
						if _, err := time.Parse(time.RFC3339, st.RetryAt); err != nil {
							t.Errorf("retry_at: %v", err)
						}
					}
					if exp, got := c.exp.attempts, st.Attempts; exp != got {
						t.Errorf("attempts: exp %d, got %d", exp, got)
					}
					if exp, got := c.exp.reason, st.Reason; exp != got {
						t.Errorf("reason: exp %q, got %q", exp, got)
					}
					if !strings.HasPrefix(st.Message, c.exp.message) {
						t.Errorf("message: exp %q…, got %q", c.exp.message, st.Message)
					}
					noLeak(t, rec.Body.String())
				})
			}
		})
	}
}

// TestStatusHandlerRunning: a running job shows its lease time left.
func TestStatusHandlerRunning(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{Lease: 10 * time.Second})
	var st httpmw.RetryStatus
	var h http.Handler
	h = router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) {
		rec := get(t, h, "/documents/42/retry-status")
		_ = json.Unmarshal(rec.Body.Bytes(), &st)
	})
	post(t, h, "/documents/42/evaluate")
	if exp, got := "running", st.JobState; exp != got {
		t.Errorf("job_state: exp %q, got %q", exp, got)
	}
	// A call just begun, none timed: a second, not the lease's 10 s.
	if st.RetryAfterSeconds < 1 || st.RetryAfterSeconds > 2 {
		t.Errorf("retry_after_seconds: %d, want a young call's second", st.RetryAfterSeconds)
	}
}

// TestStatusHandlerBadKey: a key the gate refuses is a 400 problem.
func TestStatusHandlerBadKey(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	h := router(g, httpmw.Options{}, ok)
	for _, p := range []string{"/documents//retry-status", "/documents/" + strings.Repeat("x", 2000) + "/retry-status"} {
		rec := get(t, h, p)
		if exp, got := 400, rec.Code; exp != got {
			t.Errorf("%.40s: exp %d, got %d", p, exp, got)
			continue
		}
		if exp, got := "The request does not name a valid job.", decodeProblem(t, rec).Detail; exp != got {
			t.Errorf("%.40s: detail: exp %q, got %q", p, exp, got)
		}
	}
}

// A job whose call waits in its upstream's line shows its place and the
// expected wait for its turn: the member ahead, the seconds and the
// sentence a page shows; a job not in line has no ahead.
func TestRetryStatusShowsThePlaceInLine(t *testing.T) {
	got := httpmw.RetryStatusOf(gate.Status{State: gate.Ready, InLine: true, Ahead: 3, RetryAfter: 3200 * time.Millisecond}, nil)
	if exp := "In line: 3 ahead, about 4 s."; got.Message != exp {
		t.Errorf("message: exp %q, got %q", exp, got.Message)
	}
	if got.Ahead != 3 || got.RetryAfterSeconds != 4 {
		t.Errorf("ahead %d, retry_after_seconds %d: exp 3 and 4", got.Ahead, got.RetryAfterSeconds)
	}
	body, _ := json.Marshal(got)
	if !strings.Contains(string(body), `"ahead":3`) {
		t.Errorf("no ahead member in %s", body)
	}
	if !got.InLine || !strings.Contains(string(body), `"in_line":true`) {
		t.Errorf("in_line not set: %s", body)
	}
	// First in line: none ahead, and still in line.
	next := httpmw.RetryStatusOf(gate.Status{State: gate.Ready, InLine: true, RetryAfter: 900 * time.Millisecond}, nil)
	if !next.InLine || next.Ahead != 0 || next.Message != "In line: next, about 1 s." {
		t.Errorf("first in line: %+v", next)
	}
	// A place with no known wait (a Status built by hand) promises no time.
	if exp, got := "In line: 2 ahead.", httpmw.RetryStatusOf(gate.Status{State: gate.Ready, InLine: true, Ahead: 2}, nil).Message; exp != got {
		t.Errorf("in line, no wait: exp %q, got %q", exp, got)
	}
	// First in line where the budget does not say how it refills: no wait
	// to tell, and still in line (gate.Status.InLine, not a guess from the
	// wait).
	unknown := httpmw.RetryStatusOf(gate.Status{State: gate.Ready, InLine: true}, nil)
	if !unknown.InLine || unknown.Message != "In line: next." {
		t.Errorf("first in line, its wait unknown: %+v", unknown)
	}
	none, _ := json.Marshal(httpmw.RetryStatusOf(gate.Status{State: gate.Ready}, nil))
	if strings.Contains(string(none), "ahead") || strings.Contains(string(none), "in_line") {
		t.Errorf("ahead written for a job not in line: %s", none)
	}
}
