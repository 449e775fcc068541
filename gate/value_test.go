package gate

import (
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
)

func TestJobState(t *testing.T) {
	for _, tt := range []struct {
		v    store.Job
		now  int64
		want State
	}{
		{store.Job{Kind: store.Running}, 5, Running},
		{store.Job{}, 5, Running}, // held
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

func TestBreakerJudges(t *testing.T) {
	b := &breaker{name: "up"}
	for _, tt := range []struct {
		v      store.Upstream
		now    int64
		permit permit
		want   UpstreamStatus
	}{
		{store.Upstream{}, 0, permitOpen, UpstreamStatus{Scope: "up"}},
		{store.Upstream{Mode: store.Cool, Reason: "rate_limited", Level: 1, Until: 1000}, 400, permitRefused, UpstreamStatus{Scope: "up", State: ScopeCooling, Reason: "rate_limited", RetryAfter: 600 * time.Millisecond}},
		{store.Upstream{Mode: store.Pause, Reason: "quota_exhausted", Level: 1, Until: 1000}, 999, permitRefused, UpstreamStatus{Scope: "up", State: ScopePaused, Reason: "quota_exhausted", RetryAfter: time.Millisecond}},
		{store.Upstream{Mode: store.Cool, Reason: "rate_limited", Level: 1, Until: 1000}, 1000, permitProbe, UpstreamStatus{Scope: "up"}},
		{store.Upstream{Mode: store.Pause, Reason: "quota_exhausted", Level: 1, Until: 1000}, 5000, permitProbe, UpstreamStatus{Scope: "up"}},
		{store.Upstream{Mode: store.Probe, Reason: "rate_limited", Level: 1, Until: 1000, Token: "tok"}, 400, permitRefused, UpstreamStatus{Scope: "up", State: ScopeCooling, Reason: "rate_limited", Probing: true, RetryAfter: 600 * time.Millisecond}},
		{store.Upstream{Mode: store.Probe, Reason: "rate_limited", Level: 1, Until: 1000, Token: "tok"}, 2000, permitRefused, UpstreamStatus{Scope: "up", State: ScopeCooling, Reason: "rate_limited", Probing: true, RetryAfter: time.Millisecond}},
		{store.Upstream{Mode: store.Foreign}, 0, permitRefused, UpstreamStatus{Scope: "up", State: ScopeCooling}},
		{store.Upstream{Mode: store.Foreign, Paused: true, Reason: "ops"}, 0, permitRefused, UpstreamStatus{Scope: "up", State: ScopePaused, Reason: "ops"}},
	} {
		p, st := b.judge(tt.v, tt.now)
		if p != tt.permit || st != tt.want {
			t.Errorf("judge(%+v, %d) = %v %+v, want %v %+v", tt.v, tt.now, p, st, tt.permit, tt.want)
		}
	}
}
