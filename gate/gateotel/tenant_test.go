package gateotel

import (
	"testing"

	"github.com/retrygate/retrygate/internal/testkit/tenanttest"
)

// The bound on the tenant label, as gateprom's copy is held to it.
func TestTenantLabelBound(t *testing.T) {
	tenanttest.Bound(t, func(of func(string) string, max int) func(string) string {
		return newLabelSet(of, max).label
	}, other)
}
