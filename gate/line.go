package gate

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/retrygate/retrygate/gate/internal/line"
	"github.com/retrygate/retrygate/internal/limits"
)

// Priority is a call's class when its upstream's budget cannot serve
// every caller: a higher class has its turn first; within a class the
// tenants share the turns (WithTenant). The zero Priority is the lowest.
type Priority uint8

// The named classes; any value between them orders as its number.
const (
	// PriorityBatch is work nobody waits for at a screen.
	PriorityBatch Priority = 64
	// PriorityNormal is a call's class when WithPriority does not say.
	PriorityNormal Priority = 128
	// PriorityInteractive is a person waiting for the answer.
	PriorityInteractive Priority = 192
)

type (
	priorityKey struct{}
	tenantKey   struct{}
)

// tenant is what WithTenant put on a context.
type tenant struct {
	name   string
	weight float64
}

// WithPriority returns a copy of ctx under which a call waiting for its
// upstream's budget has class p.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// WithTenant returns a copy of ctx under which a call waiting for its
// upstream's budget belongs to tenant: within a class, the tenants asking
// share the turns max-min fairly, a tenant of weight 2 taking two for
// each one of weight 1. A weight of 0 is 1; others are held between 0.001
// and 1000. Without it a call belongs to the tenant "". A tenant over 256
// bytes, not UTF-8 or with a control character is refused at the call
// (ErrInvalidTenant).
func WithTenant(ctx context.Context, tenant string, weight float64) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenantOf(tenant, weight))
}

func tenantOf(name string, weight float64) tenant {
	switch {
	case weight == 0 || math.IsNaN(weight):
		weight = 1
	default:
		weight = min(max(weight, 0.001), 1000)
	}
	return tenant{name: name, weight: weight}
}

// checkTenant returns ErrInvalidTenant for a tenant on ctx that
// limits.CheckTenant refuses.
func checkTenant(ctx context.Context) error {
	t, ok := ctx.Value(tenantKey{}).(tenant)
	if !ok {
		return nil
	}
	if err := limits.CheckTenant(t.name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTenant, err)
	}
	return nil
}

// callerOf is who ctx's call is in its upstream's line.
func callerOf(ctx context.Context) line.Caller {
	p, ok := ctx.Value(priorityKey{}).(Priority)
	if !ok {
		p = PriorityNormal
	}
	t, ok := ctx.Value(tenantKey{}).(tenant)
	if !ok {
		t = tenant{weight: 1}
	}
	return line.Caller{Class: int(p), Tenant: t.name, Weight: t.weight}
}

// String names p for logs and metric labels: "batch", "normal" or
// "interactive" for the named classes, else its number ("100").
func (p Priority) String() string {
	switch p {
	case PriorityBatch:
		return "batch"
	case PriorityNormal:
		return "normal"
	case PriorityInteractive:
		return "interactive"
	}
	return strconv.Itoa(int(p))
}
