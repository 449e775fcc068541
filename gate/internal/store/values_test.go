package store

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestParseJob(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want Job
	}{
		{"r:abc:1700000000000001:2", Job{Kind: Running, Token: "abc", Fence: 1700000000000001, Attempts: 2}},
		// Renewed by a runner that estimates its call at 8 s.
		{"r:abc:1700000000000001:2:8000", Job{Kind: Running, Token: "abc", Fence: 1700000000000001, Attempts: 2, Estimate: 8 * time.Second}},
		{"c:1000:7:3:s:invalid_request:status:400", Job{Kind: Cooling, Until: 1000, Fence: 7, Attempts: 3,
			Suspect: true, Reason: "invalid_request", Evidence: "status:400"}},
		{"f:2000:8:1::context_length_exceeded:code:context_length_exceeded", Job{Kind: Failed, Until: 2000, Fence: 8,
			Attempts: 1, Reason: "context_length_exceeded", Evidence: "code:context_length_exceeded"}},
		{"c:5:9:2", Job{Kind: Cooling, Until: 5, Fence: 9, Attempts: 2}},
		{"d:3000:9:0", Job{Kind: Done, Until: 3000, Fence: 9}},
		// Values of another shape are foreign (kind 0): never taken for free.
		{"", Job{}},
		{"garbage", Job{}},
		{"r:abc", Job{Kind: Running, Token: "abc", Taken: true}},                                              // taken on a free key, not renewed yet
		{"r:abc:1700000000000001:0:", Job{Kind: Running, Token: "abc", Fence: 1700000000000001, Taken: true}}, // its fence recorded by the acquire
		{"r:", Job{}},
		{"r::1:0", Job{}},
		{"c:x:1:0", Job{}},
		{"c:-1:1:0", Job{}},
		{"x:1:2:3", Job{}},
		{"r:abc:1:2:extra", Job{}},
		{"r:abc:1:2:8000:extra", Job{}},
		{"r:abc:1:2:-5", Job{}},
	} {
		if got := parseJob(tt.v); got != tt.want {
			t.Errorf("parseJob(%q) = %+v, want %+v", tt.v, got, tt.want)
		}
	}
}

// What settle writes, job_acquire.lua and parseJob read back.
func TestSettledTailRoundTrips(t *testing.T) {
	for _, w := range []Job{
		{Kind: Cooling, Until: 10, Fence: 1, Attempts: 2, Suspect: true, Reason: "invalid_request", Evidence: "status:400"},
		{Kind: Failed, Until: 10, Fence: 1, Attempts: 1, Reason: "r", Evidence: "code:a:b"},
		{Kind: Cooling, Until: 10, Fence: 3, Attempts: 0},
		{Kind: Cooling, Until: 10, Fence: 3, Attempts: 0, Reason: "canceled"},
		// Each of the optional fields alone survives the round trip.
		{Kind: Cooling, Until: 10, Fence: 3, Attempts: 1, Evidence: "code:x"},
		{Kind: Cooling, Until: 10, Fence: 3, Attempts: 1, Suspect: true},
	} {
		v := string(rune(w.Kind)) + ":10:" + settledTail(w.Fence, w.Attempts, w.Suspect, w.Reason, w.Evidence)
		if got := parseJob(v); got != w {
			t.Errorf("parseJob(%q) = %+v, want %+v", v, got, w)
		}
	}
}

func TestParseUpstream(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want Upstream
	}{
		{"c:rate_limited:2:1000", Upstream{Mode: ModeCooling, Reason: "rate_limited", Level: 2, Until: 1000}},
		{"p:quota_exhausted:1:2000", Upstream{Mode: ModePaused, Reason: "quota_exhausted", Level: 1, Until: 2000}},
		{"h:rate_limited:3:3000:tok", Upstream{Mode: ModeProbing, Reason: "rate_limited", Level: 3, Until: 3000, Token: "tok"}},
		{"c::1:5", Upstream{Mode: ModeCooling, Level: 1, Until: 5}},
		{"c:x:0:5", Upstream{Mode: ModeCooling, Reason: "x", Until: 5}}, // level 0: written before a first stop
		{"", Upstream{}},
		// Values no gate wrote are foreign, read as their letter says.
		{"c:x:1", Upstream{Mode: ModeForeign, Reason: "x"}},
		{"c:x:1:5:tok", Upstream{Mode: ModeForeign, Reason: "x"}},
		{"h:x:1:5", Upstream{Mode: ModeForeign, Reason: "x"}},
		{"q:x:1:5", Upstream{Mode: ModeForeign, Reason: "x"}},
		{"c:x:-1:5", Upstream{Mode: ModeForeign, Reason: "x"}},
		{"p:x:1:soon", Upstream{Mode: ModeForeign, Reason: "x", Paused: true}},
		{"junk", Upstream{Mode: ModeForeign}},
		// A level and an end of 18 digits are read; 19 may overflow.
		{"c:x:100000000000000000:999999999999999999", Upstream{Mode: ModeCooling, Reason: "x", Level: 100000000000000000, Until: 999999999999999999}},
		{"c:x:1000000000000000000:5", Upstream{Mode: ModeForeign, Reason: "x"}},
	} {
		if got := parseUpstream(tt.v); got != tt.want {
			t.Errorf("parseUpstream(%q) = %+v, want %+v", tt.v, got, tt.want)
		}
	}
}

