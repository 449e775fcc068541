package httpmw_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A class or tenant the request cannot name is the request's fault: the
// 400 problem, no handler, no Redis key, and the cause (never its text in
// the body) to OnError; a tenant a client could stretch into the line's
// keys or a metric label is one of them. A mounting mistake is a 500.
func TestCallerRefusals(t *testing.T) {
	mr, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{})
	errSecret := errors.New("secret-db-text")
	header := func(r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil }
	for _, tc := range []struct {
		name     string
		opts     httpmw.Options
		tenant   string
		status   int
		onErrors int
	}{
		{"tenant too long", httpmw.Options{Tenant: header}, strings.Repeat("t", httpmw.MaxTenantLen+1), 400, 1},
		{"tenant with a control byte", httpmw.Options{Tenant: header}, "acme\x1b[31m", 400, 1},
		{"tenant not UTF-8", httpmw.Options{Tenant: header}, "acme\xff", 400, 1},
		// The C1 controls are U+0080 to U+009F; U+00A0, the no-break
		// space, is a character (https://www.unicode.org/charts/PDF/U0080.pdf).
		{"tenant with a C1 control, the first", httpmw.Options{Tenant: header}, "acme\u0080", 400, 1},
		{"tenant with a C1 control, the last", httpmw.Options{Tenant: header}, "acme\u009f", 400, 1},
		{"tenant with a no-break space", httpmw.Options{Tenant: header}, "acme\u00a0corp", 200, 0},
		{"tenant error", httpmw.Options{Tenant: func(*http.Request) (string, error) { return "", errSecret }}, "", 400, 1},
		{"priority error", httpmw.Options{Priority: func(*http.Request) (gate.Priority, error) { return 0, errSecret }}, "", 400, 1},
		{"tenant not routed", httpmw.Options{Tenant: httpmw.URLParamValue("tenant")}, "", 500, 1},
		{"longest tenant", httpmw.Options{Tenant: header}, strings.Repeat("t", httpmw.MaxTenantLen), 200, 0},
		{"tenant with a space and unicode", httpmw.Options{Tenant: header}, "Café Ünïcode", 200, 0},
		{"no tenant", httpmw.Options{Tenant: header}, "", 200, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mr.FlushAll()
			var errs []error
			tc.opts.OnError = func(_ *http.Request, err error) { errs = append(errs, err) }
			ran := false
			h := router(g, tc.opts, func(w http.ResponseWriter, _ *http.Request) { ran = true })
			req := httptest.NewRequest(http.MethodPost, "/documents/42/evaluate", nil)
			req.Header.Set("X-Tenant", tc.tenant)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if exp, got := tc.status, rec.Code; exp != got {
				t.Fatalf("status: exp %d, got %d (%s)", exp, got, rec.Body)
			}
			if exp, got := tc.onErrors, len(errs); exp != got {
				t.Errorf("OnError calls: exp %d, got %d (%v)", exp, got, errs)
			}
			if tc.status == 200 {
				if !ran {
					t.Error("the handler did not run")
				}
				return
			}
			if ran {
				t.Error("the handler ran")
			}
			p := decodeProblem(t, rec)
			exp := "The request does not name a valid class or tenant."
			if tc.status == 500 { // a mounting mistake: the request is not at fault
				exp = "The server could not tell which class or tenant this request is for."
			}
			if p.Detail != exp {
				t.Errorf("detail: exp %q, got %q", exp, p.Detail)
			}
			if p.JobState != nil {
				t.Errorf("job_state %q on a request refused before the gate", *p.JobState)
			}
			if strings.Contains(rec.Body.String(), "secret") || strings.Contains(rec.Body.String(), "\x1b") {
				t.Errorf("body leaks the cause: %s", rec.Body)
			}
			if keys := mr.Keys(); len(keys) != 0 {
				t.Errorf("a refused request wrote %v", keys)
			}
		})
	}
}
