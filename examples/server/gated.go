package main

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/retrygate/retrygate/httpmw"
)

// evaluateJob is the job key of a document's evaluation. The status and
// reset routes compute the same key as the evaluate route.
var evaluateJob = httpmw.URLParamAs("/documents/{id}/evaluate", "id")

// mountGated mounts the evaluate route behind the gate's middleware, and the
// retry-status route the page polls for its countdown.
func (a *app) mountGated(r chi.Router) {
	opts := httpmw.Options{
		Job:       evaluateJob,
		StatusURL: httpmw.SiblingURL("retry-status"),
		OnError:   a.logError,
	}
	r.With(httpmw.New(a.gate, opts)).Post("/evaluate", a.evaluate)
	r.Method(http.MethodGet, "/retry-status", httpmw.StatusHandler(a.gate, opts))
}

// evaluate runs under the job's lease. A failure is handed to the gate with
// httpmw.Fail: the middleware records the cooldown or failed mark and
// answers with it (429 + Retry-After, 422), never with the upstream's text.
func (a *app) evaluate(w http.ResponseWriter, r *http.Request) {
	doc := documentOf(r)
	out, err := a.eval.evaluate(r.Context(), doc)
	if err != nil {
		httpmw.Fail(r, err)
		return
	}
	a.results.put(doc.ID, result{evaluation: out, EvaluatedAt: time.Now().UTC(), Fence: httpmw.Lease(r.Context()).Fence()})
	writeJSON(w, http.StatusOK, a.view(doc))
}

func (a *app) logError(r *http.Request, err error) {
	a.logf("%s %s: %v", r.Method, r.URL.Path, err)
}
