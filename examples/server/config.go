package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/retrygate/retrygate/gate"
)

// config is everything the demo can be told, by flag or environment.
type config struct {
	// Addr is the listen address. Default: a free port on 127.0.0.1
	// ("127.0.0.1:0"), or 127.0.0.1:$PORT when PORT is set.
	Addr string
	// RedisURL selects a real Redis (redis:// or rediss://); empty = an
	// embedded in-process Redis.
	RedisURL string

	// OpenAIKey selects the real API; empty = the built-in fake upstream.
	OpenAIKey     string
	OpenAIBaseURL string
	Model         string

	// Gate settings: demo-sized (seconds, not minutes).
	Cooldown    time.Duration
	MaxCooldown time.Duration
	Lease       time.Duration
	MaxAttempts int
	// DoneTTL keeps a successful evaluation Done: a click that waited
	// for the running call (Prefer: wait), or comes within DoneTTL, gets
	// its result without a second model call.
	DoneTTL time.Duration
	// UpstreamCooldown is the upstream pause after a provider-wide failure
	// that came without a retry hint.
	UpstreamCooldown time.Duration
	// UpstreamPause is the longest pause of a systemic failure (the credit
	// balance ran out): the first pauses the upstream for UpstreamCooldown,
	// each probe that fails again for twice as long, up to UpstreamPause.
	UpstreamPause time.Duration

	// Backup adds a second fake upstream behind another key, the gate's
	// Fallbacks: when the first key is rate-limited or out of credits, a
	// job runs on it. Default: on (flag -backup=false, env DEMO_BACKUP=0:
	// one upstream, and every job waits for it).
	Backup bool

	// Fake upstream behaviour.
	RateLimitHint time.Duration // retry-after-ms of the per-document 429
	UpstreamHint  time.Duration // retry-after-ms of the provider-wide 429
	SlowCall      time.Duration // duration of the slow call
	// Budget is the requests each fake key allows at once, one more
	// every BudgetRefill, reported on every response (OpenAI's
	// x-ratelimit headers): when the budget is short, a click takes a
	// place in line and the page shows it. 0 = none reported.
	Budget       int
	BudgetRefill time.Duration

	// ShutdownTimeout bounds the graceful shutdown.
	ShutdownTimeout time.Duration

	// ready, when set, is called with the base URL once the server listens
	// (tests use it to find the port).
	ready func(baseURL string)
	// observer, when set, sees each of the gate's events before the
	// demo's own observers (tests use it to order a settle's report
	// against the page's stream).
	observer gate.Observer
}

// defaultModel is used with the real API when OPENAI_MODEL is unset.
const defaultModel = "gpt-4o-mini"

