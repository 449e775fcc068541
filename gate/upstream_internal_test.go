package gate

import (
	"testing"
	"time"
)

// Status.Upstream is the upstream that admits calls, else the one that
// admits them soonest: a paused upstream refuses as a cooling one does,
// whatever its place in the list.
func TestNextUpstream(t *testing.T) {
	ready := UpstreamStatus{Upstream: "ready", State: Ready}
	cooling := UpstreamStatus{Upstream: "cooling", State: CoolingDown, RetryAfter: 5 * time.Second}
	sooner := UpstreamStatus{Upstream: "sooner", State: CoolingDown, RetryAfter: 3 * time.Second}
	paused := UpstreamStatus{Upstream: "paused", State: Paused, RetryAfter: time.Minute}
	probing := UpstreamStatus{Upstream: "probing", State: Ready, Probing: true, RetryAfter: 2 * time.Second}
	for _, tt := range []struct {
		name string
		ups  []UpstreamStatus
		want string
	}{
		{"none", nil, ""},
		{"one ready", []UpstreamStatus{ready}, "ready"},
		{"a ready one after a cooling one", []UpstreamStatus{cooling, ready}, "ready"},
		{"a ready one after a paused one", []UpstreamStatus{paused, ready}, "ready"},
		{"a ready one after a probing one", []UpstreamStatus{probing, ready}, "ready"},
		{"a paused one before a cooling one", []UpstreamStatus{paused, cooling}, "cooling"},
		{"a cooling one before a paused one", []UpstreamStatus{cooling, paused}, "cooling"},
		{"the sooner of two cooling", []UpstreamStatus{cooling, sooner}, "sooner"},
		{"a probing one admits sooner", []UpstreamStatus{paused, probing}, "probing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := nextUpstream(tt.ups)
			if got.Upstream != tt.want {
				t.Fatalf("nextUpstream: %q, want %q", got.Upstream, tt.want)
			}
			if tt.ups == nil && got.State != Ready {
				t.Fatalf("no upstreams: %v, want Ready (nothing refuses)", got.State)
			}
		})
	}
}
