package httpmw

import (
	"context"
	"errors"
	"net/http"
)

// ErrStatusOwnRoute is the error of a StatusHandler whose JobFunc builds
// the key from the route the handler runs on (URLParam, also inside
// PerTenant): that key names a job no request to the retry route has, so the
// handler would answer "ready" forever. It is answered 500 and passed to
// Options.OnError. Give StatusHandler the Options given to New, with Job
// URLParamAs(<the retry route's pattern>, name).
var ErrStatusOwnRoute = errors.New("httpmw: StatusHandler's Options.Job builds the key from the status route's own pattern (URLParam); " +
	"use URLParamAs with the retry route's pattern, the same JobFunc as New's")

// errNoJobRoute: JobOf's request reached no middleware and no
// StatusHandler.
var errNoJobRoute = errors.New("httpmw: JobOf: the request reached no httpmw middleware or StatusHandler (check its method and path)")

// JobOf returns the job key computed for r by the middleware (New) or the
// StatusHandler that r reaches through h, without calling the gate or any
// handler after it: a test checks with it that a retry route and its
// status route name the same job,
//
//	retry, err1 := httpmw.JobOf(router, httptest.NewRequest("POST", "/documents/42/evaluate", nil))
//	status, err2 := httpmw.JobOf(router, httptest.NewRequest("GET", "/documents/42/retry-status", nil))
//
// and that they are not errors. Middleware in front of the httpmw handler
// runs as usual (routing, authentication). The error is the JobFunc's,
// ErrStatusOwnRoute, or one that says r reached neither.
func JobOf(h http.Handler, r *http.Request) (string, error) {
	p := &jobProbe{}
	h.ServeHTTP(discard{}, r.WithContext(context.WithValue(r.Context(), jobProbeKey{}, p)))
	if !p.reached {
		return "", errNoJobRoute
	}
	return p.job, p.err
}

// jobProbe is where JobOf's request leaves the key it reached.
type jobProbe struct {
	reached bool
	job     string
	err     error
}

type jobProbeKey struct{}

func probeOf(r *http.Request) *jobProbe {
	p, _ := r.Context().Value(jobProbeKey{}).(*jobProbe)
	return p
}

// discard is the response writer of JobOf's request.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) WriteHeader(int)             {}

// routeKeyUse, set in the context of a StatusHandler's request, is marked
// by URLParam's JobFunc: the key came from the route the request is on.
type routeKeyUse struct{}

func markRouteKey(r *http.Request) {
	if used, ok := r.Context().Value(routeKeyUse{}).(*bool); ok {
		*used = true
	}
}
