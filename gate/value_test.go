package gate

import (
	"testing"
	"time"
)

func TestParseJob(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want jobValue
	}{
		{"r:abc:1700000000000001:2", jobValue{kind: jobRunning, token: "abc", fence: 1700000000000001, attempts: 2}},
		{"c:1000:7:3:s:invalid_request:status:400", jobValue{kind: jobCooling, until: 1000, fence: 7, attempts: 3,
			suspect: true, reason: "invalid_request", evidence: "status:400"}},
		{"f:2000:8:1::context_length_exceeded:code:context_length_exceeded", jobValue{kind: jobFailed, until: 2000, fence: 8,
			attempts: 1, reason: "context_length_exceeded", evidence: "code:context_length_exceeded"}},
		{"c:5:9:2", jobValue{kind: jobCooling, until: 5, fence: 9, attempts: 2}},
		{"d:3000:9:0", jobValue{kind: jobDone, until: 3000, fence: 9}},
		// Values of another shape are held (kind 0): never taken for free.
		{"", jobValue{}},
		{"garbage", jobValue{}},
		{"r:abc", jobValue{kind: jobRunning, token: "abc"}}, // taken on a free key, not renewed yet
		{"r:", jobValue{}},
		{"r::1:0", jobValue{}},
		{"c:x:1:0", jobValue{}},
		{"c:-1:1:0", jobValue{}},
		{"x:1:2:3", jobValue{}},
		{"r:abc:1:2:extra", jobValue{}},
	} {
		if got := parseJob(tt.v); got != tt.want {
			t.Errorf("parseJob(%q) = %+v, want %+v", tt.v, got, tt.want)
		}
	}
}

// What settle writes, job_acquire.lua and parseJob read back.
func TestSettledTailRoundTrips(t *testing.T) {
	for _, w := range []jobValue{
		{kind: jobCooling, until: 10, fence: 1, attempts: 2, suspect: true, reason: "invalid_request", evidence: "status:400"},
		{kind: jobFailed, until: 10, fence: 1, attempts: 1, reason: "r", evidence: "code:a:b"},
		{kind: jobCooling, until: 10, fence: 3, attempts: 0},
		{kind: jobCooling, until: 10, fence: 3, attempts: 0, reason: "canceled"},
		// Each of the optional fields alone survives the round trip.
		{kind: jobCooling, until: 10, fence: 3, attempts: 1, evidence: "code:x"},
		{kind: jobCooling, until: 10, fence: 3, attempts: 1, suspect: true},
	} {
		v := string(w.kind) + ":10:" + settledTail(w.fence, w.attempts, w.suspect, w.reason, w.evidence)
		if got := parseJob(v); got != w {
			t.Errorf("parseJob(%q) = %+v, want %+v", v, got, w)
		}
	}
}

func TestJobState(t *testing.T) {
	for _, tt := range []struct {
		v    jobValue
		now  int64
		want State
	}{
		{jobValue{kind: jobRunning}, 5, Running},
		{jobValue{}, 5, Running}, // held
		{jobValue{kind: jobCooling, until: 10}, 9, CoolingDown},
		{jobValue{kind: jobCooling, until: 10}, 10, Ready},
		{jobValue{kind: jobFailed, until: 10}, 9, Failed},
		{jobValue{kind: jobFailed, until: 10}, 11, Ready},
		{jobValue{kind: jobDone, until: 10}, 9, Done},
		{jobValue{kind: jobDone, until: 10}, 10, Ready},
	} {
		if got := tt.v.state(tt.now); got != tt.want {
			t.Errorf("%+v at %d: %v, want %v", tt.v, tt.now, got, tt.want)
		}
	}
	if exp, got := 3*time.Millisecond, (jobValue{kind: jobCooling, until: 10}).left(7); exp != got {
		t.Errorf("left: exp %v, got %v", exp, got)
	}
	if got := (jobValue{kind: jobCooling, until: 10}).left(12); got != 0 {
		t.Errorf("left after the end: %v, want 0", got)
	}
}

func TestParseScope(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want scopeValue
	}{
		{"c:rate_limited:2:1000", scopeValue{kind: scopeCooling, reason: "rate_limited", level: 2, until: 1000}},
		{"p:quota_exhausted:1:2000", scopeValue{kind: scopePaused, reason: "quota_exhausted", level: 1, until: 2000}},
		{"h:rate_limited:3:3000:tok", scopeValue{kind: scopeProbing, reason: "rate_limited", level: 3, until: 3000, token: "tok"}},
		{"c::1:5", scopeValue{kind: scopeCooling, level: 1, until: 5}},
		{"", scopeValue{}},
		{"c:x:1", scopeValue{}},
		{"c:x:1:5:tok", scopeValue{}},
		{"h:x:1:5", scopeValue{}},
		{"q:x:1:5", scopeValue{}},
		{"c:x:-1:5", scopeValue{}},
		{"c:x:1:soon", scopeValue{}},
	} {
		if got := parseScope(tt.v); got != tt.want {
			t.Errorf("parseScope(%q) = %+v, want %+v", tt.v, got, tt.want)
		}
	}
}

func TestBreakerJudges(t *testing.T) {
	b := &breaker{name: "up"}
	for _, tt := range []struct {
		v      string
		now    int64
		permit permit
		want   UpstreamStatus
	}{
		{"", 0, permitOpen, UpstreamStatus{Scope: "up"}},
		{"c:rate_limited:1:1000", 400, permitRefused, UpstreamStatus{Scope: "up", State: ScopeCooling, Reason: "rate_limited", RetryAfter: 600 * time.Millisecond}},
		{"p:quota_exhausted:1:1000", 999, permitRefused, UpstreamStatus{Scope: "up", State: ScopePaused, Reason: "quota_exhausted", RetryAfter: time.Millisecond}},
		{"c:rate_limited:1:1000", 1000, permitProbe, UpstreamStatus{Scope: "up"}},
		{"p:quota_exhausted:1:1000", 5000, permitProbe, UpstreamStatus{Scope: "up"}},
		{"h:rate_limited:1:1000:tok", 400, permitRefused, UpstreamStatus{Scope: "up", State: ScopeCooling, Reason: "rate_limited", Probing: true, RetryAfter: 600 * time.Millisecond}},
		{"h:rate_limited:1:1000:tok", 2000, permitRefused, UpstreamStatus{Scope: "up", State: ScopeCooling, Reason: "rate_limited", Probing: true, RetryAfter: time.Millisecond}},
		{"junk", 0, permitRefused, UpstreamStatus{Scope: "up", State: ScopeCooling}},
	} {
		p, st := b.judge(tt.v, tt.now)
		if p != tt.permit || st != tt.want {
			t.Errorf("judge(%q, %d) = %v %+v, want %v %+v", tt.v, tt.now, p, st, tt.permit, tt.want)
		}
	}
}
