package gate_test

import (
	"errors"
	"math"
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
		{"every bad field at once", gate.Options{Lease: -1, Cooldown: -1, DoneTTL: -1, UpstreamPolicy: gate.UpstreamPolicy{PauseTTL: -1}, Backoff: gate.Backoff{Jitter: 2, Factor: -3}, Retention: gate.Retention{Failed: -1}},
			[]string{"Lease", "Cooldown", "Retention.Failed", "DoneTTL", "Backoff.Jitter", "Backoff.Factor", "UpstreamPolicy.PauseTTL"}},
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
	o := g.Options()
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
	if err != nil || g.Options().Backoff.Max != 2*time.Hour {
		t.Fatalf("Cooldown 2h: %v %v", err, g.Options().Backoff.Max)
	}
}

func FuzzOptions(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), 0.0, 0.0, 0, "")
	f.Add(int64(time.Millisecond), int64(-1), int64(time.Hour), 0.5, 1.5, -2, "a{")
	f.Add(int64(100*time.Millisecond), int64(10*time.Millisecond), int64(0), 2.0, 0.99, 3, "p")
	f.Add(int64(100*time.Millisecond), int64(10*time.Millisecond), int64(0), 77.0, -37.01, 3, "0") // negative Jitter: none
	_, rdb := redistest.Miniredis(f)
	f.Fuzz(func(t *testing.T, lease, cooldown, maxCooldown int64, factor, jitter float64, attempts int, prefix string) {
		g, err := gate.New(rdb, gate.Options{Lease: time.Duration(lease), Cooldown: time.Duration(cooldown), MaxAttempts: attempts, Prefix: prefix, Backoff: gate.Backoff{Max: time.Duration(maxCooldown), Factor: factor, Jitter: jitter}})
		if err != nil {
			if !errors.Is(err, gate.ErrInvalidOptions) {
				t.Fatalf("error %v is not ErrInvalidOptions", err)
			}
			return
		}
		o := g.Options()
		if o.Lease < gate.MinLease || o.Cooldown <= 0 || o.Backoff.Max < o.Cooldown || o.Backoff.Factor < 1 || !(o.Backoff.Jitter < 1) { // a negative Jitter means none
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
		{"scope of 256 bytes", gate.Options{Upstream: long(256)}, ""},
		{"upstream of 257 bytes", gate.Options{Upstream: long(257)}, "Upstream"},
		{"fallback of 256 bytes", gate.Options{Upstream: "a", Fallbacks: []string{long(256)}}, ""},
		{"fallback of 257 bytes", gate.Options{Upstream: "a", Fallbacks: []string{long(257)}}, "Fallbacks[0]"},
		{"lease MinLease", gate.Options{Lease: gate.MinLease}, ""},
		{"lease below MinLease", gate.Options{Lease: gate.MinLease - time.Millisecond}, "Lease"},
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
		{"max attempts 0", gate.Options{MaxAttempts: 0}, ""},
		{"max attempts 1", gate.Options{MaxAttempts: 1}, ""},
		{"max attempts -1 (unlimited)", gate.Options{MaxAttempts: -1}, ""},
		{"wait replicas 1", gate.Options{Redis: gate.RedisPolicy{WaitReplicas: 1}}, ""},
		{"wait replicas -1", gate.Options{Redis: gate.RedisPolicy{WaitReplicas: -1}}, "Redis.WaitReplicas"},
		{"negative wait", gate.Options{Wait: -time.Second}, "Wait"},
		{"negative timeout", gate.Options{Redis: gate.RedisPolicy{Timeout: -time.Second}}, "Redis.Timeout"},
		{"negative wait timeout", gate.Options{Redis: gate.RedisPolicy{WaitTimeout: -time.Second}}, "Redis.WaitTimeout"},
		{"negative attempts ttl", gate.Options{Retention: gate.Retention{Attempts: -time.Second}}, "Retention.Attempts"},
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
		{"MaxAttempts", 8, o.MaxAttempts},
		{"Retention.Attempts", 24 * time.Hour, o.Retention.Attempts},
		{"DoneTTL", time.Duration(0), o.DoneTTL},
		{"CanceledCooldown", time.Duration(0), o.CanceledCooldown},
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

	set := gate.Options{Lease: time.Second, Cooldown: time.Second, MaxAttempts: -1, DoneTTL: time.Second,
		UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Second, AllowedFails: -1, FailWindow: time.Second, PauseTTL: time.Second, PermanentWave: -1,
			UnreachableJobs: -1}, Backoff: gate.Backoff{Max: 2 * time.Second, Factor: 3, Jitter: -1}, Retention: gate.Retention{Attempts: time.Second, Failed: time.Second}, Redis: gate.RedisPolicy{Timeout: time.Second, WaitTimeout: time.Second}}
	g, err = gate.New(rdb, set)
	if err != nil {
		t.Fatal(err)
	}
	o = g.Options()
	if o.Lease != set.Lease || o.Cooldown != set.Cooldown || o.Backoff != set.Backoff || o.MaxAttempts != set.MaxAttempts ||
		o.Retention != set.Retention || o.DoneTTL != set.DoneTTL || o.Redis != set.Redis || o.UpstreamPolicy != set.UpstreamPolicy {
		t.Fatalf("values set were changed:\nexp %+v\ngot %+v", set, o)
	}
}

// Each field that moved into a group still works under its former name
// until the next minor release: alone it sets the group's field, equal to
// it is accepted, different from it is an error naming the new place, and
// Gate.Options reads the value in both places.
func TestOptionsFormerNames(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	for _, c := range []struct {
		place        string
		former, set  func(o *gate.Options) // set the former field, the new one
		formerV, got func(o gate.Options) any
	}{
		{"Backoff.Max", func(o *gate.Options) { o.MaxCooldown = 3 * time.Hour }, func(o *gate.Options) { o.Backoff.Max = 2 * time.Hour },
			func(o gate.Options) any { return o.MaxCooldown }, func(o gate.Options) any { return o.Backoff.Max }},
		{"Backoff.Factor", func(o *gate.Options) { o.BackoffFactor = 3 }, func(o *gate.Options) { o.Backoff.Factor = 1.5 },
			func(o gate.Options) any { return o.BackoffFactor }, func(o gate.Options) any { return o.Backoff.Factor }},
		{"Backoff.Jitter", func(o *gate.Options) { o.Jitter = -1 }, func(o *gate.Options) { o.Backoff.Jitter = 0.5 },
			func(o gate.Options) any { return o.Jitter }, func(o gate.Options) any { return o.Backoff.Jitter }},
		{"Retention.Attempts", func(o *gate.Options) { o.AttemptsTTL = time.Hour }, func(o *gate.Options) { o.Retention.Attempts = time.Minute },
			func(o gate.Options) any { return o.AttemptsTTL }, func(o gate.Options) any { return o.Retention.Attempts }},
		{"Retention.Failed", func(o *gate.Options) { o.FailedTTL = time.Hour }, func(o *gate.Options) { o.Retention.Failed = time.Minute },
			func(o gate.Options) any { return o.FailedTTL }, func(o gate.Options) any { return o.Retention.Failed }},
		{"Redis.Timeout", func(o *gate.Options) { o.Timeout = time.Second }, func(o *gate.Options) { o.Redis.Timeout = 2 * time.Second },
			func(o gate.Options) any { return o.Timeout }, func(o gate.Options) any { return o.Redis.Timeout }},
		{"Redis.WaitReplicas", func(o *gate.Options) { o.WaitReplicas = 1 }, func(o *gate.Options) { o.Redis.WaitReplicas = 2 },
			func(o gate.Options) any { return o.WaitReplicas }, func(o gate.Options) any { return o.Redis.WaitReplicas }},
		{"Redis.WaitTimeout", func(o *gate.Options) { o.WaitTimeout = time.Second }, func(o *gate.Options) { o.Redis.WaitTimeout = 2 * time.Second },
			func(o gate.Options) any { return o.WaitTimeout }, func(o gate.Options) any { return o.Redis.WaitTimeout }},
		{"Redis.FailOpen", func(o *gate.Options) { o.FailOpen = true }, nil,
			func(o gate.Options) any { return o.FailOpen }, func(o gate.Options) any { return o.Redis.FailOpen }},
		{"Redis.ContinueOnLeaseLost", func(o *gate.Options) { o.ContinueOnLeaseLost = true }, nil,
			func(o gate.Options) any { return o.ContinueOnLeaseLost }, func(o gate.Options) any { return o.Redis.ContinueOnLeaseLost }},
		{"UpstreamPolicy.FallbackCooldown", func(o *gate.Options) { o.FallbackCooldown = time.Second }, func(o *gate.Options) { o.UpstreamPolicy.FallbackCooldown = time.Minute },
			func(o gate.Options) any { return o.FallbackCooldown }, func(o gate.Options) any { return o.UpstreamPolicy.FallbackCooldown }},
	} {
		t.Run(c.place, func(t *testing.T) {
			var alone gate.Options
			c.former(&alone)
			g, err := gate.New(rdb, alone)
			if err != nil {
				t.Fatal(err)
			}
			if exp, got := c.formerV(alone), c.got(g.Options()); exp != got {
				t.Errorf("the former name alone: %s exp %v, got %v", c.place, exp, got)
			}
			if exp, got := c.got(g.Options()), c.formerV(g.Options()); exp != got {
				t.Errorf("the former field reads %v, the gate uses %v", got, exp)
			}

			both := alone
			c.former(&both)
			if c.set == nil { // a bool: either one set turns it on
				if _, err := gate.New(rdb, both); err != nil {
					t.Fatalf("both set: %v", err)
				}
				return
			}
			// Equal in both places: accepted.
			same := both
			switch c.place {
			case "Backoff.Max":
				same.Backoff.Max = same.MaxCooldown
			case "Backoff.Factor":
				same.Backoff.Factor = same.BackoffFactor
			case "Backoff.Jitter":
				same.Backoff.Jitter = same.Jitter
			case "Retention.Attempts":
				same.Retention.Attempts = same.AttemptsTTL
			case "Retention.Failed":
				same.Retention.Failed = same.FailedTTL
			case "Redis.Timeout":
				same.Redis.Timeout = same.Timeout
			case "Redis.WaitReplicas":
				same.Redis.WaitReplicas = same.WaitReplicas
			case "Redis.WaitTimeout":
				same.Redis.WaitTimeout = same.WaitTimeout
			case "UpstreamPolicy.FallbackCooldown":
				same.UpstreamPolicy.FallbackCooldown = same.FallbackCooldown
			}
			if _, err := gate.New(rdb, same); err != nil {
				t.Fatalf("equal in both places: %v", err)
			}
			// Different: an error naming the new place.
			c.set(&both)
			_, err = gate.New(rdb, both)
			if !errors.Is(err, gate.ErrInvalidOptions) || !strings.Contains(err.Error(), " "+c.place+":") {
				t.Fatalf("both set and different: %v, want ErrInvalidOptions naming %s", err, c.place)
			}
		})
	}
}
