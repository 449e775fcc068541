package httpmw_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// BenchmarkRefusal is a refused request in-process (no network between
// client and handler): the middleware refusing a job cooling in Redis, on
// a Gate that never saw it, against a handler that does one GET and writes
// the same 429. Allocations are the figure to read; make bench measures
// the same over real HTTP.
func BenchmarkRefusal(b *testing.B) {
	rdb := redistest.Server(b).Client(b)
	ctx := context.Background()
	const jobs = 1000
	prefix := redistest.UniqueKey(b)
	mw := httpmw.Options{Job: httpmw.URLParam("id")}
	fail := func(_ http.ResponseWriter, r *http.Request) {
		httpmw.Fail(r, classify.Transient(errBoom, time.Hour))
	}
	primer, err := gate.New(rdb, gate.Options{Prefix: prefix, Cooldown: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	r := chi.NewRouter()
	r.With(httpmw.New(primer, mw)).Post("/gate/{id}/evaluate", fail)
	var refusal *httptest.ResponseRecorder
	for i := range jobs {
		id := strconv.Itoa(i)
		for range 2 { // the first run fails and cools the job; the second is refused
			refusal = httptest.NewRecorder()
			r.ServeHTTP(refusal, httptest.NewRequest(http.MethodPost, "/gate/"+id+"/evaluate", nil))
		}
		rdb.Set(ctx, prefix+":get:"+id, "c:transient", time.Hour)
	}
	if refusal.Code != http.StatusTooManyRequests {
		b.Fatalf("priming: %d, want 429", refusal.Code)
	}
	fresh, err := gate.New(rdb, gate.Options{Prefix: prefix, Cooldown: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	r = chi.NewRouter()
	r.With(httpmw.New(fresh, mw)).Post("/gate/{id}/evaluate", fail)
	header, body := refusal.Header(), refusal.Body.Bytes()
	r.Post("/get/{id}/evaluate", func(w http.ResponseWriter, r *http.Request) {
		if err := rdb.Get(r.Context(), prefix+":get:"+chi.URLParam(r, "id")).Err(); err != nil {
			http.Error(w, "redis", http.StatusInternalServerError)
			return
		}
		for k, v := range header {
			w.Header().Set(k, v[0])
		}
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write(body)
	})
	for _, route := range []string{"get", "gate"} {
		b.Run(route, func(b *testing.B) {
			reqs := make([]*http.Request, jobs)
			for i := range reqs {
				reqs[i] = httptest.NewRequest(http.MethodPost, "/"+route+"/"+strconv.Itoa(i)+"/evaluate", nil)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				rec := httptest.NewRecorder()
				r.ServeHTTP(rec, reqs[i%jobs])
				if rec.Code != http.StatusTooManyRequests {
					b.Fatalf("%s: %d, want 429", route, rec.Code)
				}
			}
		})
	}
}