func TestJobLeft(t *testing.T) {
	if exp, got := 3*time.Millisecond, (Job{Kind: Cooling, Until: 10}).Left(7); exp != got {
		t.Errorf("Left: exp %v, got %v", exp, got)
	}
	if got := (Job{Kind: Cooling, Until: 10}).Left(12); got != 0 {
		t.Errorf("Left after the end: %v, want 0", got)
	}
}

// Each reply shape of the acquire's takeover and of the probe's claim
// decodes to what it means, and the same shape one member long is an
// error. (Races bring these replies: a job another call took over first,
// an upstream whose key ended between its read and the claim, a probe
// another process claimed.)
func TestDecodeWellFormedReplies(t *testing.T) {
	reply := func(v ...any) *redis.Cmd {
		c := redis.NewCmd(context.Background())
		c.SetVal(v)
		return c
	}
	const value = "c:5000:1:1::rate_limited:"
	var r Acquired
	if err := decodeAcquire(reply(int64(0), int64(1000), value, int64(4000)), &r); err != nil ||
		r.Taken || r.Now != 1000 || r.value != value || r.Job.Reason != "rate_limited" || r.TTL != 4*time.Second {
		t.Errorf("acquire refused: %+v, %v", r, err)
	}
	r = Acquired{}
	if err := decodeAcquire(reply(int64(1), int64(1000), int64(1700000000000000), value, int64(-2)), &r); err != nil ||
		!r.Taken || r.Fence != 1700000000000000 || r.value != value || r.pttl != -2 || r.Job.Attempts != 1 {
		t.Errorf("acquire taken: %+v, %v", r, err)
	}
	if c, err := decodeClaim(reply(int64(1))); err != nil || !c.Ready || c.Claimed {
		t.Errorf("claim ready: %+v, %v", c, err)
	}
	if c, err := decodeClaim(reply(int64(2), int64(3))); err != nil || !c.Claimed || c.Level != 3 || c.Ready {
		t.Errorf("claim claimed: %+v, %v", c, err)
	}
	if c, err := decodeClaim(reply(int64(0), "c:rate_limited:1:9000", int64(5000))); err != nil || c.Ready || c.Claimed ||
		c.Value.Mode != ModeCooling || c.Value.Reason != "rate_limited" || c.Wait != 5*time.Second {
		t.Errorf("claim refused: %+v, %v", c, err)
	}
	for name, cmd := range map[string]*redis.Cmd{
		"acquire refused, one long":  reply(int64(0), int64(1000), value, int64(4000), "x"),
		"claim ready, one long":      reply(int64(1), "x"),
		"claim claimed, one long":    reply(int64(2), int64(3), "x"),
		"claim refused, one long":    reply(int64(0), value, int64(5000), "x"),
		"acquire refused, one short": reply(int64(0), int64(1000), value),
		"acquire taken, one short":   reply(int64(1), int64(1000), int64(1700000000000000), value),
		"claim claimed, one short":   reply(int64(2)),
		"claim refused, one short":   reply(int64(0), value),
	} {
		var err error
		if name[:5] == "claim" {
			_, err = decodeClaim(cmd)
		} else {
			err = decodeAcquire(cmd, &Acquired{})
		}
		if err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// A wait's end may be centuries away (an operator's hand-made value, up
// to 18 digits): its time left is the longest Duration, never a product
// that wraps to the past and reads as over.
func TestMsUntil(t *testing.T) {
	const now = 1_795_955_516_400 // Redis ms, 2026
	for _, tt := range []struct {
		until, now int64
		want       time.Duration
	}{
		{now + 1500, now, 1500 * time.Millisecond},
		{now - 1500, now, -1500 * time.Millisecond},
		{now, now, 0},
		{17_959_555_164_000, now, math.MaxInt64},      // found by FuzzUpstreamScriptsAgree: it wrapped to -634206h
		{99_999_999_999_999, now, math.MaxInt64},      // 14 nines, as tests write a cooldown without end
		{999_999_999_999_999_999, now, math.MaxInt64}, // 18 digits
		{-999_999_999_999_999_999, now, math.MinInt64},
		{math.MinInt64, now, math.MinInt64},  // until-now wraps
		{math.MaxInt64, -now, math.MaxInt64}, // until-now wraps
		{int64(math.MaxInt64/time.Millisecond) + now, now, math.MaxInt64 / time.Millisecond * time.Millisecond},
		{int64(math.MaxInt64/time.Millisecond) + now + 1, now, math.MaxInt64},
	} {
		if got := msUntil(tt.until, tt.now); got != tt.want {
			t.Errorf("msUntil(%d, %d) = %v, want %v", tt.until, tt.now, got, tt.want)
		}
	}
}
