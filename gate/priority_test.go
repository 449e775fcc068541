package gate_test

import (
	"testing"

	"github.com/retrygate/retrygate/gate"
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
