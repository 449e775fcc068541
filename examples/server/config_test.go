package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	tests := []struct {
		name  string
		args  []string
		env   func(string) string
		check func(t *testing.T, c config)
	}{
		{"defaults: free port, embedded Redis, fake upstream, demo-sized gate", nil, env(), func(t *testing.T, c config) {
			if c.Addr != "127.0.0.1:0" || c.RedisURL != "" || c.OpenAIKey != "" || c.Cooldown != 5*time.Second ||
				c.Lease != 2*time.Second || c.MaxAttempts != 3 || c.RateLimitHint != 8*time.Second || c.UpstreamHint != 20*time.Second ||
				!c.Backup || c.Budget != 0 || c.BudgetRefill != 2*time.Second {
				t.Fatalf("defaults %+v", c)
			}
		}},
		{"environment", nil, env("PORT", "8080", "REDIS_URL", "rediss://h:6380/1", "OPENAI_API_KEY", "k",
			"OPENAI_MODEL", "m", "RETRYGATE_COOLDOWN", "7s", "RETRYGATE_MAX_ATTEMPTS", "5", "DEMO_BACKUP", "0"), func(t *testing.T, c config) {
			if c.Addr != "127.0.0.1:8080" || c.RedisURL != "rediss://h:6380/1" || c.OpenAIKey != "k" || c.Model != "m" ||
				c.Cooldown != 7*time.Second || c.MaxAttempts != 5 || c.Backup {
				t.Fatalf("from env %+v", c)
			}
		}},
		{"flags win over the environment", []string{"-addr", ":9000", "-cooldown", "2s", "-lease", "1s"},
			env("PORT", "8080", "RETRYGATE_COOLDOWN", "7s"), func(t *testing.T, c config) {
				if c.Addr != ":9000" || c.Cooldown != 2*time.Second || c.Lease != time.Second {
					t.Fatalf("flags %+v", c)
				}
			}},
		{"the upstream's flags and environment", []string{"-upstream-cooldown", "3s", "--upstream-pause=4s"},
			env("DEMO_UPSTREAM_HINT", "6s"), func(t *testing.T, c config) {
				if c.UpstreamCooldown != 3*time.Second || c.UpstreamPause != 4*time.Second || c.UpstreamHint != 6*time.Second {
					t.Fatalf("upstream settings %+v", c)
				}
			}},
		{"the fake key's budget", []string{"-budget-refill", "3s"}, env("DEMO_BUDGET", "4"), func(t *testing.T, c config) {
			if c.Budget != 4 || c.BudgetRefill != 3*time.Second {
				t.Fatalf("budget %d every %v", c.Budget, c.BudgetRefill)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, tt.env, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestParseConfigNamesEveryBadValue(t *testing.T) {
	_, err := parseConfig([]string{"-lease", "0s", "-max-attempts", "-1", "-budget-refill", "0s"},
		func(k string) string {
			return map[string]string{"REDIS_URL": "localhost:6379", "RETRYGATE_COOLDOWN": "soon", "DEMO_BACKUP": "maybe", "DEMO_BUDGET": "-2"}[k]
		}, io.Discard)
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"RETRYGATE_COOLDOWN", "REDIS_URL", "-lease", "-max-attempts", "DEMO_BACKUP", "DEMO_BUDGET", "-budget-refill"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestHelpSaysUpstream(t *testing.T) {
	var out strings.Builder
	if _, err := parseConfig([]string{"-h"}, func(string) string { return "" }, &out); err == nil {
		t.Fatal("-h parsed as a configuration")
	}
	for _, flag := range []string{"-upstream-cooldown", "-upstream-pause", "-upstream-hint"} {
		if !strings.Contains(out.String(), flag) {
			t.Errorf("help lacks %s:\n%s", flag, out.String())
		}
	}
	if strings.Contains(out.String(), "scope") {
		t.Errorf("help still says scope:\n%s", out.String())
	}
}
