package gate_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/redistest"
)

// Each limit New documents, on both sides: the last accepted value and the
// first rejected one, whose error names the field once.
func TestOptionsLimits(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	long := func(n int) string { return strings.Repeat("p", n) }
	for _, tc := range []struct {
		name  string
		opts  gate.Options
		field string // "" = accepted
	}{
		{"prefix of 256 bytes", gate.Options{Prefix: long(256)}, ""},
		{"prefix of 257 bytes", gate.Options{Prefix: long(257)}, "Prefix"},
		{"scope of 256 bytes", gate.Options{Upstream: long(256)}, ""},
		{"upstream of 257 bytes", gate.Options{Upstream: long(257)}, "Upstream"},
		{"fallback of 256 bytes", gate.Options{Upstream: "a", Fallbacks: []string{long(256)}}, ""},
		{"fallback of 257 bytes", gate.Options{Upstream: "a", Fallbacks: []string{long(257)}}, "Fallbacks[0]"},
		{"lease MinLease", gate.Options{Lease: gate.MinLease}, ""},
		{"lease below MinLease", gate.Options{Lease: gate.MinLease - time.Millisecond}, "Lease"},
		{"negative lease, named once", gate.Options{Lease: -time.Second}, "Lease"},
		{"max cooldown equal to cooldown", gate.Options{Cooldown: time.Minute, MaxCooldown: time.Minute}, ""},
		{"max cooldown below cooldown", gate.Options{Cooldown: time.Minute, MaxCooldown: time.Minute - 1}, "MaxCooldown"},
		{"negative max cooldown, named once", gate.Options{Cooldown: time.Minute, MaxCooldown: -time.Minute}, "MaxCooldown"},
		{"negative cooldown, named once", gate.Options{Cooldown: -time.Minute}, "Cooldown"},
		{"factor 1", gate.Options{BackoffFactor: 1}, ""},
		{"factor 1.5", gate.Options{BackoffFactor: 1.5}, ""},
		{"factor 1e6", gate.Options{BackoffFactor: 1e6}, ""},
		{"factor above 1e6", gate.Options{BackoffFactor: 1e6 + 1}, "BackoffFactor"},
		{"factor NaN", gate.Options{BackoffFactor: math.NaN()}, "BackoffFactor"},
		{"jitter just below 1", gate.Options{Jitter: 0.999}, ""},
		{"jitter negative (none)", gate.Options{Jitter: -1}, ""},
		{"jitter NaN", gate.Options{Jitter: math.NaN()}, "Jitter"},
		{"max attempts 0", gate.Options{MaxAttempts: 0}, ""},
		{"max attempts 1", gate.Options{MaxAttempts: 1}, ""},
		{"max attempts -1", gate.Options{MaxAttempts: -1}, "MaxAttempts"},
		{"wait replicas 1", gate.Options{WaitReplicas: 1}, ""},
		{"wait replicas -1", gate.Options{WaitReplicas: -1}, "WaitReplicas"},
		{"negative wait", gate.Options{Wait: -time.Second}, "Wait"},
		{"negative timeout", gate.Options{Timeout: -time.Second}, "Timeout"},
		{"negative wait timeout", gate.Options{WaitTimeout: -time.Second}, "WaitTimeout"},
		{"negative attempts ttl", gate.Options{AttemptsTTL: -time.Second}, "AttemptsTTL"},
		{"negative canceled cooldown", gate.Options{CanceledCooldown: -time.Second}, "CanceledCooldown"},
		{"negative scope cooldown", gate.Options{UpstreamPolicy: gate.UpstreamPolicy{Cooldown: -time.Second}}, "UpstreamPolicy.Cooldown"},
		{"negative fail window", gate.Options{UpstreamPolicy: gate.UpstreamPolicy{FailWindow: -time.Second}}, "UpstreamPolicy.FailWindow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gate.New(rdb, tc.opts)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, gate.ErrInvalidOptions) {
				t.Fatalf("New: %v, want ErrInvalidOptions", err)
			}
			if exp, got := 1, strings.Count(err.Error(), " "+tc.field+":"); exp != got {
				t.Errorf("error %q: exp %s named %d time(s), got %d", err, tc.field, exp, got)
			}
		})
	}
}

// Zero fields take their documented defaults, and a value set is kept.
func TestOptionsDocumentedDefaults(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g, err := gate.New(rdb, gate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := g.Options()
	for _, c := range []struct {
		name     string
		exp, got any
	}{
		{"AttemptsTTL", 24 * time.Hour, o.AttemptsTTL},
		{"DoneTTL", time.Duration(0), o.DoneTTL},
		{"CanceledCooldown", time.Duration(0), o.CanceledCooldown},
		{"Wait", time.Duration(0), o.Wait},
		{"Timeout", 5 * time.Second, o.Timeout},
		{"WaitTimeout", 100 * time.Millisecond, o.WaitTimeout},
		{"ContinueOnLeaseLost", false, o.ContinueOnLeaseLost},
		{"UpstreamPolicy.Cooldown", 10 * time.Second, o.UpstreamPolicy.Cooldown},
		{"UpstreamPolicy.AllowedFails", 3, o.UpstreamPolicy.AllowedFails},
		{"UpstreamPolicy.FailWindow", time.Minute, o.UpstreamPolicy.FailWindow},
		{"UpstreamPolicy.PauseTTL", 10 * time.Minute, o.UpstreamPolicy.PauseTTL},
		{"UpstreamPolicy.PermanentWave", 10, o.UpstreamPolicy.PermanentWave},
		{"UpstreamPolicy.UnreachableJobs", 3, o.UpstreamPolicy.UnreachableJobs},
	} {
		if c.exp != c.got {
			t.Errorf("%s: exp %v, got %v", c.name, c.exp, c.got)
		}
	}

	set := gate.Options{Lease: time.Second, Cooldown: time.Second, MaxCooldown: 2 * time.Second, BackoffFactor: 3, Jitter: -1,
		AttemptsTTL: time.Second, FailedTTL: time.Second, DoneTTL: time.Second, Timeout: time.Second, WaitTimeout: time.Second,
		UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Second, AllowedFails: -1, FailWindow: time.Second, PauseTTL: time.Second, PermanentWave: -1,
			UnreachableJobs: -1}}
	g, err = gate.New(rdb, set)
	if err != nil {
		t.Fatal(err)
	}
	o = g.Options()
	if o.Lease != set.Lease || o.Cooldown != set.Cooldown || o.MaxCooldown != set.MaxCooldown || o.BackoffFactor != set.BackoffFactor ||
		o.Jitter != set.Jitter || o.AttemptsTTL != set.AttemptsTTL || o.FailedTTL != set.FailedTTL || o.DoneTTL != set.DoneTTL ||
		o.Timeout != set.Timeout || o.WaitTimeout != set.WaitTimeout || o.UpstreamPolicy != set.UpstreamPolicy {
		t.Fatalf("values set were changed:\nexp %+v\ngot %+v", set, o)
	}
}
