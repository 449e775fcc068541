package gate

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/limits"
)

// Options configures a Gate. What most callers set is a field of its own.
// What few tune is grouped:
//   - Backoff: how a cooldown grows;
//   - Retention: how long Redis remembers a job;
//   - Redis: timeouts, replicas, and what the gate does when Redis fails;
//   - UpstreamPolicy: fallbacks, and how an upstream cools and admits.
//
// The zero value of every field means the documented default. A negative
// Backoff.MaxAttempts means unlimited. A negative Backoff.Jitter,
// UpstreamPolicy.AllowedFails, UpstreamPolicy.PermanentWave or
// UpstreamPolicy.UnreachableJobs means none. New validates the options
// once.
type Options struct {
	// Prefix starts every key the gate writes. Must not contain '{' or '}'.
	// Default: "retrygate".
	Prefix string

	// Lease is the lock's TTL while fn runs. It is renewed every Lease/3.
	// So a crashed process holds a job for at most Lease. The lease is lost
	// when a renewal finds the lock owned by someone else. It is also lost
	// when renewals kept failing until it must have expired by the local
	// clock. Minimum 30ms. Default: 60s.
	Lease time.Duration

	// Cooldown is the wait after the first transient failure. Attempt n
	// waits Cooldown × Backoff.Factor^(n-1) ± Backoff.Jitter. It waits the
	// server's retry hint instead when that is longer. Backoff.Max caps
	// the wait. Default: 5m.
	Cooldown time.Duration

	// Wait is how long Acquire, Do and Call wait for a job that is running
	// elsewhere (another process, another goroutine) to settle. Then they
	// give up with ErrInFlight. Redis pub/sub wakes the waiter the moment
	// the running lease settles. The waiter gets what that run left:
	//   - ErrDone when it succeeded, whatever Retention.Done is: a waiter
	//     never runs a job twice;
	//   - ErrCoolingDown with its true wait, or ErrFailed, when it failed;
	//   - the job to run, only when the run ended without an outcome
	//     (released, or its lease lost).
	//
	// AcquireWait chooses per call. 0 = no wait: a running job is refused
	// at once (the default).
	Wait time.Duration

	// Classify decides what a failure deserves. Default: classify.Default.
	Classify classify.Func

	// Observer receives the gate's events (metrics, logs). Nil = none, at
	// no cost.
	Observer Observer

	// Upstream names the upstream this gate calls (e.g. "openai:prod-key").
	// Provider-wide failures cool the whole upstream, not just the job.
	// Every job of it is refused with ErrUpstreamCooling until the
	// provider's wait ends. Then one call probes it. Its budget admits
	// calls (UpstreamPolicy.IgnoreBudget). Gates that call one provider
	// account share a name. UpstreamPolicy.Off turns upstreams off.
	// Default: DefaultUpstream.
	Upstream string
	// UpstreamPolicy names the fallback upstreams and tunes every
	// upstream, or turns them off (Off).
	UpstreamPolicy UpstreamPolicy

	// Shadow runs the gate beside production without enforcing it. Every
	// call is decided as usual: refusals, cooldowns, pauses, budget
	// refusals, failed marks, events, metrics. But every call runs, and
	// nothing waits. A refused call runs on a lease that writes nothing
	// (Lease.Gated reports false). Its keys are its own (Prefix +
	// "-shadow"), so no enforcing gate obeys what it writes. Every Event it
	// sends has Shadow set. Turned off, the gate enforces what it reported.
	// Default: false.
	Shadow bool

	// Backoff shapes how a job's cooldown grows over repeated failures. It
	// also sets when the attempts end (MaxAttempts) and what a cancelled
	// call leaves.
	Backoff Backoff
	// Retention bounds how long Redis remembers a job: Done, its attempts,
	// a Failed mark.
	Retention Retention
	// Redis tunes the gate's Redis calls and what the gate does when Redis
	// fails.
	Redis RedisPolicy
}

