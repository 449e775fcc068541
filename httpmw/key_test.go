package httpmw_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/limits"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// TestHostileKeys sends job ids a user controls through the URL. Each gets
// 400 or its own safely stored job, never a 500 or Redis text; spellings of
// one id share one job, so re-encoding cannot dodge a cooldown.
func TestHostileKeys(t *testing.T) {
	long := strings.Repeat("a", 2048)
	cases := []struct {
		name, path string
		exp        int
		job        string // the job the handler runs under; "" for 400/404
	}{
		{"plain", "/documents/abc/evaluate", 200, key("abc")},
		{"braces", "/documents/{}/evaluate", 200, key("{}")},
		{"encoded braces", "/documents/%7B%7D/evaluate", 200, key("{}")},
		{"hash tag injection", "/documents/x%7D:lock%7B/evaluate", 200, key("x}:lock{")},
		{"NUL", "/documents/%00/evaluate", 200, key("\x00")},
		{"CRLF", "/documents/a%0D%0Ab/evaluate", 200, key("a\r\nb")},
		{"invalid UTF-8", "/documents/%FF%FE/evaluate", 200, key("\xff\xfe")},
		{"unicode", "/documents/%E2%9C%93/evaluate", 200, key("✓")},
		{"unicode raw", "/documents/✓/evaluate", 200, key("✓")},
		{"dot dot", "/documents/../evaluate", 200, key("..")},
		{"encoded traversal", "/documents/..%2F..%2Fetc/evaluate", 200, key("../../etc")},
		{"encoded percent", "/documents/%2561/evaluate", 200, key("%61")},
		{"space", "/documents/a%20b/evaluate", 200, key("a b")},
		{"glob", "/documents/*%3F[/evaluate", 200, key("*?[")},
		{"2 KiB", "/documents/" + long + "/evaluate", 400, ""},
		{"just under the limit", "/documents/" + long[:limits.MaxJobLen-len(key(""))] + "/evaluate", 200, key(long[:limits.MaxJobLen-len(key(""))])},
		{"one over the limit", "/documents/" + long[:limits.MaxJobLen-len(key(""))+1] + "/evaluate", 400, ""},
		{"empty", "/documents//evaluate", 400, ""},
	}
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{})
			var got string
			h := router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) {
				got = httpmw.Lease(r.Context()).Job()
				httpmw.Fail(r, errBoom) // cool it down, so spellings can be compared
			})
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					got = ""
					rec := post(t, h, c.path)
					noLeak(t, rec.Body.String())
					if c.exp == 400 {
						if exp, got := 400, rec.Code; exp != got {
							t.Fatalf("status: exp %d, got %d (%s)", exp, got, rec.Body)
						}
						p := decodeProblem(t, rec)
						if p.JobState != nil {
							t.Errorf("job_state on a 400: %q", *p.JobState)
						}
						return
					}
					// The first spelling runs and cools the job; a second
					// spelling of the same id is refused, not run.
					if rec.Code != 429 && rec.Code != 200 {
						t.Fatalf("status: %d (%s)", rec.Code, rec.Body)
					}
					if got != "" && got != c.job {
						t.Errorf("job: exp %q, got %q", c.job, got)
					}
					if got == "" && rec.Code == 429 && status(t, g, c.job).State != gate.CoolingDown {
						t.Errorf("refused, but job %q is not cooling down", c.job)
					}
					lock := keyspace.Job(gatetest.Prefix(g), c.job)
					var err error
					if err != nil {
						t.Fatal(err)
					}
					if j, ok := keyspace.JobFromKey(gatetest.Prefix(g), lock); !ok || j != c.job {
						t.Errorf("key %q does not round-trip to the job: %q, %v", lock, j, ok)
					}
					if strings.Count(lock, "{") != 1 || strings.Count(lock, "}") != 1 {
						t.Errorf("lock key %q has a broken hash tag", lock)
					}
				})
			}
		})
	}
}

// TestEncodedSpellingCannotDodgeCooldown: /documents/%61bc is /documents/abc.
func TestEncodedSpellingCannotDodgeCooldown(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	var runs counter
	h := router(g, httpmw.Options{}, runs.wrap(func(w http.ResponseWriter, r *http.Request) { httpmw.Fail(r, errBoom) }))
	for _, p := range []string{"/documents/abc/evaluate", "/documents/%61bc/evaluate", "/documents/%61%62%63/evaluate"} {
		if exp, got := 429, post(t, h, p).Code; exp != got {
			t.Errorf("%s: exp %d, got %d", p, exp, got)
		}
	}
	if exp, got := int64(1), runs.n.Load(); exp != got {
		t.Errorf("handler runs: exp %d, got %d", exp, got)
	}
}

