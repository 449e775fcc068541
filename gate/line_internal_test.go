package gate

import (
	"context"
	"math"
	"testing"

	"github.com/retrygate/retrygate/gate/internal/line"
)

// A call's class and tenant in its upstream's line come from its context:
// PriorityNormal and the tenant "" of weight 1 unless it says, weights
// held within what the line takes.
func TestCallerOf(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want line.Caller
	}{
		{"nothing said", ctx, line.Caller{Class: int(PriorityNormal), Weight: 1}},
		{"priority", WithPriority(ctx, PriorityInteractive), line.Caller{Class: 192, Weight: 1}},
		{"lowest", WithPriority(ctx, 0), line.Caller{Class: 0, Weight: 1}},
		{"tenant", WithTenant(WithPriority(ctx, PriorityBatch), "acme", 2), line.Caller{Class: 64, Tenant: "acme", Weight: 2}},
		{"weight 0 is 1", WithTenant(ctx, "a", 0), line.Caller{Class: 128, Tenant: "a", Weight: 1}},
		{"NaN is 1", WithTenant(ctx, "a", math.NaN()), line.Caller{Class: 128, Tenant: "a", Weight: 1}},
		{"negative", WithTenant(ctx, "a", -3), line.Caller{Class: 128, Tenant: "a", Weight: 0.001}},
		{"huge", WithTenant(ctx, "a", 1e9), line.Caller{Class: 128, Tenant: "a", Weight: 1000}},
	} {
		got := callerOf(tc.ctx)
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
