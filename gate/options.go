package gate

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/retrygate/retrygate/classify"
)

// LeaseLostPolicy says what happens to fn when its lease is lost.
type LeaseLostPolicy uint8

const (
	// Fence cancels fn's context with cause ErrLeaseLost and skips the
	// settle, so a newer owner's lock is never touched. The default.
	Fence LeaseLostPolicy = iota
	// Continue lets fn run on; the loss is reported to the Observer and Do's
	// error wraps ErrLeaseLost.
	Continue
)

// Options configures a Gate. The zero value of every field means the
// documented default; New validates the options once.
type Options struct {
	// Prefix starts every key the gate writes. Must not contain '{' or '}'.
	// Default: "retrygate".
	Prefix string

	// Lease is the lock's TTL while fn runs. It is renewed every Lease/3, so
	// a crashed process holds a job for at most Lease. Minimum 30ms.
	// Default: 60s.
	Lease time.Duration

	// Cooldown is the wait after the first transient failure; attempt n
	// waits Cooldown × BackoffFactor^(n-1) ± Jitter, or the server's retry
	// hint when that is longer, capped at MaxCooldown. Default: 5m.
	Cooldown time.Duration
	// MaxCooldown caps every cooldown, the server's hint included.
	// Must not be below Cooldown. Default: 1h.
	MaxCooldown time.Duration
	// BackoffFactor multiplies the cooldown per repeated failure; ≥ 1.
	// Default: 2.
	BackoffFactor float64
	// Jitter spreads cooldowns by ± this fraction so retries of many jobs do
	// not align; in [0, 1). Default: 0.1. Set NoJitter to disable.
	Jitter float64
	// NoJitter turns jitter off (deterministic cooldowns).
	NoJitter bool

	// MaxAttempts marks the job Failed when its attempt count (transient and
	// permanent failures since the last success) reaches it. 0 = unlimited.
	MaxAttempts int
	// AttemptsTTL is how long the attempt count is remembered after the
	// job's last cooldown or mark ends; after that a failure starts again at
	// attempt 1. Default: 24h.
	AttemptsTTL time.Duration
	// FailedTTL is how long a Failed mark is kept before the job may run
	// again (keeps Redis memory bounded). Default: 7 days.
	FailedTTL time.Duration
	// DoneTTL holds a successful job as Done for this long, so duplicate
	// retries get ErrDone. 0 = release at once (the default).
	DoneTTL time.Duration

	// CanceledCooldown is the cooldown left after the caller cancelled while
	// fn ran (a closed tab, a dropped request). 0 releases the job at once,
	// the default; a few seconds stop a client that aborts every request
	// mid-call from re-running the model each time (providers bill the
	// tokens processed before the abort). No attempt is counted either way.
	CanceledCooldown time.Duration

	// MaxRenewFailures is how many renewals in a row may fail (Redis
	// unreachable) before the lease is considered lost. A "not owned" reply
	// loses it at once. Default: 3.
	MaxRenewFailures int
	// OnLeaseLost chooses what happens to fn on a lost lease. Default: Fence.
	OnLeaseLost LeaseLostPolicy

	// Classify decides what a failure deserves. Default: classify.Default.
	Classify classify.Func

	// FailOpen runs fn ungated (Lease.Gated reports false, Fence is 0) when
	// Redis cannot be reached at acquire, instead of returning
	// ErrUnavailable. Default: false (fail closed).
	FailOpen bool

	// Timeout bounds the Redis operations the gate runs on its own, detached
	// from the caller: settles (so a request that went away still records
	// its cooldown), renewals and undos. Calls made for the caller
	// (Acquire, Status, Reset) follow the caller's context. go-redis applies
	// a context deadline to the socket only with
	// redis.Options.ContextTimeoutEnabled; otherwise its ReadTimeout and
	// MaxRetries bound the wait. Default: 5s.
	Timeout time.Duration

	// WaitReplicas makes every acquire wait until this many replicas have
	// acknowledged the lock (Redis WAIT, on the connection that wrote it),
	// so a failover right after the acquire cannot lose it. If fewer
	// acknowledge within WaitTimeout the acquire is undone and fails
	// closed with an error matching ErrNotReplicated and ErrUnavailable.
	// It costs one more round trip plus the replicas' lag, and needs rdb to
	// be a *redis.Client or *redis.ClusterClient. 0 = off (the default).
	// Cooldowns are not waited for: a failover may still lose one.
	WaitReplicas int
	// WaitTimeout bounds the wait for WaitReplicas. Default: 100ms.
	WaitTimeout time.Duration

	// Observer receives the gate's events (metrics, logs). Nil = none, at
	// no cost.
	Observer Observer

	// Scope names the upstream this gate calls (e.g. "openai:prod-key").
	// When set, provider-wide failures cool the whole scope, not just the
	// job. Empty = no upstream cooldown.
	Scope string
	// ScopeCooldown is how long a provider-wide transient failure (429 rate
	// limit, 503, 529) cools the scope when the server gave no retry hint.
	// Default: 10s.
	ScopeCooldown time.Duration
	// ScopeAllowedFails is how many other 5xx failures the scope tolerates
	// inside ScopeFailWindow; one more cools it for ScopeCooldown. -1 = none
	// tolerated. Default: 3.
	ScopeAllowedFails int
	// ScopeFailWindow is the sliding window for ScopeAllowedFails.
	// Default: 1m.
	ScopeFailWindow time.Duration
	// ScopePauseTTL is how long a systemic failure (quota exhausted, bad
	// key, model not found) pauses the scope, unless an operator resets it
	// first. Default: 10m.
	ScopePauseTTL time.Duration
}

