package httpmw_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
)

// callModel stands for the LLM call; here the provider is overloaded.
func callModel(ctx context.Context, id string) (string, error) {
	return "", &classify.HTTPError{StatusCode: http.StatusServiceUnavailable}
}

// evaluate is the gated handler: it reports the model's error with Fail and
// lets the middleware answer.
func evaluate(w http.ResponseWriter, r *http.Request) {
	out, err := callModel(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		httpmw.Fail(r, err) // classified by the gate; the middleware answers 429 or 422
		return
	}
	_, _ = io.WriteString(w, out)
}

// Mount the middleware on a chi route. The first click calls the model and
// fails provider-wide (overloaded): the job and the gate's upstream cool
// down, and the retry is answered at once, without calling the model (503:
// every job of the upstream waits), with the wait in seconds and in words.
func Example() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})

	g, err := gate.New(rdb, gate.Options{Cooldown: 5 * time.Minute, Backoff: gate.Backoff{Jitter: -1}})
	if err != nil {
		log.Fatal(err)
	}
	// One Options for both routes, so they cannot name different jobs: the
	// status route computes the evaluate route's key, named by that
	// route's pattern (what retrygate status --route takes).
	opts := httpmw.Options{
		Job:       httpmw.URLParamAs("/documents/{id}/evaluate", "id"),
		StatusURL: httpmw.SiblingURL("retry-status"),
	}
	r := chi.NewRouter()
	r.Route("/documents/{id}", func(r chi.Router) {
		r.With(httpmw.New(g, opts)).Post("/evaluate", evaluate)
		r.Get("/retry-status", httpmw.StatusHandler(g, opts))
	})

	for i := 0; i < 2; i++ {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/documents/42/evaluate", nil))
		var p struct {
			JobState  string `json:"job_state"`
			Detail    string `json:"detail"`
			StatusURL string `json:"status_url"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &p)
		fmt.Println(rec.Code, rec.Header().Get("Retry-After"), p.JobState, p.Detail, p.StatusURL)
	}

	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/documents/42/retry-status", nil))
	var st httpmw.RetryStatus
	_ = json.Unmarshal(rec.Body.Bytes(), &st)
	fmt.Println(rec.Code, st.JobState, st.RetryAfterSeconds, st.Attempts, st.Reason, st.Message)
	// Output:
	// 429 10 cooling_down Retry available in 10 s. /documents/42/retry-status
	// 503 10 upstream_cooling The upstream service is temporarily unavailable. Retry available in 10 s. /documents/42/retry-status
	// 200 upstream_cooling 10 0 overloaded Retry available in 10 s.
}

// JobOf, in a test, checks that a retry route and its status route name
// the same job, without Redis or the model: a StatusHandler given URLParam
// (the status route's own key) fails loudly instead of answering "ready"
// forever.
func ExampleJobOf() {
	// JobOf never calls the gate: no Redis listens at this address.
	g, err := gate.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), gate.Options{})
	if err != nil {
		log.Fatal(err)
	}
	opts := httpmw.Options{Job: httpmw.URLParamAs("/documents/{id}/evaluate", "id")}
	r := chi.NewRouter()
	r.Route("/documents/{id}", func(r chi.Router) {
		r.With(httpmw.New(g, opts)).Post("/evaluate", evaluate)
		r.Get("/retry-status", httpmw.StatusHandler(g, opts))
		r.Get("/wrong-status", httpmw.StatusHandler(g, httpmw.Options{Job: httpmw.URLParam("id")}))
	})
	for _, req := range []*http.Request{
		httptest.NewRequest(http.MethodPost, "/documents/42/evaluate", nil),
		httptest.NewRequest(http.MethodGet, "/documents/42/retry-status", nil),
		httptest.NewRequest(http.MethodGet, "/documents/42/wrong-status", nil),
	} {
		job, err := httpmw.JobOf(r, req)
		fmt.Printf("%s %s: %q %v\n", req.Method, req.URL.Path, job, errors.Is(err, httpmw.ErrStatusOwnRoute))
	}
	// Output:
	// POST /documents/42/evaluate: "/documents/{id}/evaluate 42" false
	// GET /documents/42/retry-status: "/documents/{id}/evaluate 42" false
	// GET /documents/42/wrong-status: "" true
}

// PerTenant keeps tenants apart: the same document id of two tenants is two
// jobs.
func ExamplePerTenant() {
	type tenantKey struct{}
	job := httpmw.PerTenant(httpmw.URLParam("id"), func(r *http.Request) (string, error) {
		t, _ := r.Context().Value(tenantKey{}).(string) // set by your auth middleware
		return t, nil
	})
	r := chi.NewRouter()
	r.Post("/documents/{id}/evaluate", func(w http.ResponseWriter, r *http.Request) {
		k, err := job(r)
		fmt.Printf("%q %v\n", k, err)
	})
	for _, tenant := range []string{"acme", "globex", ""} {
		req := httptest.NewRequest(http.MethodPost, "/documents/42/evaluate", nil)
		req = req.WithContext(context.WithValue(req.Context(), tenantKey{}, tenant))
		r.ServeHTTP(httptest.NewRecorder(), req)
	}
	// Output:
	// "acme /documents/{id}/evaluate 42" <nil>
	// "globex /documents/{id}/evaluate 42" <nil>
	// "" gate: invalid job key: empty tenant
}

func ExampleFormatWait() {
	for _, d := range []time.Duration{
		200 * time.Millisecond,
		45 * time.Second,
		4*time.Minute + 12*time.Second,
		12*time.Minute + 30*time.Second,
		2*time.Hour + 4*time.Minute + 10*time.Second,
	} {
		fmt.Println(httpmw.FormatWait(d))
	}
	// Output:
	// 1 s
	// 45 s
	// 4 min 12 s
	// 13 min
	// 2 h 5 min
}

// URLParamValue reads a tenant from the URL decoded as the job's id is,
// so two spellings of one tenant's job are one job.
func ExampleURLParamValue() {
	job := httpmw.PerTenant(httpmw.URLParamAs("/t/{tenant}/documents/{id}/evaluate", "id"), httpmw.URLParamValue("tenant"))
	r := chi.NewRouter()
	r.Post("/t/{tenant}/documents/{id}/evaluate", func(w http.ResponseWriter, r *http.Request) {
		k, err := job(r)
		fmt.Printf("%q %v\n", k, err)
	})
	for _, path := range []string{"/t/acme/documents/42/evaluate", "/t/%61cme/documents/4%32/evaluate"} {
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, path, nil))
	}
	// Output:
	// "acme /t/{tenant}/documents/{id}/evaluate 42" <nil>
	// "acme /t/{tenant}/documents/{id}/evaluate 42" <nil>
}

// Options.Priority and Options.Tenant name a request's place in line when
// its upstream's budget is short: here a person's click is interactive,
// the tenant comes from the URL, and a paid plan's tenant has twice the
// share. A tenant a client could stretch into the line's keys is refused.
func ExampleOptions_placeInLine() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	g, err := gate.New(rdb, gate.Options{Upstream: "openai"})
	if err != nil {
		log.Fatal(err)
	}
	paid := map[string]bool{"acme": true}
	opts := httpmw.Options{
		Job:      httpmw.PerTenant(httpmw.URLParamAs("/t/{tenant}/documents/{id}/evaluate", "id"), httpmw.URLParamValue("tenant")),
		Priority: func(*http.Request) (gate.Priority, error) { return gate.PriorityInteractive, nil },
		Tenant:   httpmw.URLParamValue("tenant"),
		TenantWeight: func(tenant string) float64 {
			if paid[tenant] {
				return 2
			}
			return 1
		},
	}
	r := chi.NewRouter()
	r.With(httpmw.New(g, opts)).Post("/t/{tenant}/documents/{id}/evaluate", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "evaluated")
	})
	for _, tenant := range []string{"acme", "%1B%5B31m"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/t/"+tenant+"/documents/42/evaluate", nil)
		req.Header.Set("Prefer", "wait=10") // waits for its turn when the budget is short
		r.ServeHTTP(rec, req)
		fmt.Println(rec.Code)
	}
	// Output:
	// 200
	// 400
}
