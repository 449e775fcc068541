package gate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A class's name is what logs, metric labels and the CLI show: the named
// classes by name, any other by its number, so two classes never share a
// label.
func TestPriorityString(t *testing.T) {
	for p, exp := range map[gate.Priority]string{
		gate.PriorityBatch: "batch", gate.PriorityNormal: "normal", gate.PriorityInteractive: "interactive",
		0: "0", 100: "100", 255: "255",
	} {
		if got := p.String(); got != exp {
			t.Errorf("Priority(%d).String() = %q, exp %q", uint8(p), got, exp)
		}
	}
}

// The gate bounds a tenant, which its line stores and a metric label may
// show: one over 256 bytes, not UTF-8 or with a control character is
// refused at the call (ErrInvalidTenant) before anything is written; the
// longest valid one is a call like any other.
func TestTenantIsBounded(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Prefix: redistest.UniqueKey(t)})
	ctx := context.Background()
	for _, tc := range []struct {
		name, tenant string
		ok           bool
	}{
		{"longest", strings.Repeat("t", 256), true},
		{"too long", strings.Repeat("t", 257), false},
		{"not UTF-8", "acme\xff", false},
		{"a newline", "acme\nx", false},
		{"a C1 control", "acme\u0085", false},
		{"letters of any script", "Å∂ç 株式会社", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := g.Do(gate.WithTenant(ctx, tc.tenant, 1), "job-"+tc.name, okFn)
			if tc.ok != (err == nil) || !tc.ok && !errors.Is(err, gate.ErrInvalidTenant) {
				t.Fatalf("tenant %q: %v, want ok %v (else ErrInvalidTenant)", tc.tenant, err, tc.ok)
			}
			if !tc.ok {
				if st, err := g.Status(ctx, "job-"+tc.name); err != nil || st.State != gate.Ready || st.Fence != 0 {
					t.Fatalf("after the refusal: %+v, %v; want nothing written", st, err)
				}
			}
		})
	}
}