// Defaults.
const (
	DefaultPrefix            = "retrygate"
	DefaultLease             = 60 * time.Second
	DefaultCooldown          = 5 * time.Minute
	DefaultMaxCooldown       = time.Hour
	DefaultBackoffFactor     = 2.0
	DefaultJitter            = 0.1
	DefaultAttemptsTTL       = 24 * time.Hour
	DefaultFailedTTL         = 7 * 24 * time.Hour
	DefaultMaxRenewFailures  = 3
	DefaultTimeout           = 5 * time.Second
	DefaultScopeCooldown     = 10 * time.Second
	DefaultScopeAllowedFails = 3
	DefaultScopeFailWindow   = time.Minute
	DefaultScopePauseTTL     = 10 * time.Minute
	DefaultWaitTimeout       = 100 * time.Millisecond

	// MinLease is the shortest valid Lease: renewal runs every Lease/3.
	MinLease = 30 * time.Millisecond
	// MaxJobLen is the longest job key, in bytes.
	MaxJobLen = 1024
	// maxPrefixLen bounds Prefix and Scope.
	maxPrefixLen = 256
)

// ErrInvalidOptions is matched by the *OptionsError New returns.
var ErrInvalidOptions = errors.New("gate: invalid options")

// OptionsError names every invalid field of an Options.
type OptionsError struct {
	// Problems holds one "Field: why" entry per invalid field.
	Problems []string
}

func (e *OptionsError) Error() string {
	return "gate: invalid options: " + strings.Join(e.Problems, "; ")
}

// Is reports whether target is ErrInvalidOptions.
func (e *OptionsError) Is(target error) bool { return target == ErrInvalidOptions }