// Backoff shapes how a job's cooldown grows. Attempt n waits
// Options.Cooldown × Factor^(n-1), spread by ± Jitter, capped at Max.
// When the attempts reach MaxAttempts, the job is marked Failed.
type Backoff struct {
	// Factor multiplies the cooldown per repeated failure. ≥ 1.
	// Default: 2.
	Factor float64
	// Jitter spreads cooldowns by ± this fraction, so retries of many jobs
	// do not align. Below 1. Negative = no jitter: deterministic
	// cooldowns, for tests and examples. Default: 0.1.
	Jitter float64
	// Max caps every cooldown the gate writes, the server's hint and the
	// upstreams' included. Must not be below Options.Cooldown.
	// Default: 1h, or Options.Cooldown when that is longer.
	Max time.Duration
	// MaxAttempts marks the job Failed when its attempt count reaches it.
	// So a job whose every attempt fails for its own reason ends (a model
	// that never returns valid output). The count is the job's transient
	// and suspect failures since its last success. Provider-wide failures
	// (rate limits, overload, quota, keys) and systemic ones never count.
	// With the default Cooldown and Backoff, 8 attempts are about 4h15m of
	// retries. Negative = unlimited. Default: 8.
	MaxAttempts int
	// Canceled is the cooldown left after the caller cancelled while fn
	// ran (a closed tab, a dropped request). 0, the default, releases the
	// job at once. Some clients abort every request mid-call. A few seconds
	// stop them from re-running the model each time. Providers bill the
	// tokens processed before the abort. No attempt is counted either way.
	Canceled time.Duration
}

// Retention bounds how long Redis remembers a job.
type Retention struct {
	// Done keeps a successful job Done for this long. Duplicate retries
	// get ErrDone. 0 = release at once (the default).
	Done time.Duration
	// Attempts is how long the attempt count is remembered after the
	// job's last cooldown or mark ends. After that a failure starts again
	// at attempt 1. Default: 24h.
	Attempts time.Duration
	// Failed is how long a Failed mark is kept before the job may run
	// again. It keeps Redis memory bounded. Default: 7 days.
	Failed time.Duration
}

// RedisPolicy tunes the gate's Redis calls and what the gate does when
// Redis fails.
type RedisPolicy struct {
	// Timeout bounds the Redis operations the gate runs on its own,
	// detached from the caller: settles, renewals and undos. A settle is
	// detached so a request that went away still records its cooldown.
	// Calls made for the caller (Acquire, Status, Reset) follow the
	// caller's context. go-redis applies a context deadline to the socket
	// only with redis.Options.ContextTimeoutEnabled. Otherwise its
	// ReadTimeout and MaxRetries bound the wait. Default: 5s.
	Timeout time.Duration

	// WaitReplicas makes every acquire wait until this many replicas have
	// acknowledged the lock (Redis WAIT, on the connection that wrote it).
	// So a failover right after the acquire cannot lose it. If fewer
	// acknowledge within WaitTimeout, the acquire is undone. It then fails
	// closed with an ErrUnavailable. It costs one more round trip plus the
	// replicas' lag. It needs a client that can pin a connection: a
	// *redis.Client, a *redis.ClusterClient, or a wrapper that embeds one.
	// 0 = off (the default). Cooldowns are not waited for: a failover may
	// still lose one.
	WaitReplicas int
	// WaitTimeout bounds the wait for WaitReplicas. Default: 100ms.
	WaitTimeout time.Duration

	// FailOpen runs fn ungated when Redis cannot be reached at acquire
	// (ErrUnavailable), instead of failing closed. Lease.Gated then reports
	// false, and Fence is 0. A Redis that answers with an error always
	// fails closed (ErrRedisRefused: a missing ACL permission, a full
	// noeviction Redis, a replica). A configuration mistake must not
	// switch the gate off. Default: false (fail closed).
	FailOpen bool

	// ContinueOnLeaseLost lets fn run on when its lease is lost. Renewals
	// could not reach Redis in time, or the lock passed to someone else.
	// The loss is reported to the Observer. The settle that follows finds
	// the lock gone or taken, and leaves it alone (a success still outdates
	// an older run's failure written there meanwhile). Do's error wraps
	// ErrNotOwned. By default fn's context is cancelled with cause
	// ErrLeaseLost, and nothing is settled. So a newer owner's lock is
	// never touched.
	ContinueOnLeaseLost bool
}

