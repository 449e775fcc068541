package gate_test

import (
	"testing"

	"github.com/retrygate/retrygate/gate"
)

// Names reach HTTP bodies, logs and metric labels; a value this version
// does not know (from a newer peer, a zero Event) prints, never panics.
func TestNamesOfStatesAndEvents(t *testing.T) {
	for s, want := range map[gate.State]string{
		gate.Unknown: "unknown", gate.Ready: "ready", gate.Running: "running", gate.CoolingDown: "cooling_down",
		gate.Failed: "failed", gate.Done: "done", gate.UpstreamCooling: "upstream_cooling",
		gate.UpstreamCooling + 1: "state(7)", 255: "state(255)",
	} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", uint8(s), got, want)
		}
	}
	for k, want := range map[gate.EventKind]string{
		0: "unknown", gate.EventAcquired: "acquired", gate.EventRefused: "refused",
		gate.EventSettled: "settled", gate.EventRenewed: "renewed", gate.EventLeaseLost: "lease_lost",
		gate.EventRedisError: "redis_error", gate.EventFailOpen: "fail_open",
		gate.EventUpstreamCooling: "scope_cooling", gate.EventUpstreamPaused: "scope_paused",
		gate.EventWarning: "warning", gate.EventWarning + 1: "unknown", 255: "unknown",
	} {
		if got := k.String(); got != want {
			t.Errorf("EventKind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

// An upstream's state names itself as httpmw, the CLI and the metrics show
// it; a value past the last one is named by its number, never a panic.
func TestScopeStateNames(t *testing.T) {
	for s, exp := range map[gate.UpstreamState]string{
		gate.UpstreamOpen: "open", gate.UpstreamCoolingDown: "cooling", gate.UpstreamPaused: "paused", 3: "upstream_state(3)", 255: "upstream_state(255)",
	} {
		if got := s.String(); got != exp {
			t.Errorf("ScopeState(%d): %q, want %q", uint8(s), got, exp)
		}
	}
}
