package main

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
)

// evaluateJob is the job key of a document's evaluation. The status and
// reset routes compute the same key as the evaluate route.
var evaluateJob = httpmw.URLParamAs("/documents/{id}/evaluate", "id")

// docJob is the job key the evaluate route computes for document id.
func docJob(id string) string {
	rctx := chi.NewRouteContext()
	rctx.URLParams.Add("id", id)
	r := (&http.Request{URL: &url.URL{}}).WithContext(context.WithValue(context.Background(), chi.RouteCtxKey, rctx))
	job, _ := evaluateJob(r)
	return job
}

// mountGated mounts the evaluate route behind the gate's middleware, and the
// retry-status route (JSON, or a stream of server-sent events). A click
// while the document is being evaluated sends Prefer: wait and gets the
// running call's result (Replay, the job being Done) instead of a second
// model call.
func (a *app) mountGated(r chi.Router) {
	opts := httpmw.Options{
		Job:       evaluateJob,
		StatusURL: httpmw.SiblingURL("retry-status"),
		Replay:    http.HandlerFunc(a.replay),
		MaxWait:   time.Minute,
		OnError:   a.logError,
		// A click on the page is a person waiting: when the provider's
		// budget is short, it goes before batch work. (A service reads
		// the class from what it trusts, such as the API key's plan.)
		Priority: func(*http.Request) (gate.Priority, error) { return gate.PriorityInteractive, nil },
	}
	r.With(a.followPlace, httpmw.New(a.gate, opts)).Post("/evaluate", a.evaluate)
	r.With(a.streaming).Method(http.MethodGet, "/retry-status", httpmw.StatusHandler(a.gate, opts))
}

// evaluate runs under the job's lease. A failure is handed to the gate with
// httpmw.Fail: the middleware records the cooldown or failed mark and
// answers with it (429 + Retry-After, 422), never with the upstream's text.
func (a *app) evaluate(w http.ResponseWriter, r *http.Request) {
	doc := documentOf(r)
	l := httpmw.Lease(r.Context())
	out, err := a.eval.evaluate(r.Context(), l.Upstream(), doc)
	if err != nil {
		httpmw.Fail(r, err)
		return
	}
	res := result{evaluation: out, EvaluatedAt: time.Now().UTC(), Fence: l.Fence()}
	if l.Upstream() != a.primary {
		res.Via = l.Upstream()
	}
	a.results.put(doc.ID, res)
	writeJSON(w, http.StatusOK, a.view(doc))
}

// replay answers a duplicate of an evaluation kept Done with its stored
// result.
func (a *app) replay(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, a.view(documentOf(r)))
}

func (a *app) logError(r *http.Request, err error) {
	a.logf("%s %s: %v", r.Method, r.URL.Path, err)
}
