package gate_test

import (
	"errors"
	"github.com/retrygate/retrygate/internal/limits"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

func TestOptionsValidation(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	tests := []struct {
		name  string
		opts  gate.Options
		field []string // every field the error must name
	}{
		{"negative lease", gate.Options{Lease: -time.Second}, []string{"Lease"}},
		{"lease too short", gate.Options{Lease: 5 * time.Millisecond}, []string{"Lease"}},
		{"max below cooldown", gate.Options{Cooldown: time.Hour, Backoff: gate.Backoff{Max: time.Minute}}, []string{"Backoff.Max"}},
		{"factor below 1", gate.Options{Backoff: gate.Backoff{Factor: 0.5}}, []string{"Backoff.Factor"}},
		{"jitter 1", gate.Options{Backoff: gate.Backoff{Jitter: 1}}, []string{"Backoff.Jitter"}},
		{"brace in prefix", gate.Options{Prefix: "a{b}"}, []string{"Prefix"}},
		{"every bad field at once", gate.Options{Lease: -1, Cooldown: -1, Retention: gate.Retention{Done: -1, Failed: -1}, UpstreamPolicy: gate.UpstreamPolicy{PauseTTL: -1}, Backoff: gate.Backoff{Jitter: 2, Factor: -3}},
			[]string{"Lease", "Cooldown", "Retention.Failed", "Retention.Done", "Backoff.Jitter", "Backoff.Factor", "UpstreamPolicy.PauseTTL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := gate.New(rdb, tt.opts)
			if !errors.Is(err, gate.ErrInvalidOptions) {
				t.Fatalf("New: %v, want ErrInvalidOptions", err)
			}
			for _, f := range tt.field {
				if !strings.Contains(err.Error(), f+":") {
					t.Errorf("error %q does not name %s", err, f)
				}
			}
		})
	}
	if _, err := gate.New(nil, gate.Options{}); !errors.Is(err, gate.ErrInvalidOptions) {
		t.Fatalf("nil client: %v", err)
	}
}

func TestOptionsDefaultsAndShortValues(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g, err := gate.New(rdb, gate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := gate.OptionsOf(g)
	if o.Lease != time.Minute || o.Cooldown != 5*time.Minute || o.Backoff.Max != time.Hour || o.Backoff.Factor != 2 ||
		o.Backoff.Jitter != 0.1 || o.UpstreamPolicy.AllowedFails != 3 || o.Retention.Failed != 7*24*time.Hour || o.Prefix != "retrygate" || o.Classify == nil {
		t.Fatalf("defaults: %+v", o)
	}
	// Tests and demos use very short values.
	if _, err := gate.New(rdb, gate.Options{Lease: 100 * time.Millisecond, Cooldown: 10 * time.Millisecond}); err != nil {
		t.Fatalf("short values rejected: %v", err)
	}
	// Backoff.Max follows a Cooldown above the default cap.
	g, err = gate.New(rdb, gate.Options{Cooldown: 2 * time.Hour})
	if err != nil || gate.OptionsOf(g).Backoff.Max != 2*time.Hour {
		t.Fatalf("Cooldown 2h: %v %v", err, gate.OptionsOf(g).Backoff.Max)
	}
}

func FuzzOptions(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), 0.0, 0.0, 0, "")
	f.Add(int64(time.Millisecond), int64(-1), int64(time.Hour), 0.5, 1.5, -2, "a{")
	f.Add(int64(100*time.Millisecond), int64(10*time.Millisecond), int64(0), 2.0, 0.99, 3, "p")
	f.Add(int64(100*time.Millisecond), int64(10*time.Millisecond), int64(0), 77.0, -37.01, 3, "0") // negative Jitter: none
	_, rdb := redistest.Miniredis(f)
	f.Fuzz(func(t *testing.T, lease, cooldown, maxCooldown int64, factor, jitter float64, attempts int, prefix string) {
		g, err := gate.New(rdb, gate.Options{Lease: time.Duration(lease), Cooldown: time.Duration(cooldown), Backoff: gate.Backoff{MaxAttempts: attempts, Max: time.Duration(maxCooldown), Factor: factor, Jitter: jitter}, Prefix: prefix})
		if err != nil {
			if !errors.Is(err, gate.ErrInvalidOptions) {
				t.Fatalf("error %v is not ErrInvalidOptions", err)
			}
			return
		}
		o := gate.OptionsOf(g)
		if o.Lease < limits.MinLease || o.Cooldown <= 0 || o.Backoff.Max < o.Cooldown || o.Backoff.Factor < 1 || !(o.Backoff.Jitter < 1) { // a negative Jitter means none
			t.Fatalf("accepted invalid options: %+v", o)
		}
	})
}

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
		{"upstream of 256 bytes", gate.Options{Upstream: long(256)}, ""},
		{"upstream of 257 bytes", gate.Options{Upstream: long(257)}, "Upstream"},
		{"fallback of 256 bytes", gate.Options{Upstream: "a", UpstreamPolicy: gate.UpstreamPolicy{Fallbacks: []string{long(256)}}}, ""},
		{"fallback of 257 bytes", gate.Options{Upstream: "a", UpstreamPolicy: gate.UpstreamPolicy{Fallbacks: []string{long(257)}}}, "UpstreamPolicy.Fallbacks[0]"},
		{"lease MinLease", gate.Options{Lease: limits.MinLease}, ""},
		{"lease below MinLease", gate.Options{Lease: limits.MinLease - time.Millisecond}, "Lease"},
		{"negative lease, named once", gate.Options{Lease: -time.Second}, "Lease"},
		{"max cooldown equal to cooldown", gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{Max: time.Minute}}, ""},
		{"max cooldown below cooldown", gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{Max: time.Minute - 1}}, "Backoff.Max"},
		{"negative max cooldown, named once", gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{Max: -time.Minute}}, "Backoff.Max"},
		{"negative cooldown, named once", gate.Options{Cooldown: -time.Minute}, "Cooldown"},
		{"factor 1", gate.Options{Backoff: gate.Backoff{Factor: 1}}, ""},
		{"factor 1.5", gate.Options{Backoff: gate.Backoff{Factor: 1.5}}, ""},
		{"factor 1e6", gate.Options{Backoff: gate.Backoff{Factor: 1e6}}, ""},
		{"factor above 1e6", gate.Options{Backoff: gate.Backoff{Factor: 1e6 + 1}}, "Backoff.Factor"},
		{"factor NaN", gate.Options{Backoff: gate.Backoff{Factor: math.NaN()}}, "Backoff.Factor"},
		{"jitter just below 1", gate.Options{Backoff: gate.Backoff{Jitter: 0.999}}, ""},
		{"jitter negative (none)", gate.Options{Backoff: gate.Backoff{Jitter: -1}}, ""},
		{"jitter NaN", gate.Options{Backoff: gate.Backoff{Jitter: math.NaN()}}, "Backoff.Jitter"},
		{"max attempts 0", gate.Options{Backoff: gate.Backoff{MaxAttempts: 0}}, ""},
		{"max attempts 1", gate.Options{Backoff: gate.Backoff{MaxAttempts: 1}}, ""},
		{"max attempts -1 (unlimited)", gate.Options{Backoff: gate.Backoff{MaxAttempts: -1}}, ""},
		{"wait replicas 1", gate.Options{Redis: gate.RedisPolicy{WaitReplicas: 1}}, ""},
		{"wait replicas -1", gate.Options{Redis: gate.RedisPolicy{WaitReplicas: -1}}, "Redis.WaitReplicas"},
		{"negative wait", gate.Options{Wait: -time.Second}, "Wait"},
		{"negative timeout", gate.Options{Redis: gate.RedisPolicy{Timeout: -time.Second}}, "Redis.Timeout"},
		{"negative wait timeout", gate.Options{Redis: gate.RedisPolicy{WaitTimeout: -time.Second}}, "Redis.WaitTimeout"},
		{"negative attempts ttl", gate.Options{Retention: gate.Retention{Attempts: -time.Second}}, "Retention.Attempts"},
		{"negative canceled cooldown", gate.Options{Backoff: gate.Backoff{Canceled: -time.Second}}, "Backoff.Canceled"},
		{"negative upstream cooldown", gate.Options{UpstreamPolicy: gate.UpstreamPolicy{Cooldown: -time.Second}}, "UpstreamPolicy.Cooldown"},
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
	o := gate.OptionsOf(g)
	for _, c := range []struct {
		name     string
		exp, got any
	}{
		{"Backoff.MaxAttempts", 8, o.Backoff.MaxAttempts},
		{"Retention.Attempts", 24 * time.Hour, o.Retention.Attempts},
		{"Retention.Done", time.Duration(0), o.Retention.Done},
		{"Backoff.Canceled", time.Duration(0), o.Backoff.Canceled},
		{"Wait", time.Duration(0), o.Wait},
		{"Redis.Timeout", 5 * time.Second, o.Redis.Timeout},
		{"Redis.WaitTimeout", 100 * time.Millisecond, o.Redis.WaitTimeout},
		{"Redis.ContinueOnLeaseLost", false, o.Redis.ContinueOnLeaseLost},
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

	set := gate.Options{Lease: time.Second, Cooldown: time.Second, Backoff: gate.Backoff{MaxAttempts: -1, Max: 2 * time.Second, Factor: 3, Jitter: -1}, Retention: gate.Retention{Done: time.Second, Attempts: time.Second, Failed: time.Second},
		UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Second, AllowedFails: -1, FailWindow: time.Second, PauseTTL: time.Second, PermanentWave: -1,
			UnreachableJobs: -1}, Redis: gate.RedisPolicy{Timeout: time.Second, WaitTimeout: time.Second}}
	g, err = gate.New(rdb, set)
	if err != nil {
		t.Fatal(err)
	}
	o = gate.OptionsOf(g)
	if o.Lease != set.Lease || o.Cooldown != set.Cooldown || o.Backoff != set.Backoff ||
		o.Retention != set.Retention || o.Redis != set.Redis || !reflect.DeepEqual(o.UpstreamPolicy, set.UpstreamPolicy) {
		t.Fatalf("values set were changed:\nexp %+v\ngot %+v", set, o)
	}
}