// UpstreamPolicy tunes how provider-wide failures cool an upstream. Every
// upstream cooldown is also capped by Options.Backoff.Max.
type UpstreamPolicy struct {
	// Fallbacks names more upstreams, tried in order after
	// Options.Upstream. Each acquire runs the job on the first upstream
	// that is ready, or whose probe it may claim. Lease.Upstream names it,
	// so fn calls that one. The job keeps one lock whichever upstream runs
	// it. Requires Options.Upstream set by name. Names must differ.
	Fallbacks []string
	// Cooldown is how long a provider-wide transient failure (429 rate
	// limit, 503, 529) cools the upstream when the server gave no retry
	// hint. It is also the first pause of a systemic one (see PauseTTL). It
	// is also the cooldown of an address that fails (see UnreachableJobs).
	// Default: 10s.
	Cooldown time.Duration
	// AllowedFails is how many other 5xx failures the upstream tolerates
	// inside FailWindow. One more cools it for Cooldown. Negative = none
	// tolerated. Default: 3.
	AllowedFails int
	// FailWindow is the sliding window for AllowedFails. Default: 1m.
	FailWindow time.Duration
	// PauseTTL is the longest pause of a provider-wide systemic failure
	// (quota exhausted, credit balance too low, bad key). The first such
	// failure pauses the upstream for Cooldown, or the server's hint when
	// longer. Each probe that fails again pauses it Backoff.Factor times
	// longer, up to PauseTTL. So a per-minute limit worded as "quota"
	// costs seconds. A billing lapse settles into PauseTTL, with one probe
	// each. A wave (PermanentWave) pauses the upstream for PauseTTL at
	// once. An operator's reset ends a pause. Default: 10m.
	PauseTTL time.Duration
	// PermanentWave is how many distinct jobs failing permanently with the
	// same reason within FailWindow make a wave. A wave is not the jobs'
	// fault. So those jobs cool instead of being marked Failed. The
	// upstream pauses for the reason (see WarnPermanentWave). Negative =
	// off. Default: 10.
	PermanentWave int
	// UnreachableJobs is how many distinct jobs whose calls cannot reach
	// the upstream's address within FailWindow cool it. It cools for
	// Cooldown, × Backoff.Factor per probe that fails the same way. So the
	// jobs after them are refused without a failing call each. A call
	// cannot reach the address when (classify evidence in parentheses):
	//   - its host does not resolve (go:dns);
	//   - it refuses connections (go:refused);
	//   - it is unreachable (go:unreachable);
	//   - it fails TLS verification (go:tls);
	//   - the URL is malformed (go:url).
	//
	// A connection that broke mid-call (go:network, go:timeout) is not the
	// address. A job failing again counts once. Negative = off. Default: 3.
	UnreachableJobs int
	// IgnoreBudget turns off admission by the provider's rate limits.
	// By default admission works so:
	//   - Every response of a gated call tells the upstream, in Redis, how
	//     many requests and tokens are left and when they refill. The call
	//     goes through classify.Transport, or fn reports the response with
	//     Lease.ObserveBudget.
	//   - Before each call, every process estimates what is left now. It
	//     subtracts the calls admitted and not yet settled.
	//   - While that is below a reserve, the call is refused with
	//     ErrUpstreamCooling until one more call fits. The call that earns
	//     a 429 is not sent. The reserve is one request, or 1 % of the
	//     token limit for a call that does not say its tokens with
	//     WithTokens.
	//
	// Without such responses nothing changes. Default: false (admission
	// on).
	IgnoreBudget bool
	// Off runs the gate without an upstream. A provider-wide failure cools
	// only the job that met it. Every other job still makes its call. No
	// budget admits calls. Off is for a gate whose jobs call no provider,
	// or whose caller limits calls on its own. Not with Upstream.
	// Default: false: the gate calls Upstream, or DefaultUpstream when
	// not set.
	Off bool
	// FallbackCooldown is how long a job waits after a provider-wide
	// failure when the gate has Fallbacks. Its upstream cools. The job's
	// next call runs on the next ready one. 0, the default, lets that call
	// run at once. A job never calls two upstreams in one Do.
	FallbackCooldown time.Duration
}

// maxPrefixLen bounds Prefix and the upstreams' names.
const maxPrefixLen = 256

// DefaultUpstream is the upstream of a gate without Options.Upstream,
// unless UpstreamPolicy.Off. Its keys live under the gate's Prefix. So
// gates with one Prefix share it, as gates that name one upstream do.
const DefaultUpstream = "default"

// ErrInvalidOptions is matched by the error New returns for invalid
// options. Its text names every invalid field.
var ErrInvalidOptions = errors.New("gate: invalid options")

// optionsError names every invalid field of an Options.
type optionsError struct {
	problems []string
}

func (e *optionsError) Error() string {
	return "gate: invalid options: " + strings.Join(e.problems, "; ")
}

// Is reports whether target is ErrInvalidOptions.
func (e *optionsError) Is(target error) bool { return target == ErrInvalidOptions }

