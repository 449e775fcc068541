package gate

import (
	"testing"

	"github.com/retrygate/retrygate/gate/internal/store"
)

func TestJobState(t *testing.T) {
	for _, tt := range []struct {
		v    store.Job
		now  int64
		want State
	}{
		{store.Job{Kind: store.Running}, 5, Running},
		{store.Job{}, 5, Running}, // foreign
		{store.Job{Kind: store.Cooling, Until: 10}, 9, CoolingDown},
		{store.Job{Kind: store.Cooling, Until: 10}, 10, Ready},
		{store.Job{Kind: store.Failed, Until: 10}, 9, Failed},
		{store.Job{Kind: store.Failed, Until: 10}, 11, Ready},
		{store.Job{Kind: store.Done, Until: 10}, 9, Done},
		{store.Job{Kind: store.Done, Until: 10}, 10, Ready},
	} {
		if got := stateAt(tt.v, tt.now); got != tt.want {
			t.Errorf("%+v at %d: %v, want %v", tt.v, tt.now, got, tt.want)
		}
	}
}

// An upstream's stored mode reads as the one State type: no cast, so a
// new mode cannot slip through as a job state by its number.
func TestUpstreamStateOfMode(t *testing.T) {
	for m, exp := range map[store.Mode]State{
		store.ModeReady: Ready, store.ModeCooling: CoolingDown, store.ModePaused: Paused,
	} {
		if got := upstreamState(m); got != exp {
			t.Errorf("mode %q: %v, want %v", m, got, exp)
		}
	}
}
