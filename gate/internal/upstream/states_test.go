package upstream

import (
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
)

// Each state of an upstream's value, judged at a moment: may a call run,
// and what does it read.
func TestStatesJudge(t *testing.T) {
	b := newGuarded("p", "up", Policy{})
	for _, tt := range []struct {
		v      store.Upstream
		now    int64
		permit Permit
		want   Status
	}{
		{store.Upstream{}, 0, Permitted, Status{Name: "up"}},
		{store.Upstream{Mode: store.ModeCooling, Reason: "rate_limited", Level: 1, Until: 1000}, 400, Refused, Status{Name: "up", Mode: store.ModeCooling, Reason: "rate_limited", RetryAfter: 600 * time.Millisecond}},
		{store.Upstream{Mode: store.ModePaused, Reason: "quota_exhausted", Level: 1, Until: 1000}, 999, Refused, Status{Name: "up", Mode: store.ModePaused, Reason: "quota_exhausted", RetryAfter: time.Millisecond}},
		{store.Upstream{Mode: store.ModeCooling, Reason: "rate_limited", Level: 1, Until: 1000}, 1000, MayProbe, Status{Name: "up"}},
		{store.Upstream{Mode: store.ModePaused, Reason: "quota_exhausted", Level: 1, Until: 1000}, 5000, MayProbe, Status{Name: "up"}},
		{store.Upstream{Mode: store.ModeProbing, Reason: "rate_limited", Level: 1, Until: 1000, Token: "tok"}, 400, Refused, Status{Name: "up", Mode: store.ModeCooling, Reason: "rate_limited", Probing: true, RetryAfter: 600 * time.Millisecond}},
		{store.Upstream{Mode: store.ModeProbing, Reason: "rate_limited", Level: 1, Until: 1000, Token: "tok"}, 2000, Refused, Status{Name: "up", Mode: store.ModeCooling, Reason: "rate_limited", Probing: true, RetryAfter: time.Millisecond}},
		{store.Upstream{Mode: store.ModeForeign}, 0, Refused, Status{Name: "up", Mode: store.ModeCooling}},
		{store.Upstream{Mode: store.ModeForeign, Paused: true, Reason: "ops"}, 0, Refused, Status{Name: "up", Mode: store.ModePaused, Reason: "ops"}},
	} {
		p, st := b.judge(tt.v, tt.now)
		if p != tt.permit || st != tt.want {
			t.Errorf("judge(%+v, %d) = %v %+v, want %v %+v", tt.v, tt.now, p, st, tt.permit, tt.want)
		}
	}
}

// Free, a gate without an upstream, always permits and reads nothing.
func TestFreeAlwaysPermits(t *testing.T) {
	s := NewSet("p", nil, Policy{})
	if n := len(s.Keys()); n != 0 {
		t.Fatalf("Free reads %d keys, want none", n)
	}
	j := s.Judge(nil, nil, nil, 0)
	if _, refusing := j.Refusal(); refusing {
		t.Fatal("Free refused")
	}
	c, refusal, err := s.Choose(t.Context(), nil, store.Token{}, j)
	if err != nil || refusal != nil || c.Guarded() || c.Name() != "" {
		t.Fatalf("Choose: %+v, %v, %v; want Free", c, refusal, err)
	}
	if probe, _ := c.Probe(); probe {
		t.Fatal("Free probes")
	}
}
