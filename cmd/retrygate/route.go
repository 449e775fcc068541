package main

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/retrygate/retrygate/httpmw"
)

// routeJob is the job key httpmw.URLParam builds for a request to route
// whose URL parameter is value ("/documents/{id}/evaluate" and "42" give
// "/documents/{id}/evaluate 42"): it runs httpmw's own JobFunc on a
// request routed by chi, so the CLI and the middleware cannot drift.
func routeJob(route, value string) (string, error) {
	const param = "p"
	r, err := http.NewRequest(http.MethodGet, "/", nil)
	if err != nil {
		return "", err
	}
	rctx := chi.NewRouteContext()
	rctx.URLParams.Add(param, value)
	r = r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, rctx))
	return httpmw.URLParamAs(route, param)(r)
}

// routeFlag registers --route, shared by status and reset.
func routeFlag(fs *flagSet, route *string) {
	fs.StringVar(route, "route", "", "JOB is the URL parameter of a job httpmw keyed by this chi route `PATTERN` (URLParam on it, or URLParamAs with it) "+
		"(--route '/documents/{id}/evaluate' 42 is job \"/documents/{id}/evaluate 42\")")
}
