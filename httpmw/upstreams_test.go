package httpmw_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// openaiRateLimit is OpenAI's 429 for requests per minute with a 90 s hint
// (Retry-After, as the API documents it): provider-wide, transient.
var openaiRateLimit = &classify.HTTPError{StatusCode: 429, Header: http.Header{"Retry-After": {"90"}},
	Body: []byte(`{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`)}

// TestUpstreamsShownToTheClient: with upstreams in order, a rate limit on
// the primary sends the next call to the backup at once; the status route
// names the upstream the next call uses and each upstream's state; once
// every upstream is cooling, the refusal's problem names each with its
// wait, and the soonest is the Retry-After; the event stream pushes the
// change of an upstream to a page that watches the job.
func TestUpstreamsShownToTheClient(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{Upstream: "primary", UpstreamPolicy: gate.UpstreamPolicy{Fallbacks: []string{"backup"}}})
			var used []string
			srv := httptest.NewServer(router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) {
				l := httpmw.Lease(r.Context())
				used = append(used, l.Upstream())
				httpmw.Fail(r, openaiRateLimit)
			}))
			t.Cleanup(srv.Close)
			_, events := openStream(t, srv.URL, "d", nil)
			if _, st := nextStatus(t, events, 5*time.Second); st.Upstream != "primary" || len(st.Upstreams) != 2 ||
				st.Upstreams[0] != (httpmw.State{Upstream: "primary", State: "ready"}) {
				t.Fatalf("first event: %+v, want primary next, both ready", st)
			}

			// The primary rate-limits the first call: the job is not cooling
			// (the backup is ready), so the answer says retry now.
			sent := time.Now()
			rec := post(t, srv.Config.Handler, "/documents/d/evaluate")
			if p := decodeProblem(t, rec); rec.Code != http.StatusServiceUnavailable || str(p.JobState) != "ready" ||
				str(p.Reason) != classify.ReasonRateLimited || p.RetryAfterSeconds != nil || rec.Header().Get("Retry-After") != "" {
				t.Fatalf("first call: %d %s, want 503 job_state ready for rate_limited, no wait", rec.Code, rec.Body)
			}
			st := waitStatus(t, events, func(st httpmw.RetryStatus) bool { return st.Upstream == "backup" })
			// The pushed status is read after the call was sent; it judges
			// the upstream with the clock of the job's read in the same
			// trip, which may run before the trip lands (a loaded machine, a
			// cluster's other node) but not before the call: so the wait is
			// the hint give or take the time from the call to the status,
			// which load stretches (it read 91 s under load).
			slop := int64(time.Since(sent)/time.Second) + 1
			if u := st.Upstreams[0]; u.State != "cooling_down" || u.Reason != classify.ReasonRateLimited ||
				u.RetryAfterSeconds < 90-slop || u.RetryAfterSeconds > 90+slop {
				t.Fatalf("primary after its rate limit: %+v, want cooling 90±%d s for rate_limited", u, slop)
			}
			if u := st.Upstreams[1]; u != (httpmw.State{Upstream: "backup", State: "ready"}) {
				t.Fatalf("backup: %+v, want ready", u)
			}
			if st.JobState == gate.UpstreamCooling.String() {
				t.Fatalf("job state %q while the backup is ready", st.JobState)
			}
			var rs httpmw.RetryStatus
			if rec := get(t, srv.Config.Handler, "/documents/d/retry-status"); json.Unmarshal(rec.Body.Bytes(), &rs) != nil || rs.Upstream != "backup" {
				t.Fatalf("status route: %s, want backup next", rec.Body)
			}

			// The retry runs on the backup at once, which rate-limits too.
			if rec := post(t, srv.Config.Handler, "/documents/d/evaluate"); rec.Code == http.StatusOK {
				t.Fatalf("second call: %d", rec.Code)
			}
			if len(used) != 2 || used[0] != "primary" || used[1] != "backup" {
				t.Fatalf("calls ran on %v, want primary then backup", used)
			}
			// Every upstream refuses: one problem names both.
			rec = post(t, srv.Config.Handler, "/documents/d/evaluate")
			if rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("third call: %d %s, want 503", rec.Code, rec.Body)
			}
			p := decodeProblem(t, rec)
			if str(p.JobState) != "upstream_cooling" || len(p.Upstreams) != 2 {
				t.Fatalf("problem: %s, want upstream_cooling naming both upstreams", rec.Body)
			}
			for i, name := range []string{"primary", "backup"} {
				u := p.Upstreams[i]
				if u.Upstream != name || u.State != "cooling_down" || u.Reason != classify.ReasonRateLimited || u.RetryAfterSeconds < 1 || u.RetryAfterSeconds > 90 {
					t.Errorf("problem's upstream %d: %+v, want %s cooling for rate_limited", i, u, name)
				}
			}
			if soonest := min(p.Upstreams[0].RetryAfterSeconds, p.Upstreams[1].RetryAfterSeconds); rec.Header().Get("Retry-After") != itoa(soonest) {
				t.Errorf("Retry-After %q, want the soonest upstream's %d", rec.Header().Get("Retry-After"), soonest)
			}
			if len(used) != 2 {
				t.Fatalf("a call ran while every upstream refused: %v", used)
			}
		})
	}
}

// TestUpstreamsAbsentWithoutUpstream: a gate without upstreams adds nothing
// to its bodies.
func TestUpstreamsAbsentWithoutUpstream(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{UpstreamPolicy: gate.UpstreamPolicy{Off: true}})
	rec := get(t, router(g, httpmw.Options{}, nil), "/documents/d/retry-status")
	var raw map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["upstreams"]; ok {
		t.Fatalf("body %s: upstreams without an Upstream", rec.Body)
	}
	if _, ok := raw["upstream"]; ok {
		t.Fatalf("body %s: upstream without an Upstream", rec.Body)
	}
}

// waitStatus returns the first status event for which ok holds, within 5 s.
func waitStatus(t *testing.T, events <-chan sseEvent, ok func(httpmw.RetryStatus) bool) httpmw.RetryStatus {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, st := nextStatus(t, events, time.Until(deadline))
		if ok(st) {
			return st
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// An upstream an operator paused shows as paused with the time its pause
// has left, so a page can say when calls resume; a ready one beside it
// shows no wait.
func TestPausedUpstreamShowsItsEnd(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{Upstream: "primary", UpstreamPolicy: gate.UpstreamPolicy{Fallbacks: []string{"backup"}}})
			if err := g.PauseUpstream(context.Background(), "primary", 10*time.Minute, "key rotation"); err != nil {
				t.Fatal(err)
			}
			h := router(g, httpmw.Options{}, ok)
			var rs httpmw.RetryStatus
			if rec := get(t, h, "/documents/d/retry-status"); json.Unmarshal(rec.Body.Bytes(), &rs) != nil || len(rs.Upstreams) != 2 {
				t.Fatalf("status route: %s, want both upstreams", rec.Body)
			}
			// Whole seconds rounded up: 600 at once, less on a slow machine.
			if u := rs.Upstreams[0]; u.Upstream != "primary" || u.State != "paused" || u.RetryAfterSeconds < 500 || u.RetryAfterSeconds > 600 {
				t.Errorf("primary: %+v, want paused, about 600 s left", u)
			}
			if u := rs.Upstreams[1]; u != (httpmw.State{Upstream: "backup", State: "ready"}) {
				t.Errorf("backup: %+v, want ready, no wait", u)
			}
		})
	}
}
