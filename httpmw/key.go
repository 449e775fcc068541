package httpmw

import (
	"errors"
	"fmt"
	"github.com/retrygate/retrygate/internal/limits"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/retrygate/retrygate/gate"
)

// ErrNotRouted is returned by URLParam and URLParamAs when the request
// carries no chi URL parameter of that name: the middleware was mounted
// before routing (r.Use on the root router) or the route has no such
// parameter. It is a server mistake, answered 500.
var ErrNotRouted = errors.New("httpmw: URL parameter not routed")

// URLParam returns a JobFunc whose key is the chi route pattern and the URL
// parameter name, so POST /documents/{id}/evaluate and POST /images/{id}/evaluate
// never share a job. The parameter is percent-decoded once, so /documents/abc
// and /documents/%61bc are the same job.
//
// The pattern is only complete after routing: mount the middleware with
// r.With(...).Post(...), where it is the route's full pattern. With r.Use
// inside r.Route("/documents/{id}", ...) it is the mount's
// ("/documents/{id}/*"), so every route of that subrouter shares one job per
// id. Mounted with r.Use on the root router, the parameter is unknown and
// the JobFunc fails with ErrNotRouted.
//
// A StatusHandler, on its own route, cannot use it: it would name the
// status route's job, which no retry has. It answers 500 with
// ErrStatusOwnRoute instead of "ready" forever. Give New and StatusHandler
// one JobFunc, URLParamAs with the retry route's full pattern.
func URLParam(name string) JobFunc {
	if name == "" {
		panic("httpmw: URLParam: empty parameter name")
	}
	return func(r *http.Request) (string, error) {
		markRouteKey(r)
		rctx := chi.RouteContext(r.Context())
		if rctx == nil {
			return "", fmt.Errorf("%w: no chi route context for {%s}", ErrNotRouted, name)
		}
		return paramKey(r, rctx, rctx.RoutePattern(), name)
	}
}

// URLParamAs is URLParam with a fixed namespace instead of the route
// pattern: URLParamAs("/documents/{id}/evaluate", "id") computes, on any
// route with an {id} parameter, the key URLParam("id") computes on the route
// /documents/{id}/evaluate. It is the JobFunc to give both New and the
// StatusHandler of a retry route: the two routes then cannot name different
// jobs. The retry route's pattern as namespace keeps the key the one
// URLParam would build there, which retrygate status --route reads.
func URLParamAs(namespace, name string) JobFunc {
	if namespace == "" || name == "" {
		panic("httpmw: URLParamAs: empty namespace or parameter name")
	}
	return func(r *http.Request) (string, error) {
		rctx := chi.RouteContext(r.Context())
		if rctx == nil {
			return "", fmt.Errorf("%w: no chi route context for {%s}", ErrNotRouted, name)
		}
		return paramKey(r, rctx, namespace, name)
	}
}

// URLParamValue returns the tenant function for PerTenant when the tenant
// (or user) is in the URL: the chi URL parameter name, percent-decoded
// exactly as URLParam decodes a job's id, so /t/acme/... and /t/%61cme/...
// are one tenant. chi.URLParam would hand out the parameter as the client spelled
// it whenever the path holds an escape, and one tenant would be two.
// Unicode forms are not normalized: "café" in NFC and in NFD are two
// tenants. A request without the parameter fails with ErrNotRouted.
func URLParamValue(name string) func(r *http.Request) (string, error) {
	if name == "" {
		panic("httpmw: URLParamValue: empty parameter name")
	}
	return func(r *http.Request) (string, error) {
		rctx := chi.RouteContext(r.Context())
		if rctx == nil {
			return "", fmt.Errorf("%w: no chi route context for {%s}", ErrNotRouted, name)
		}
		return paramValue(r, rctx, name)
	}
}

// paramKey builds namespace + " " + the decoded parameter.
func paramKey(r *http.Request, rctx *chi.Context, namespace, name string) (string, error) {
	v, err := paramValue(r, rctx, name)
	if err != nil {
		return "", err
	}
	return join(namespace, v)
}

// paramValue is the URL parameter name, decoded once: the one spelling of
// an id or a tenant in a job key.
func paramValue(r *http.Request, rctx *chi.Context, name string) (string, error) {
	v, ok := lastParam(rctx, name)
	if !ok {
		return "", fmt.Errorf("%w: route %q has no {%s}", ErrNotRouted, rctx.RoutePattern(), name)
	}
	// chi routes on RawPath when the URL has one, and then hands out the
	// parameter still percent-encoded; decode it so every spelling of one
	// id is one job. Without RawPath it is already decoded: decoding again
	// would merge "%2561" with "a".
	if r.URL.RawPath != "" {
		d, err := url.PathUnescape(v)
		if err != nil {
			return "", invalidJob("bad percent-encoding in URL parameter")
		}
		v = d
	}
	if v == "" {
		return "", invalidJob("empty URL parameter")
	}
	return v, nil
}

// lastParam is chi.URLParam that also tells a missing parameter from an
// empty one; the innermost route's value wins, as in chi.
func lastParam(rctx *chi.Context, name string) (string, bool) {
	for i := len(rctx.URLParams.Keys) - 1; i >= 0; i-- {
		if rctx.URLParams.Keys[i] == name {
			return rctx.URLParams.Values[i], true
		}
	}
	return "", false
}

// PerTenant returns a JobFunc whose key is tenant's value (a tenant, a
// user) followed by job's key, so two tenants never share a job. An empty
// tenant is an error: a request without a tenant must not share one job
// with every other such request. Tenant's value is used as it is: a
// tenant from the URL needs URLParamValue, which decodes it as the job's
// id is decoded. A tenant from your authentication is already one
// spelling.
func PerTenant(job JobFunc, tenant func(r *http.Request) (string, error)) JobFunc {
	if job == nil || tenant == nil {
		panic("httpmw: PerTenant: nil job or tenant function")
	}
	return func(r *http.Request) (string, error) {
		s, err := tenant(r)
		if err != nil {
			return "", err
		}
		if s == "" {
			return "", invalidJob("empty tenant")
		}
		k, err := job(r)
		if err != nil {
			return "", err
		}
		if k == "" {
			return "", invalidJob("empty")
		}
		return join(s, k)
	}
}

// join makes "<prefix> <rest>" with the prefix's '%' and ' ' escaped, so the
// first space splits the key unambiguously and distinct pairs never collide.
func join(prefix, rest string) (string, error) {
	k := keyEscaper.Replace(prefix) + " " + rest
	if len(k) > limits.MaxJobLen {
		return "", fmt.Errorf("%w: over the %d-byte limit", gate.ErrInvalidJob, limits.MaxJobLen)
	}
	return k, nil
}

var keyEscaper = strings.NewReplacer("%", "%25", " ", "%20")

// SiblingURL returns an Options.StatusURL that replaces the last segment of
// the request's path with name: for POST /documents/42/evaluate,
// SiblingURL("retry-status") gives /documents/42/retry-status. The path
// keeps the request's percent-encoding.
func SiblingURL(name string) func(r *http.Request) string {
	if name == "" || strings.Contains(name, "/") {
		panic("httpmw: SiblingURL: name must be one non-empty path segment")
	}
	return func(r *http.Request) string {
		p := strings.TrimSuffix(r.URL.EscapedPath(), "/")
		return p[:strings.LastIndexByte(p, '/')+1] + name
	}
}

// invalidJob returns an error matching gate.ErrInvalidJob that says why.
func invalidJob(why string) error { return fmt.Errorf("%w: %s", gate.ErrInvalidJob, why) }