// withDefaults validates o and returns it with every zero field defaulted.
func (o Options) withDefaults() (Options, error) {
	var bad []string
	neg := func(name string, d time.Duration) {
		if d < 0 {
			bad = append(bad, fmt.Sprintf("%s: negative duration %v", name, d))
		}
	}
	neg("Lease", o.Lease)
	neg("Cooldown", o.Cooldown)
	neg("MaxCooldown", o.MaxCooldown)
	neg("AttemptsTTL", o.AttemptsTTL)
	neg("FailedTTL", o.FailedTTL)
	neg("DoneTTL", o.DoneTTL)
	neg("CanceledCooldown", o.CanceledCooldown)
	neg("Timeout", o.Timeout)
	neg("ScopeCooldown", o.ScopeCooldown)
	neg("ScopeFailWindow", o.ScopeFailWindow)
	neg("ScopePauseTTL", o.ScopePauseTTL)
	neg("WaitTimeout", o.WaitTimeout)

	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(o.Prefix, "{}") || len(o.Prefix) > maxPrefixLen {
		bad = append(bad, fmt.Sprintf("Prefix: must not contain '{' or '}' and be at most %d bytes", maxPrefixLen))
	}
	if len(o.Scope) > maxPrefixLen {
		bad = append(bad, fmt.Sprintf("Scope: longer than %d bytes", maxPrefixLen))
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	} else if o.Lease > 0 && o.Lease < MinLease {
		bad = append(bad, fmt.Sprintf("Lease: %v is too short to renew (minimum %v)", o.Lease, MinLease))
	}
	if o.Cooldown == 0 {
		o.Cooldown = DefaultCooldown
	}
	if o.MaxCooldown == 0 {
		o.MaxCooldown = max(DefaultMaxCooldown, o.Cooldown)
	}
	if o.MaxCooldown < o.Cooldown && o.MaxCooldown >= 0 && o.Cooldown >= 0 {
		bad = append(bad, fmt.Sprintf("MaxCooldown: %v is below Cooldown %v", o.MaxCooldown, o.Cooldown))
	}
	if o.BackoffFactor == 0 {
		o.BackoffFactor = DefaultBackoffFactor
	} else if !(o.BackoffFactor >= 1) || o.BackoffFactor > 1e6 { // also rejects NaN
		bad = append(bad, fmt.Sprintf("BackoffFactor: %v is outside [1, 1e6]", o.BackoffFactor))
	}
	switch {
	case o.NoJitter:
		o.Jitter = 0
	case o.Jitter == 0:
		o.Jitter = DefaultJitter
	case !(o.Jitter > 0 && o.Jitter < 1):
		bad = append(bad, fmt.Sprintf("Jitter: %v is outside [0, 1)", o.Jitter))
	}
	if o.MaxAttempts < 0 {
		bad = append(bad, fmt.Sprintf("MaxAttempts: %d is negative", o.MaxAttempts))
	}
	if o.AttemptsTTL == 0 {
		o.AttemptsTTL = DefaultAttemptsTTL
	}
	if o.FailedTTL == 0 {
		o.FailedTTL = DefaultFailedTTL
	}
	if o.MaxRenewFailures == 0 {
		o.MaxRenewFailures = DefaultMaxRenewFailures
	} else if o.MaxRenewFailures < 0 {
		bad = append(bad, fmt.Sprintf("MaxRenewFailures: %d is negative", o.MaxRenewFailures))
	}
	if o.OnLeaseLost != Fence && o.OnLeaseLost != Continue {
		bad = append(bad, fmt.Sprintf("OnLeaseLost: unknown policy %d", o.OnLeaseLost))
	}
	if o.Classify == nil {
		o.Classify = classify.Default
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ScopeCooldown == 0 {
		o.ScopeCooldown = DefaultScopeCooldown
	}
	switch {
	case o.ScopeAllowedFails == 0:
		o.ScopeAllowedFails = DefaultScopeAllowedFails
	case o.ScopeAllowedFails == -1:
		o.ScopeAllowedFails = 0
	case o.ScopeAllowedFails < 0:
		bad = append(bad, fmt.Sprintf("ScopeAllowedFails: %d is below -1", o.ScopeAllowedFails))
	}
	if o.ScopeFailWindow == 0 {
		o.ScopeFailWindow = DefaultScopeFailWindow
	}
	if o.ScopePauseTTL == 0 {
		o.ScopePauseTTL = DefaultScopePauseTTL
	}
	if o.WaitReplicas < 0 {
		bad = append(bad, fmt.Sprintf("WaitReplicas: %d is negative", o.WaitReplicas))
	}
	if o.WaitTimeout == 0 {
		o.WaitTimeout = DefaultWaitTimeout
	}
	if len(bad) > 0 {
		return o, &OptionsError{Problems: bad}
	}
	return o, nil
}