// parseConfig reads flags from args and falls back to the environment
// (getenv), then to the demo defaults. Flags win over the environment.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	cfg := config{
		Addr:             "127.0.0.1:0",
		Model:            defaultModel,
		Cooldown:         5 * time.Second,
		MaxCooldown:      time.Minute,
		Lease:            2 * time.Second,
		MaxAttempts:      3,
		DoneTTL:          5 * time.Second,
		UpstreamCooldown: 10 * time.Second,
		UpstreamPause:    30 * time.Second,
		RateLimitHint:    8 * time.Second,
		UpstreamHint:     20 * time.Second,
		SlowCall:         5 * time.Second,
		BudgetRefill:     2 * time.Second,
		ShutdownTimeout:  15 * time.Second,
		Backup:           true,
	}
	if p := getenv("PORT"); p != "" {
		cfg.Addr = "127.0.0.1:" + p
	}
	cfg.RedisURL = getenv("REDIS_URL")
	cfg.OpenAIKey = getenv("OPENAI_API_KEY")
	cfg.OpenAIBaseURL = getenv("OPENAI_BASE_URL")
	if m := getenv("OPENAI_MODEL"); m != "" {
		cfg.Model = m
	}

	var bad []string
	envDur := func(name string, d *time.Duration) {
		if v := getenv(name); v != "" {
			p, err := time.ParseDuration(v)
			if err != nil || p <= 0 {
				bad = append(bad, fmt.Sprintf("%s=%q: want a positive duration such as 5s", name, v))
				return
			}
			*d = p
		}
	}
	envDur("RETRYGATE_COOLDOWN", &cfg.Cooldown)
	envDur("RETRYGATE_MAX_COOLDOWN", &cfg.MaxCooldown)
	envDur("RETRYGATE_LEASE", &cfg.Lease)
	envDur("RETRYGATE_UPSTREAM_COOLDOWN", &cfg.UpstreamCooldown)
	envDur("RETRYGATE_DONE_TTL", &cfg.DoneTTL)
	envDur("RETRYGATE_UPSTREAM_PAUSE", &cfg.UpstreamPause)
	envDur("DEMO_RATE_LIMIT_HINT", &cfg.RateLimitHint)
	envDur("DEMO_UPSTREAM_HINT", &cfg.UpstreamHint)
	envDur("DEMO_SLOW_CALL", &cfg.SlowCall)
	envDur("DEMO_BUDGET_REFILL", &cfg.BudgetRefill)
	if v := getenv("DEMO_BUDGET"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			bad = append(bad, fmt.Sprintf("DEMO_BUDGET=%q: want a whole number ≥ 0", v))
		} else {
			cfg.Budget = n
		}
	}
	if v := getenv("DEMO_BACKUP"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad = append(bad, fmt.Sprintf("DEMO_BACKUP=%q: want 1 or 0", v))
		} else {
			cfg.Backup = b
		}
	}
	if v := getenv("RETRYGATE_MAX_ATTEMPTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			bad = append(bad, fmt.Sprintf("RETRYGATE_MAX_ATTEMPTS=%q: want a whole number ≥ 0", v))
		} else {
			cfg.MaxAttempts = n
		}
	}

	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address (env PORT); :8080 listens on every interface")
	fs.StringVar(&cfg.RedisURL, "redis-url", cfg.RedisURL, "redis:// or rediss:// URL (env REDIS_URL); empty = embedded Redis")
	fs.StringVar(&cfg.Model, "model", cfg.Model, "model for the real API (env OPENAI_MODEL)")
	fs.DurationVar(&cfg.Cooldown, "cooldown", cfg.Cooldown, "first cooldown after a transient failure (env RETRYGATE_COOLDOWN)")
	fs.DurationVar(&cfg.MaxCooldown, "max-cooldown", cfg.MaxCooldown, "longest cooldown (env RETRYGATE_MAX_COOLDOWN)")
	fs.DurationVar(&cfg.Lease, "lease", cfg.Lease, "lock lease while the model runs, renewed every lease/3 (env RETRYGATE_LEASE)")
	fs.IntVar(&cfg.MaxAttempts, "max-attempts", cfg.MaxAttempts, "failures before a job is marked failed, 0 = the gate's default (8) (env RETRYGATE_MAX_ATTEMPTS)")
	fs.DurationVar(&cfg.DoneTTL, "done-ttl", cfg.DoneTTL, "how long a success is kept done and replayed to duplicates (env RETRYGATE_DONE_TTL)")
	fs.DurationVar(&cfg.UpstreamCooldown, "upstream-cooldown", cfg.UpstreamCooldown, "upstream pause after a provider-wide failure without a hint (env RETRYGATE_UPSTREAM_COOLDOWN)")
	fs.DurationVar(&cfg.UpstreamPause, "upstream-pause", cfg.UpstreamPause, "longest upstream pause after a systemic failure such as an empty credit balance; the first lasts --upstream-cooldown (env RETRYGATE_UPSTREAM_PAUSE)")
	fs.BoolVar(&cfg.Backup, "backup", cfg.Backup, "fake upstream: a second one behind another key, used while the first is rate-limited or out of credits (env DEMO_BACKUP)")
	fs.DurationVar(&cfg.RateLimitHint, "rate-limit-hint", cfg.RateLimitHint, "fake upstream: retry-after-ms of the per-document 429 (env DEMO_RATE_LIMIT_HINT)")
	fs.DurationVar(&cfg.UpstreamHint, "upstream-hint", cfg.UpstreamHint, "fake upstream: retry-after-ms of the provider-wide 429 (env DEMO_UPSTREAM_HINT)")
	fs.DurationVar(&cfg.SlowCall, "slow-call", cfg.SlowCall, "fake upstream: duration of the slow call (env DEMO_SLOW_CALL)")
	fs.IntVar(&cfg.Budget, "budget", cfg.Budget, "fake upstream: requests each key allows at once, reported in rate-limit headers; when they run short a click waits in line (env DEMO_BUDGET; 0 = none)")
	fs.DurationVar(&cfg.BudgetRefill, "budget-refill", cfg.BudgetRefill, "fake upstream: time for one request of the budget to come back (env DEMO_BUDGET_REFILL)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		bad = append(bad, fmt.Sprintf("unexpected arguments %q", fs.Args()))
	}
	if cfg.RedisURL != "" && !strings.HasPrefix(cfg.RedisURL, "redis://") && !strings.HasPrefix(cfg.RedisURL, "rediss://") {
		bad = append(bad, "REDIS_URL: want a redis:// or rediss:// URL")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"cooldown", cfg.Cooldown}, {"max-cooldown", cfg.MaxCooldown}, {"lease", cfg.Lease}, {"done-ttl", cfg.DoneTTL}, {"upstream-cooldown", cfg.UpstreamCooldown}, {"upstream-pause", cfg.UpstreamPause},
		{"rate-limit-hint", cfg.RateLimitHint}, {"upstream-hint", cfg.UpstreamHint}, {"slow-call", cfg.SlowCall}, {"budget-refill", cfg.BudgetRefill}} {
		if d.v <= 0 {
			bad = append(bad, fmt.Sprintf("-%s: want a positive duration", d.name))
		}
	}
	if cfg.Budget < 0 {
		bad = append(bad, "-budget: want a whole number ≥ 0")
	}
	if cfg.MaxAttempts < 0 {
		bad = append(bad, "-max-attempts: want a whole number ≥ 0")
	}
	if len(bad) > 0 {
		return cfg, errors.New("invalid configuration: " + strings.Join(bad, "; "))
	}
	return cfg, nil
}
