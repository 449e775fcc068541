package httpmw_test

import (
	"context"
	"errors"
	"github.com/retrygate/retrygate/internal/limits"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// TestStatusHandlerRefusesItsOwnRouteKey: a StatusHandler given URLParam
// (the retry route's wiring, copied to the status route) used to name the
// status route's own job and answer "ready" forever, whatever the retry
// route's job did. It now answers 500, plain or streaming, and OnError
// gets ErrStatusOwnRoute; wrapped in PerTenant too.
func TestStatusHandlerRefusesItsOwnRouteKey(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	withTenant := func(r *http.Request) *http.Request {
		return r.WithContext(context.WithValue(r.Context(), tenantKey{}, "acme"))
	}
	for name, job := range map[string]httpmw.JobFunc{
		"URLParam":            httpmw.URLParam("id"),
		"PerTenant(URLParam)": httpmw.PerTenant(httpmw.URLParam("id"), tenant),
	} {
		t.Run(name, func(t *testing.T) {
			var logged atomic.Value
			opts := httpmw.Options{Job: job, OnError: func(_ *http.Request, err error) { logged.Store(err) }}
			r := chi.NewRouter()
			r.Route("/documents/{id}", func(r chi.Router) {
				r.With(httpmw.New(g, opts)).Post("/evaluate", func(w http.ResponseWriter, r *http.Request) { httpmw.Fail(r, errBoom) })
				r.Get("/retry-status", httpmw.StatusHandler(g, opts))
			})
			if exp, got := 429, record(r, withTenant(httptest.NewRequest(http.MethodPost, "/documents/42/evaluate", nil))).Code; exp != got {
				t.Fatalf("POST evaluate: exp %d, got %d", exp, got)
			}
			for _, accept := range []string{"application/json", "text/event-stream"} {
				req := withTenant(httptest.NewRequest(http.MethodGet, "/documents/42/retry-status", nil))
				req.Header.Set("Accept", accept)
				rec := record(r, req)
				if exp, got := 500, rec.Code; exp != got {
					t.Fatalf("GET retry-status (%s): exp %d, got %d: %s", accept, exp, got, rec.Body)
				}
				decodeProblem(t, rec)
				noLeak(t, rec.Body.String())
				if err, _ := logged.Load().(error); !errors.Is(err, httpmw.ErrStatusOwnRoute) {
					t.Errorf("OnError got %v, want ErrStatusOwnRoute", err)
				}
			}
			// The retry route itself keeps URLParam's key.
			if job, err := httpmw.JobOf(r, withTenant(httptest.NewRequest(http.MethodPost, "/documents/42/evaluate", nil))); err != nil || job == "" {
				t.Errorf("JobOf the retry route: %q, %v", job, err)
			}
		})
	}
}

// TestJobOf: the retry route and the status route wired as the README
// shows name one job; every other wiring is told apart, and JobOf calls
// neither the gate nor the handler.
func TestJobOf(t *testing.T) {
	mr, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	var runs counter
	h := router(g, httpmw.Options{}, runs.wrap(ok))

	retry, err := httpmw.JobOf(h, httptest.NewRequest(http.MethodPost, "/documents/a%20b/evaluate", nil))
	if err != nil {
		t.Fatal(err)
	}
	status, err := httpmw.JobOf(h, httptest.NewRequest(http.MethodGet, "/documents/a%20b/retry-status", nil))
	if err != nil {
		t.Fatal(err)
	}
	if exp := evaluatePattern + " a b"; retry != exp || status != exp {
		t.Errorf("JobOf: retry %q, status %q, want both %q", retry, status, exp)
	}
	if n := runs.n.Load(); n != 0 || len(mr.Keys()) != 0 {
		t.Errorf("JobOf ran the handler %d times and wrote keys %q", n, mr.Keys())
	}

	// A status route keyed with another pattern: JobOf tells them apart.
	typo := chi.NewRouter()
	typo.Get("/documents/{id}/retry-status", httpmw.StatusHandler(g, httpmw.Options{Job: httpmw.URLParamAs("/documents/{id}/evalute", "id")}))
	if other, err := httpmw.JobOf(typo, httptest.NewRequest(http.MethodGet, "/documents/a%20b/retry-status", nil)); err != nil || other == retry {
		t.Errorf("a status route with another namespace: %q, %v; want a key other than %q", other, err, retry)
	}
	// No httpmw handler on the way, or a key the JobFunc refuses.
	if _, err := httpmw.JobOf(h, httptest.NewRequest(http.MethodGet, "/documents/42/nothing-here", nil)); err == nil {
		t.Error("JobOf of a request that reaches no httpmw handler: exp an error")
	}
	if job, err := httpmw.JobOf(h, httptest.NewRequest(http.MethodPost, "/documents/"+strings.Repeat("x", limits.MaxJobLen)+"/evaluate", nil)); !errors.Is(err, gate.ErrInvalidJob) || job != "" {
		t.Errorf("JobOf of a bad id: %q, %v; want ErrInvalidJob", job, err)
	}
}

func record(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}