// TestRoutesNeverShareJobs: the same id on two routes is two jobs.
func TestRoutesNeverShareJobs(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	mw := httpmw.New(g, httpmw.Options{Job: httpmw.URLParam("id")})
	var jobs []string
	h := func(w http.ResponseWriter, r *http.Request) { jobs = append(jobs, httpmw.Lease(r.Context()).Job()) }
	r := chi.NewRouter()
	r.With(mw).Post("/documents/{id}/evaluate", h)
	r.With(mw).Post("/images/{id}/evaluate", h)
	r.Route("/v2/documents/{id}", func(r chi.Router) {
		r.Use(mw) // the mount's pattern: one job per id for the whole subrouter
		r.Post("/summarize", h)
		r.Post("/translate", h)
	})
	for _, p := range []string{"/documents/1/evaluate", "/images/1/evaluate", "/v2/documents/1/summarize", "/v2/documents/1/translate"} {
		if exp, got := 200, post(t, r, p).Code; exp != got {
			t.Fatalf("%s: exp %d, got %d", p, exp, got)
		}
	}
	exp := []string{"/documents/{id}/evaluate 1", "/images/{id}/evaluate 1", "/v2/documents/{id}/* 1", "/v2/documents/{id}/* 1"}
	if fmt.Sprint(exp) != fmt.Sprint(jobs) {
		t.Errorf("jobs:\nexp %q\ngot %q", exp, jobs)
	}
}

// TestNotRouted: mounted before routing, URLParam cannot know the id; the
// server's mistake is a 500 with a generic problem, reported to OnError.
func TestNotRouted(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	var logged error
	r := chi.NewRouter()
	r.Use(httpmw.New(g, httpmw.Options{Job: httpmw.URLParam("id"), OnError: func(_ *http.Request, err error) { logged = err }}))
	r.Post(evaluatePattern, ok)
	rec := post(t, r, "/documents/1/evaluate")
	if exp, got := 500, rec.Code; exp != got {
		t.Fatalf("exp %d, got %d", exp, got)
	}
	if exp, got := "The server could not tell which job this request is for.", decodeProblem(t, rec).Detail; exp != got {
		t.Errorf("detail: exp %q, got %q", exp, got)
	}
	noLeak(t, rec.Body.String())
	if !errors.Is(logged, httpmw.ErrNotRouted) {
		t.Errorf("OnError got %v, want ErrNotRouted", logged)
	}
	// Without chi at all.
	if _, err := httpmw.URLParam("id")(httptest.NewRequest(http.MethodGet, "/", nil)); !errors.Is(err, httpmw.ErrNotRouted) {
		t.Errorf("no route context: %v", err)
	}
}

type tenantKey struct{}

func tenant(r *http.Request) (string, error) {
	s, _ := r.Context().Value(tenantKey{}).(string)
	return s, nil
}

// TestPerTenant: tenants never share a job, a missing tenant is a 400, and
// separators in tenant names cannot forge another tenant's key.
func TestPerTenant(t *testing.T) {
	job := httpmw.PerTenant(httpmw.URLParam("id"), tenant)
	keyFor := func(ten, id string) (string, error) {
		var k string
		var err error
		r := chi.NewRouter()
		r.Post(evaluatePattern, func(w http.ResponseWriter, r *http.Request) { k, err = job(r) })
		req := httptest.NewRequest(http.MethodPost, "/documents/"+id+"/evaluate", nil)
		if ten != "" {
			req = req.WithContext(context.WithValue(req.Context(), tenantKey{}, ten))
		}
		r.ServeHTTP(httptest.NewRecorder(), req)
		return k, err
	}
	a, _ := keyFor("acme", "1")
	b, _ := keyFor("globex", "1")
	if a == b || a == "" {
		t.Errorf("tenants share a key: %q, %q", a, b)
	}
	// A tenant name holding the separator must not forge another tenant's
	// key: tenant "acme <pattern> x" with id "1" against tenant "acme" with
	// id "x <pattern> 1".
	x, _ := keyFor("acme "+evaluatePattern+" x", "1")
	y, _ := keyFor("acme", "x%20%2Fdocuments%2F%7Bid%7D%2Fevaluate%201")
	if x == y || x == "" {
		t.Errorf("forged tenant collides: %q", x)
	}
	if _, err := keyFor("", "1"); !errors.Is(err, gate.ErrInvalidJob) {
		t.Errorf("missing tenant: %v, want ErrInvalidJob", err)
	}

	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	rec := post(t, router(g, httpmw.Options{Job: job}, ok), "/documents/1/evaluate")
	if exp, got := 400, rec.Code; exp != got {
		t.Errorf("no tenant: exp %d, got %d", exp, got)
	}
}

