package gatequeue

import (
	"context"

	"github.com/retrygate/retrygate/gate"
)

// Caller is a job's place when its upstream's budget cannot serve every
// caller: its class and its tenant (gate.WithPriority, gate.WithTenant).
// The queue adapters' Options.Caller map a task to it. The zero Caller is
// class 0, the lowest: set Priority (gate.PriorityNormal for the default).
type Caller struct {
	Priority gate.Priority
	// Tenant shares the class's turns fairly with the other tenants
	// asking; Weight is its share (0 = 1; see gate.WithTenant).
	Tenant string
	Weight float64
}

// Context returns ctx with c's class and tenant, for gate.Acquire.
func (c Caller) Context(ctx context.Context) context.Context {
	return gate.WithTenant(gate.WithPriority(ctx, c.Priority), c.Tenant, c.Weight)
}
