package httpmw_test

import (
	"context"
	"github.com/retrygate/retrygate/internal/limits"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/retrygate/retrygate/internal/keyspace"

	"github.com/go-chi/chi/v5"
	"github.com/retrygate/retrygate/httpmw"
)

// FuzzJobKey feeds raw URL path segments and tenants through a chi router
// to the middleware's key functions. A key is never empty or over
// limits.MaxJobLen, the gate accepts every key it gets and stores it under a
// well-formed hash tag, and two requests share a key only when they name
// the same decoded id and tenant.
func FuzzJobKey(f *testing.F) {
	for _, s := range []string{"42", "abc", "%61bc", "{}", "%7B%7D", "%00", "%zz", "%", "✓", "%E2%9C%93",
		"..", "..%2F..%2Fetc", "a%20b", "a b", "%2561", "x%7D:lock%7B", strings.Repeat("a", 2048), "", "%FF"} {
		f.Add(s, "acme", s, "acme ")
	}
	f.Add("1", "acme "+evaluatePattern+" x", "x%20%2Fdocuments%2F%7Bid%7D%2Fevaluate%201", "acme") // separator forgery
	job := httpmw.PerTenant(httpmw.URLParam("id"), tenant)
	var key string
	var keyErr error
	r := chi.NewRouter()
	r.Post(evaluatePattern, func(w http.ResponseWriter, r *http.Request) { key, keyErr = job(r) })

	// keyOf routes one request; ok is false when the URL is not routable.
	keyOf := func(t *testing.T, seg, ten string) (k string, routed bool, err error) {
		req, perr := http.NewRequest(http.MethodPost, "http://x/documents/"+seg+"/evaluate", nil)
		if perr != nil {
			return "", false, nil
		}
		req = req.WithContext(context.WithValue(req.Context(), tenantKey{}, ten))
		key, keyErr = "", nil
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		if rec.Code == http.StatusNotFound || rec.Code == http.StatusMethodNotAllowed {
			return "", false, nil
		}
		return key, true, keyErr
	}
	// decoded is the id a request names, as a server would read it.
	decoded := func(seg string) (string, bool) {
		req, err := http.NewRequest(http.MethodPost, "http://x/documents/"+seg+"/evaluate", nil)
		if err != nil {
			return "", false
		}
		raw := strings.TrimPrefix(strings.TrimSuffix(req.URL.EscapedPath(), "/evaluate"), "/documents/")
		if strings.Contains(raw, "/") {
			return "", false
		}
		p, err := url.PathUnescape(raw)
		return p, err == nil
	}

	f.Fuzz(func(t *testing.T, seg1, ten1, seg2, ten2 string) {
		k1, ok1, err1 := keyOf(t, seg1, ten1)
		k2, ok2, err2 := keyOf(t, seg2, ten2)
		for _, c := range []struct {
			k   string
			ok  bool
			err error
		}{{k1, ok1, err1}, {k2, ok2, err2}} {
			if !c.ok || c.err != nil {
				continue
			}
			if c.k == "" || len(c.k) > limits.MaxJobLen {
				t.Fatalf("key of %d bytes accepted", len(c.k))
			}
			lock := keyspace.Job(keyspace.DefaultPrefix, c.k)
			var err error
			if err != nil {
				t.Fatalf("gate rejects key %q: %v", c.k, err)
			}
			if j, ok := keyspace.JobFromKey(keyspace.DefaultPrefix, lock); !ok || j != c.k {
				t.Fatalf("lock key %q does not round-trip to %q", lock, c.k)
			}
			if strings.Count(lock, "{") != 1 || strings.Count(lock, "}") != 1 || !utf8.ValidString(lock) {
				t.Fatalf("lock key %q is not a single well-formed hash tag", lock)
			}
		}
		if !ok1 || !ok2 || err1 != nil || err2 != nil {
			return
		}
		d1, dok1 := decoded(seg1)
		d2, dok2 := decoded(seg2)
		if !dok1 || !dok2 {
			return
		}
		same := d1 == d2 && ten1 == ten2
		if same != (k1 == k2) {
			t.Fatalf("ids %q/%q tenants %q/%q: keys %q, %q", d1, d2, ten1, ten2, k1, k2)
		}
	})
}
