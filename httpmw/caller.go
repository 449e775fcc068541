package httpmw

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/limits"
)

// MaxTenantLen is the longest tenant Options.Tenant may return, in bytes:
// a tenant is stored in its upstream's line while it waits and may be a
// metric label, so one a client can stretch is refused with the 400
// problem (the gate's limit: gate.ErrInvalidTenant).
const MaxTenantLen = limits.MaxTenantLen

// errCaller marks an Options.Priority or Options.Tenant error as the
// request's fault: the 400 problem, without the function's text.
var errCaller = errors.New("httpmw: the request names no valid class or tenant")

// caller returns the request's context with the class and the tenant
// Options.Priority and Options.Tenant read (gate.WithPriority,
// gate.WithTenant), which the gate's line orders callers by when the
// upstream's budget is short. An error is answered here: 500 for
// ErrNotRouted (a mounting mistake), else 400.
func (c *config) caller(w http.ResponseWriter, r *http.Request) (context.Context, bool) {
	ctx := r.Context()
	if c.opts.Priority == nil && c.opts.Tenant == nil {
		return ctx, true
	}
	var err error
	if c.opts.Priority != nil {
		var p gate.Priority
		if p, err = c.opts.Priority(r); err == nil {
			ctx = gate.WithPriority(ctx, p)
		}
	}
	if err == nil && c.opts.Tenant != nil {
		var t string
		if t, err = c.opts.Tenant(r); err == nil {
			err = limits.CheckTenant(t)
		}
		if err == nil {
			weight := 1.0
			if c.opts.TenantWeight != nil {
				weight = c.opts.TenantWeight(t)
			}
			ctx = gate.WithTenant(ctx, t, weight)
		}
	}
	if err != nil {
		c.onError(r, err)
		if !errors.Is(err, ErrNotRouted) {
			err = fmt.Errorf("%w: %w", errCaller, err)
		}
		ref, h := c.invalidFor(err)
		ref.Detail = "The request does not name a valid class or tenant."
		if ref.Status == http.StatusInternalServerError {
			ref.Detail = "The server could not tell which class or tenant this request is for."
		}
		c.respond(w, r, ref, h)
		return nil, false
	}
	return ctx, true
}
