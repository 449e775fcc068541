package main

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
)

// app holds what the handlers share.
type app struct {
	gate *gate.Gate
	// primary is the gate's first upstream (Options.Upstream); a result from
	// another one is shown as done via it.
	primary string
	// backup is the gate's fallback upstream; empty without one.
	backup  string
	eval    *evaluator
	results *results
	// failures remembers each document's last failure (nil: none shown).
	failures *failures
	stats    *stats
	// logf logs what clients must not see (upstream and Redis errors).
	logf func(format string, args ...any)
	// shutdown is closed when the server shuts down: it ends the event
	// streams, which http.Server.Shutdown would otherwise wait for.
	shutdown chan struct{}
	// pageStreams shares the page streams (GET /api/events) among
	// clients.
	pageStreams *httpmw.Streams
	// places are the documents whose click waits in line, for the
	// streams.
	places *places
}

// streaming gives a long-lived response a context that also ends on
// shutdown; requests that do work (an evaluation) finish instead.
func (a *app) streaming(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			select {
			case <-a.shutdown:
				cancel()
			case <-ctx.Done():
			}
		}()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// routes builds the demo's HTTP API and page.
func (a *app) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Get("/", servePage)
	r.Get("/api/documents", a.listDocuments)
	r.Get("/api/stats", a.getStats)
	r.With(a.streaming).Get("/api/events", a.events)
	r.Get("/api/status", a.snapshot) // the stream's updates, in one JSON body
	r.Route("/documents/{id}", func(r chi.Router) {
		r.Use(requireDocument)
		r.Get("/", a.getDocument)
		a.mountGated(r)
		r.Post("/reset", a.resetDocument) // the demo's; an operator-only action in a service (doc.go)
	})
	return r
}

type docKey struct{}

// requireDocument answers 404 for unknown documents before the gate sees
// them, so no job key is ever written for one.
func requireDocument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc, ok := findDocument(chi.URLParam(r, "id"))
		if !ok {
			writeProblem(w, http.StatusNotFound, "No such document.")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), docKey{}, doc)))
	})
}

func documentOf(r *http.Request) document {
	d, _ := r.Context().Value(docKey{}).(document)
	return d
}

// documentView is a document as the API shows it.
type documentView struct {
	document
	Result *result `json:"result,omitempty"`
	// LastFailure is the last evaluation that failed, kept after its
	// cooldown ended; the page shows it while it is newer than Result.
	LastFailure *failure `json:"last_failure,omitempty"`
}

func (a *app) view(d document) documentView {
	v := documentView{document: d}
	if res, ok := a.results.get(d.ID); ok {
		v.Result = &res
	}
	if a.failures != nil {
		if f, ok := a.failures.get(d.ID); ok {
			v.LastFailure = &f
		}
	}
	return v
}

func (a *app) listDocuments(w http.ResponseWriter, _ *http.Request) {
	out := make([]documentView, 0, len(catalog))
	for _, d := range catalog {
		out = append(out, a.view(d))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *app) getDocument(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, a.view(documentOf(r)))
}

// statsView is GET /api/stats.
type statsView struct {
	countersView
	Upstream upstreamView `json:"upstream"`
	// Backup names the upstream jobs run on while the first one cools or
	// pauses; empty without one.
	Backup string `json:"backup,omitempty"`
	// BackupUpstream is the backup's state (a key-wide story can land on
	// it too); omitted without one.
	BackupUpstream *upstreamView `json:"backup_upstream,omitempty"`
}

type upstreamView struct {
	Name string `json:"name"`
	// State is "ready", "cooling_down" or "paused".
	State             string    `json:"state"`
	RetryAfterSeconds float64   `json:"retry_after_seconds"`
	RetryAt           time.Time `json:"retry_at,omitzero"`
	Reason            string    `json:"reason,omitempty"`
}

func (a *app) getStats(w http.ResponseWriter, r *http.Request) {
	v := statsView{countersView: a.stats.view(), Backup: a.backup}
	ups, err := a.gate.Upstreams(r.Context())
	if err != nil || len(ups) == 0 {
		writeProblem(w, http.StatusServiceUnavailable, "The gate's Redis cannot be reached.")
		return
	}
	v.Upstream = upstreamViewOf(ups[0]) // the primary
	if len(ups) > 1 {
		b := upstreamViewOf(ups[1])
		v.BackupUpstream = &b
	}
	writeJSON(w, http.StatusOK, v)
}

func upstreamViewOf(up gate.UpstreamStatus) upstreamView {
	v := upstreamView{Name: up.Upstream, State: up.State.String(), Reason: up.Reason,
		RetryAfterSeconds: up.RetryAfter.Seconds()}
	if up.RetryAfter > 0 {
		v.RetryAt = time.Now().Add(up.RetryAfter).UTC()
	}
	return v
}

// resetDocument clears a failed mark or cooldown: the operator's action.
func (a *app) resetDocument(w http.ResponseWriter, r *http.Request) {
	job, err := evaluateJob(r)
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "The request does not name a valid document.")
		return
	}
	if err := a.gate.Reset(r.Context(), job); err != nil {
		if _, ok := gate.RetryAfter(err); ok {
			writeProblem(w, http.StatusConflict, "The document is being evaluated; reset it when the call ends.")
			return
		}
		writeProblem(w, http.StatusServiceUnavailable, "The gate's Redis cannot be reached.")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeProblem writes an RFC 9457 problem with a message for people; never
// upstream or Redis error text.
func writeProblem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail,
	})
}