// TestStatusURL: SiblingURL keeps the request's encoding.
func TestStatusURL(t *testing.T) {
	for path, exp := range map[string]string{
		"/documents/42/evaluate":      "/documents/42/retry-status",
		"/documents/a%2Fb/evaluate":   "/documents/a%2Fb/retry-status",
		"/documents/42/evaluate/":     "/documents/42/retry-status",
		"/documents/%3Cx%3E/evaluate": "/documents/%3Cx%3E/retry-status",
	} {
		if got := httpmw.SiblingURL("retry-status")(httptest.NewRequest(http.MethodPost, path, nil)); exp != got {
			t.Errorf("%s: exp %q, got %q", path, exp, got)
		}
	}
}

// TestPerTenantSpellings: a tenant and a job read from the URL, spelled
// two ways by a client over HTTP, are one job and make one upstream call
// when the tenant comes from URLParamValue; chi.URLParam's tenant is the
// client's spelling, two jobs (the row that shows the difference). Unicode
// forms are not normalized: NFC and NFD are two tenants, as doc.go says.
func TestPerTenantSpellings(t *testing.T) {
	const pattern = "/tenants/{tenant}/documents/{id}/evaluate"
	rawTenant := func(r *http.Request) (string, error) { return chi.URLParam(r, "tenant"), nil }
	for _, tc := range []struct {
		name   string
		tenant func(r *http.Request) (string, error)
		paths  []string
		calls  int64
	}{
		{"URLParamValue", httpmw.URLParamValue("tenant"),
			[]string{"/tenants/acme/documents/42/evaluate", "/tenants/%61cme/documents/4%32/evaluate", "/tenants/ac%6De/documents/42/evaluate"}, 1},
		{"URLParamValue-slash", httpmw.URLParamValue("tenant"),
			[]string{"/tenants/a%2Fb/documents/42/evaluate", "/tenants/a%2fb/documents/4%32/evaluate"}, 1},
		{"chi.URLParam", rawTenant,
			[]string{"/tenants/acme/documents/42/evaluate", "/tenants/%61cme/documents/4%32/evaluate"}, 2},
		{"unicode-forms", httpmw.URLParamValue("tenant"),
			[]string{"/tenants/caf%C3%A9/documents/42/evaluate", "/tenants/cafe%CC%81/documents/42/evaluate"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rdb := redistest.Miniredis(t)
			g := newGate(t, rdb, gate.Options{})
			var calls atomic.Int64
			r := chi.NewRouter()
			mw := httpmw.New(g, httpmw.Options{Job: httpmw.PerTenant(httpmw.URLParamAs(pattern, "id"), tc.tenant)})
			r.With(mw).Post(pattern, func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				httpmw.Fail(r, errBoom) // the job cools: another spelling of it is refused
			})
			srv := httptest.NewServer(r)
			defer srv.Close()
			for _, p := range tc.paths {
				res, err := srv.Client().Post(srv.URL+p, "text/plain", nil)
				if err != nil {
					t.Fatal(err)
				}
				_ = res.Body.Close()
				if res.StatusCode != http.StatusTooManyRequests {
					t.Fatalf("%s: %d, want 429", p, res.StatusCode)
				}
			}
			if exp, got := tc.calls, calls.Load(); exp != got {
				t.Errorf("upstream calls: exp %d, got %d", exp, got)
			}
		})
	}
}

// TestOnErrorCarriesNoRequestBytes: the errors OnError gets for hostile
// ids (a key rejected, Redis unreachable, the status stream's Redis error)
// carry none of the request's bytes, so an app that logs them writes no
// control byte a client chose; the request itself (r.URL.Path) is the
// app's to escape (the demo's logTo, examples/server).
func TestOnErrorCarriesNoRequestBytes(t *testing.T) {
	g := newGate(t, closedPortClient(t), gate.Options{})
	var mu sync.Mutex
	var errs []string
	h := router(g, httpmw.Options{OnError: func(_ *http.Request, err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err.Error())
	}}, ok)
	const hostile = "%0D%0Aforged%1B%5B31m%00%7F%C2%85"
	for _, path := range []string{
		"/documents/" + hostile + "/evaluate",                             // Redis unreachable
		"/documents/" + hostile + strings.Repeat("a", 2048) + "/evaluate", // over the limit
		"/documents/" + hostile + "/retry-status",
	} {
		method := http.MethodPost
		if strings.HasSuffix(path, "status") {
			method = http.MethodGet
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		if rec.Code != 503 && rec.Code != 400 {
			t.Fatalf("%s %s: %d, want 503 or 400", method, path, rec.Code)
		}
	}
	if len(errs) != 3 {
		t.Fatalf("OnError got %d errors, want 3: %q", len(errs), errs)
	}
	for _, e := range errs {
		if strings.Contains(e, "forged") || strings.ContainsFunc(e, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0x85 }) {
			t.Errorf("OnError's error carries the request's bytes: %q", e)
		}
	}
}