// withDefaults validates o and returns it with every zero field defaulted.
func (o Options) withDefaults() (Options, error) {
	var bad []string
	// dur defaults a zero duration and reports a negative one. It returns
	// false for a negative one, so the checks that compare it are skipped.
	dur := func(name string, d *time.Duration, def time.Duration) bool {
		if *d < 0 {
			bad = append(bad, fmt.Sprintf("%s: negative duration %v", name, *d))
			return false
		}
		if *d == 0 {
			*d = def
		}
		return true
	}
	if o.Prefix == "" {
		o.Prefix = keyspace.DefaultPrefix
	}
	if strings.ContainsAny(o.Prefix, "{}") || len(o.Prefix) > maxPrefixLen {
		bad = append(bad, fmt.Sprintf("Prefix: must not contain '{' or '}' and be at most %d bytes", maxPrefixLen))
	}
	if len(o.Upstream) > maxPrefixLen {
		bad = append(bad, fmt.Sprintf("Upstream: longer than %d bytes", maxPrefixLen))
	}
	if len(o.UpstreamPolicy.Fallbacks) > 0 && o.Upstream == "" {
		bad = append(bad, "UpstreamPolicy.Fallbacks: needs Upstream (the first upstream)")
	}
	switch {
	case o.UpstreamPolicy.Off && o.Upstream != "":
		bad = append(bad, fmt.Sprintf("UpstreamPolicy.Off: set with Upstream %q (turn upstreams off, or name one)", o.Upstream))
	case o.Upstream == "" && !o.UpstreamPolicy.Off:
		o.Upstream = DefaultUpstream
	}
	seen := map[string]bool{o.Upstream: true}
	for i, f := range o.UpstreamPolicy.Fallbacks {
		switch {
		case f == "" || len(f) > maxPrefixLen:
			bad = append(bad, fmt.Sprintf("UpstreamPolicy.Fallbacks[%d]: must be 1 to %d bytes", i, maxPrefixLen))
		case seen[f]:
			bad = append(bad, fmt.Sprintf("UpstreamPolicy.Fallbacks[%d]: %q names an upstream twice", i, f))
		}
		seen[f] = true
	}
	o.UpstreamPolicy.Fallbacks = append([]string(nil), o.UpstreamPolicy.Fallbacks...)
	if dur("Lease", &o.Lease, 60*time.Second) && o.Lease < limits.MinLease {
		bad = append(bad, fmt.Sprintf("Lease: %v is too short to renew (minimum %v)", o.Lease, limits.MinLease))
	}
	okCooldown := dur("Cooldown", &o.Cooldown, 5*time.Minute)
	b := &o.Backoff
	okMax := dur("Backoff.Max", &b.Max, max(time.Hour, o.Cooldown))
	if okCooldown && okMax && b.Max < o.Cooldown {
		bad = append(bad, fmt.Sprintf("Backoff.Max: %v is below Cooldown %v", b.Max, o.Cooldown))
	}
	if b.Factor == 0 {
		b.Factor = 2
	} else if !(b.Factor >= 1) || b.Factor > 1e6 { // also rejects NaN
		bad = append(bad, fmt.Sprintf("Backoff.Factor: %v is outside [1, 1e6]", b.Factor))
	}
	switch {
	case b.Jitter == 0:
		b.Jitter = 0.1
	case !(b.Jitter < 1): // also rejects NaN
		bad = append(bad, fmt.Sprintf("Backoff.Jitter: %v is not below 1", b.Jitter))
	}
	if b.MaxAttempts == 0 {
		b.MaxAttempts = 8
	}
	dur("Retention.Attempts", &o.Retention.Attempts, 24*time.Hour)
	dur("Retention.Failed", &o.Retention.Failed, 7*24*time.Hour)
	dur("Retention.Done", &o.Retention.Done, 0)
	dur("Backoff.Canceled", &b.Canceled, 0)
	dur("Wait", &o.Wait, 0)
	if o.Classify == nil {
		o.Classify = classify.Default
	}
	r := &o.Redis
	dur("Redis.Timeout", &r.Timeout, 5*time.Second)
	if r.WaitReplicas < 0 {
		bad = append(bad, fmt.Sprintf("Redis.WaitReplicas: %d is negative", r.WaitReplicas))
	}
	dur("Redis.WaitTimeout", &r.WaitTimeout, 100*time.Millisecond)
	p := &o.UpstreamPolicy
	dur("UpstreamPolicy.FallbackCooldown", &p.FallbackCooldown, 0)
	dur("UpstreamPolicy.Cooldown", &p.Cooldown, 10*time.Second)
	if p.AllowedFails == 0 {
		p.AllowedFails = 3
	}
	dur("UpstreamPolicy.FailWindow", &p.FailWindow, time.Minute)
	dur("UpstreamPolicy.PauseTTL", &p.PauseTTL, 10*time.Minute)
	if p.PermanentWave == 0 {
		p.PermanentWave = 10
	}
	if p.UnreachableJobs == 0 {
		p.UnreachableJobs = 3
	}
	if len(bad) > 0 {
		return o, &optionsError{problems: bad}
	}
	return o, nil
}
