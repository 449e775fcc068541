package gate

import (
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/gate/internal/upstream"
)

// One row per arrow of the state diagram in doc.go: what a run's end
// writes to its job and to the upstream it used.
func TestDecide(t *testing.T) {
	o := &Options{
		Lease: time.Minute, Cooldown: 5 * time.Minute, Backoff: Backoff{MaxAttempts: 5, Canceled: 3 * time.Second, Max: time.Hour, Factor: 2, Jitter: -1},
		UpstreamPolicy: UpstreamPolicy{Cooldown: 10 * time.Second, PauseTTL: 10 * time.Minute, UnreachableJobs: 3, FallbackCooldown: 2 * time.Second},
		Retention:      Retention{Attempts: 24 * time.Hour, Failed: 7 * 24 * time.Hour},
	}
	const (
		keep = 24 * time.Hour
		week = 7 * 24 * time.Hour
	)
	var (
		transient   = classify.Verdict{Class: classify.ClassTransient, Reason: "timeout", Evidence: "go:timeout"}
		hinted      = classify.Verdict{Class: classify.ClassTransient, Reason: "timeout", RetryAfter: 20 * time.Minute}
		upstream5xx = classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonUpstream5xx}
		proof       = classify.Verdict{Class: classify.ClassPermanent, Reason: "context_length_exceeded", Evidence: "code:context_length_exceeded"}
		suspect     = classify.Verdict{Class: classify.ClassPermanent, Reason: "invalid_request", Evidence: "status:400", Suspect: true}
		rateLimited = classify.Verdict{Class: classify.ClassTransient, Reason: "rate_limited", ProviderWide: true}
		rateHint    = classify.Verdict{Class: classify.ClassTransient, Reason: "rate_limited", ProviderWide: true, RetryAfter: 30 * time.Second}
		tinyHint    = classify.Verdict{Class: classify.ClassTransient, Reason: "rate_limited", ProviderWide: true, RetryAfter: 5 * time.Millisecond}
		quota       = classify.Verdict{Class: classify.ClassSystemic, Reason: "quota_exhausted", ProviderWide: true}
		quotaHint   = classify.Verdict{Class: classify.ClassSystemic, Reason: "quota_exhausted", ProviderWide: true, RetryAfter: 20 * time.Minute}
		model       = classify.Verdict{Class: classify.ClassSystemic, Reason: "model_not_found"}
		// classify.Default's verdicts for a call that never reached the
		// upstream's address, and for one that broke mid-call.
		refused = classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonNetwork, Evidence: "go:refused"}
		noHost  = classify.Verdict{Class: classify.ClassSystemic, Reason: classify.ReasonNetwork, Evidence: "go:dns"}
		badCert = classify.Verdict{Class: classify.ClassSystemic, Reason: classify.ReasonTLS, Evidence: "go:tls"}
		reset   = classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonNetwork, Evidence: "go:network"}
	)
	twoFailures := store.Job{Kind: store.Cooling, Attempts: 2, Reason: "timeout"}
	suspectBefore := store.Job{Kind: store.Cooling, Attempts: 1, Suspect: true, Reason: "invalid_request", Evidence: "status:400"}

	for _, tc := range []struct {
		arrow    string
		in       decideIn
		job      jobWrite
		upstream upstream.Write
	}{
		// Running ──success──▶
		{"success: Ready (Retention.Done 0), the history gone", decideIn{out: outSuccess, hist: twoFailures},
			jobWrite{kind: store.Done, state: Ready}, upstream.Write{}},
		{"success of the probe: the upstream is ready", decideIn{out: outSuccess, upstream: true, probe: true},
			jobWrite{kind: store.Done, state: Ready}, upstream.Write{Op: upstream.Recover}},
		// ─transient, the job's─▶ CoolingDown, attempt counted
		{"transient, attempt 3: Cooldown·2²", decideIn{out: outFailure, v: transient, hist: twoFailures},
			jobWrite{kind: store.Cooling, ttl: 20 * time.Minute, keep: keep, state: CoolingDown, attempts: 3, reason: "timeout", evidence: "go:timeout"}, upstream.Write{}},
		{"transient with a longer hint: the hint", decideIn{out: outFailure, v: hinted},
			jobWrite{kind: store.Cooling, ttl: 20 * time.Minute, keep: keep, state: CoolingDown, attempts: 1, reason: "timeout"}, upstream.Write{}},
		{"transient, attempt 7: at most MaxCooldown", decideIn{out: outFailure, v: transient, hist: store.Job{Attempts: 3}},
			jobWrite{kind: store.Cooling, ttl: 40 * time.Minute, keep: keep, state: CoolingDown, attempts: 4, reason: "timeout", evidence: "go:timeout"}, upstream.Write{}},
		{"a 5xx counts in the upstream's window", decideIn{out: outFailure, v: upstream5xx, upstream: true},
			jobWrite{kind: store.Cooling, ttl: 5 * time.Minute, keep: keep, state: CoolingDown, attempts: 1, reason: upstream5xx.Reason},
			upstream.Write{Op: upstream.Count, Reason: upstream5xx.Reason, TTL: 10 * time.Second}},
		{"a 5xx of the probe makes the upstream ready (it answered)", decideIn{out: outFailure, v: upstream5xx, upstream: true, probe: true},
			jobWrite{kind: store.Cooling, ttl: 5 * time.Minute, keep: keep, state: CoolingDown, attempts: 1, reason: upstream5xx.Reason}, upstream.Write{Op: upstream.Recover}},
		// ─MaxAttempts reached─▶ Failed
		{"transient, MaxAttempts reached: Failed", decideIn{out: outFailure, v: transient, hist: store.Job{Attempts: 4}},
			jobWrite{kind: store.Failed, ttl: week, state: Failed, attempts: 5, reason: "timeout", evidence: "go:timeout"}, upstream.Write{}},
		// ─permanent, with proof─▶ Failed
		{"permanent with proof: Failed at once", decideIn{out: outFailure, v: proof, upstream: true},
			jobWrite{kind: store.Failed, ttl: week, state: Failed, attempts: 1, reason: proof.Reason, evidence: proof.Evidence}, upstream.Write{}},
		// ─permanent, suspect, first─▶ CoolingDown, attempt counted
		{"suspect, first seen: cools, counted, remembered as suspect", decideIn{out: outFailure, v: suspect, upstream: true},
			jobWrite{kind: store.Cooling, ttl: 5 * time.Minute, keep: keep, state: CoolingDown, attempts: 1, suspect: true,
				reason: suspect.Reason, evidence: suspect.Evidence}, upstream.Write{}},
		{"suspect after another failure: still first seen", decideIn{out: outFailure, v: suspect, hist: twoFailures},
			jobWrite{kind: store.Cooling, ttl: 20 * time.Minute, keep: keep, state: CoolingDown, attempts: 3, suspect: true,
				reason: suspect.Reason, evidence: suspect.Evidence}, upstream.Write{}},
		{"suspect after another suspect (other evidence): still first seen",
			decideIn{out: outFailure, v: suspect, hist: store.Job{Attempts: 1, Suspect: true, Reason: "invalid_request", Evidence: "status:422"}},
			jobWrite{kind: store.Cooling, ttl: 10 * time.Minute, keep: keep, state: CoolingDown, attempts: 2, suspect: true,
				reason: suspect.Reason, evidence: suspect.Evidence}, upstream.Write{}},
		{"suspect, MaxAttempts reached: Failed", decideIn{out: outFailure, v: suspect, hist: store.Job{Attempts: 4}},
			jobWrite{kind: store.Failed, ttl: week, state: Failed, attempts: 5, reason: suspect.Reason, evidence: suspect.Evidence}, upstream.Write{}},
		// ─permanent, suspect, again─▶ Failed
		{"suspect confirmed by the next attempt: Failed", decideIn{out: outFailure, v: suspect, hist: suspectBefore},
			jobWrite{kind: store.Failed, ttl: week, state: Failed, attempts: 2, reason: suspect.Reason, evidence: suspect.Evidence}, upstream.Write{}},
		// ─permanent, a wave upstream─▶ CoolingDown, no attempt; the upstream pauses
		{"proof in a wave: cools, not counted, the upstream paused", decideIn{out: outFailure, v: proof, upstream: true, wave: true, hist: twoFailures},
			jobWrite{kind: store.Cooling, ttl: 5 * time.Minute, keep: keep, state: CoolingDown, attempts: 2, reason: proof.Reason, evidence: proof.Evidence},
			upstream.Write{Op: upstream.Suspend, Reason: proof.Reason, TTL: 10 * time.Minute}},
		{"suspect confirmed, but in a wave: cools", decideIn{out: outFailure, v: suspect, upstream: true, wave: true, hist: suspectBefore},
			jobWrite{kind: store.Cooling, ttl: 5 * time.Minute, keep: keep, state: CoolingDown, attempts: 1, reason: suspect.Reason, evidence: suspect.Evidence},
			upstream.Write{Op: upstream.Suspend, Reason: suspect.Reason, TTL: 10 * time.Minute}},
		// ─provider-wide, transient─▶
		{"rate limit, no hint: the upstream's cooldown, not counted", decideIn{out: outFailure, v: rateLimited, upstream: true, hist: twoFailures},
			jobWrite{kind: store.Cooling, ttl: 10 * time.Second, keep: keep, state: CoolingDown, attempts: 2, reason: "rate_limited"},
			upstream.Write{Op: upstream.Throttle, Reason: "rate_limited", TTL: 10 * time.Second}},
		{"rate limit with a hint: the hint for both", decideIn{out: outFailure, v: rateHint, upstream: true},
			jobWrite{kind: store.Cooling, ttl: 30 * time.Second, keep: keep, state: CoolingDown, reason: "rate_limited"},
			upstream.Write{Op: upstream.Throttle, Reason: "rate_limited", TTL: 30 * time.Second}},
		{"a hint of 5 ms: the job waits a second", decideIn{out: outFailure, v: tinyHint, upstream: true},
			jobWrite{kind: store.Cooling, ttl: time.Second, keep: keep, state: CoolingDown, reason: "rate_limited"},
			upstream.Write{Op: upstream.Throttle, Reason: "rate_limited", TTL: 5 * time.Millisecond}},
		{"rate limit whose responses said one call fits in 1.5 s: that for both, not the hint (a full refill)", decideIn{out: outFailure, v: rateHint, upstream: true, fits: 1500 * time.Millisecond},
			jobWrite{kind: store.Cooling, ttl: 1500 * time.Millisecond, keep: keep, state: CoolingDown, reason: "rate_limited"},
			upstream.Write{Op: upstream.Throttle, Reason: "rate_limited", TTL: 1500 * time.Millisecond}},
		{"rate limit without a Upstream: Cooldown, no upstream", decideIn{out: outFailure, v: rateLimited},
			jobWrite{kind: store.Cooling, ttl: 5 * time.Minute, keep: keep, state: CoolingDown, reason: "rate_limited"}, upstream.Write{}},
		{"the probe rate-limited again, level 2: escalates ×2²", decideIn{out: outFailure, v: rateLimited, upstream: true, probe: true, level: 2},
			jobWrite{kind: store.Cooling, ttl: 10 * time.Second, keep: keep, state: CoolingDown, reason: "rate_limited"},
			upstream.Write{Op: upstream.Throttle, Reason: "rate_limited", TTL: 40 * time.Second}},
		// ─provider-wide, systemic─▶
		{"quota: the upstream pauses for its Cooldown first, and the job with it", decideIn{out: outFailure, v: quota, upstream: true, hist: twoFailures},
			jobWrite{kind: store.Cooling, ttl: 10 * time.Second, keep: keep, state: CoolingDown, attempts: 2, reason: "quota_exhausted"},
			upstream.Write{Op: upstream.Suspend, Reason: "quota_exhausted", TTL: 10 * time.Second}},
		{"the probe finds quota again, level 2: the pause ×2²", decideIn{out: outFailure, v: quota, upstream: true, probe: true, level: 2},
			jobWrite{kind: store.Cooling, ttl: 40 * time.Second, keep: keep, state: CoolingDown, reason: "quota_exhausted"},
			upstream.Write{Op: upstream.Suspend, Reason: "quota_exhausted", TTL: 40 * time.Second}},
		{"the probe finds quota again, level 9: at most PauseTTL", decideIn{out: outFailure, v: quota, upstream: true, probe: true, level: 9},
			jobWrite{kind: store.Cooling, ttl: 10 * time.Minute, keep: keep, state: CoolingDown, reason: "quota_exhausted"},
			upstream.Write{Op: upstream.Suspend, Reason: "quota_exhausted", TTL: 10 * time.Minute}},
		{"quota with a longer hint: the hint", decideIn{out: outFailure, v: quotaHint, upstream: true},
			jobWrite{kind: store.Cooling, ttl: 20 * time.Minute, keep: keep, state: CoolingDown, reason: "quota_exhausted"},
			upstream.Write{Op: upstream.Suspend, Reason: "quota_exhausted", TTL: 20 * time.Minute}},
		{"quota without an Upstream: Cooldown, no upstream", decideIn{out: outFailure, v: quota, hist: twoFailures},
			jobWrite{kind: store.Cooling, ttl: 5 * time.Minute, keep: keep, state: CoolingDown, attempts: 2, reason: "quota_exhausted"}, upstream.Write{}},
		// with Fallbacks: FallbackCooldown
		{"rate limit with Fallbacks: FallbackCooldown", decideIn{out: outFailure, v: rateHint, upstream: true, fallback: true},
			jobWrite{kind: store.Cooling, ttl: 2 * time.Second, keep: keep, state: CoolingDown, reason: "rate_limited"},
			upstream.Write{Op: upstream.Throttle, Reason: "rate_limited", TTL: 30 * time.Second}},
		{"quota with Fallbacks: FallbackCooldown", decideIn{out: outFailure, v: quota, upstream: true, fallback: true},
			jobWrite{kind: store.Cooling, ttl: 2 * time.Second, keep: keep, state: CoolingDown, reason: "quota_exhausted"},
			upstream.Write{Op: upstream.Suspend, Reason: "quota_exhausted", TTL: 10 * time.Second}},
		// ─systemic, the job's─▶
		{"model not found: cools Cooldown, not counted, upstream untouched", decideIn{out: outFailure, v: model, upstream: true, hist: twoFailures},
			jobWrite{kind: store.Cooling, ttl: 5 * time.Minute, keep: keep, state: CoolingDown, attempts: 2, reason: "model_not_found"}, upstream.Write{}},
		// Ready ──UnreachableJobs distinct jobs that cannot reach its address──▶ Cooling
		{"refused connection: the job's attempt, one more job in the upstream's window", decideIn{out: outFailure, v: refused, upstream: true},
			jobWrite{kind: store.Cooling, ttl: 5 * time.Minute, keep: keep, state: CoolingDown, attempts: 1, reason: "network", evidence: "go:refused"},
			upstream.Write{Op: upstream.Unreached, Reason: "network", TTL: 10 * time.Second}},
		{"host not found: the job cools uncounted, one more job in the window", decideIn{out: outFailure, v: noHost, upstream: true, hist: twoFailures},
			jobWrite{kind: store.Cooling, ttl: 5 * time.Minute, keep: keep, state: CoolingDown, attempts: 2, reason: "network", evidence: "go:dns"},
			upstream.Write{Op: upstream.Unreached, Reason: "network", TTL: 10 * time.Second}},
		{"TLS verification failed: one more job in the window", decideIn{out: outFailure, v: badCert, upstream: true},
			jobWrite{kind: store.Cooling, ttl: 5 * time.Minute, keep: keep, state: CoolingDown, reason: "tls", evidence: "go:tls"},
			upstream.Write{Op: upstream.Unreached, Reason: "tls", TTL: 10 * time.Second}},
		{"the probe cannot reach it either, level 2: cools ×2²", decideIn{out: outFailure, v: refused, upstream: true, probe: true, level: 2},
			jobWrite{kind: store.Cooling, ttl: 5 * time.Minute, keep: keep, state: CoolingDown, attempts: 1, reason: "network", evidence: "go:refused"},
			upstream.Write{Op: upstream.Throttle, Reason: "network", TTL: 40 * time.Second}},
		{"a connection that broke mid-call reached it: upstream untouched", decideIn{out: outFailure, v: reset, upstream: true},
			jobWrite{kind: store.Cooling, ttl: 5 * time.Minute, keep: keep, state: CoolingDown, attempts: 1, reason: "network", evidence: "go:network"}, upstream.Write{}},
		{"refused without an Upstream: the job's failure only", decideIn{out: outFailure, v: refused},
			jobWrite{kind: store.Cooling, ttl: 5 * time.Minute, keep: keep, state: CoolingDown, attempts: 1, reason: "network", evidence: "go:refused"}, upstream.Write{}},
		// ─released─▶ Ready, attempts kept
		{"released: Ready, history kept", decideIn{out: outRelease, hist: twoFailures},
			jobWrite{kind: store.Cooling, keep: keep, state: Ready, attempts: 2, reason: "timeout"}, upstream.Write{}},
		{"released, no history: the key goes", decideIn{out: outRelease},
			jobWrite{kind: store.Cooling, state: Ready}, upstream.Write{}},
		{"the probe released: the next call probes", decideIn{out: outRelease, upstream: true, probe: true},
			jobWrite{kind: store.Cooling, state: Ready}, upstream.Write{Op: upstream.Unclaim}},
		// ─caller cancelled─▶
		{"cancelled with Backoff.Canceled: cools, not counted", decideIn{out: outCanceled, hist: twoFailures},
			jobWrite{kind: store.Cooling, ttl: 3 * time.Second, keep: keep, state: CoolingDown, attempts: 2, reason: classify.ReasonCanceled}, upstream.Write{}},
		{"the probe cancelled: the next call probes", decideIn{out: outCanceled, upstream: true, probe: true},
			jobWrite{kind: store.Cooling, ttl: 3 * time.Second, keep: keep, state: CoolingDown, reason: classify.ReasonCanceled}, upstream.Write{Op: upstream.Unclaim}},
	} {
		t.Run(tc.arrow, func(t *testing.T) {
			got := o.decide(tc.in)
			if got.job != tc.job {
				t.Errorf("job:\n got %+v\nwant %+v", got.job, tc.job)
			}
			if got.upstream != tc.upstream {
				t.Errorf("upstream:\n got %+v\nwant %+v", got.upstream, tc.upstream)
			}
		})
	}

	// UnreachableJobs negative: an address failure is the job's alone.
	o.UpstreamPolicy.UnreachableJobs = -1
	if got := o.decide(decideIn{out: outFailure, v: refused, upstream: true}).upstream; got != (upstream.Write{}) {
		t.Errorf("refused with UnreachableJobs off: upstream %+v, want untouched", got)
	}
	// Retention.Done keeps a success Done.
	o.Retention.Done = time.Hour
	if got := o.decide(decideIn{out: outSuccess, hist: twoFailures}).job; got != (jobWrite{kind: store.Done, ttl: time.Hour, state: Done}) {
		t.Errorf("success with Retention.Done: %+v, want Done for Retention.Done", got)
	}
	// FallbackCooldown 0 (the default): Ready at once, the failure kept.
	o.UpstreamPolicy.FallbackCooldown = 0
	if got := o.decide(decideIn{out: outFailure, v: rateLimited, upstream: true, fallback: true, hist: twoFailures}).job; got !=
		(jobWrite{kind: store.Cooling, keep: keep, state: Ready, attempts: 2, reason: "rate_limited"}) {
		t.Errorf("rate limit with Fallbacks, FallbackCooldown 0: %+v, want Ready with the failure kept", got)
	}
	// Without Backoff.Canceled a cancelled run leaves the job Ready.
	o.Backoff.Canceled = 0
	if got := o.decide(decideIn{out: outCanceled, hist: twoFailures}).job; got.state != Ready || got.ttl != 0 || got.attempts != 2 {
		t.Errorf("cancelled without Backoff.Canceled: %+v, want Ready with its history", got)
	}
}

// A wait the run's budget explains, shorter than minProviderWait
// ("Please try again in 15ms": when a call of that size fits), is the
// job's own and the budget's: the upstream does not cool for it (issue
// 37.3). A longer one, a probe's, and a quota's still cool or pause the
// upstream.
func TestDecideShortWaitIsTheJobs(t *testing.T) {
	o := &Options{
		Lease: time.Minute, Cooldown: 5 * time.Minute,
		UpstreamPolicy: UpstreamPolicy{Cooldown: 10 * time.Second, PauseTTL: 10 * time.Minute},
		Backoff:        Backoff{MaxAttempts: 5, Max: time.Hour, Factor: 2, Jitter: -1},
		Retention:      Retention{Attempts: 24 * time.Hour, Failed: 7 * 24 * time.Hour},
	}
	// https://github.com/binary-husky/gpt_academic/issues/1213's 429 said
	// "Please try again in 6ms"; the verdict's hint is the reset header's.
	rate := classify.Verdict{Class: classify.ClassTransient, Reason: "rate_limited", ProviderWide: true, RetryAfter: time.Minute}
	quota := classify.Verdict{Class: classify.ClassSystemic, Reason: "quota_exhausted", ProviderWide: true}
	for _, tc := range []struct {
		name     string
		in       decideIn
		fits     time.Duration // the budget's short wait
		jobTTL   time.Duration
		upstream upstream.Op
	}{
		{"15 ms: the job's and the budget's", decideIn{out: outFailure, v: rate, upstream: true, fits: 15 * time.Millisecond},
			15 * time.Millisecond, 15 * time.Millisecond, upstream.Keep},
		{"999 ms: still the job's", decideIn{out: outFailure, v: rate, upstream: true, fits: 999 * time.Millisecond},
			999 * time.Millisecond, 999 * time.Millisecond, upstream.Keep},
		{"a second: the upstream's", decideIn{out: outFailure, v: rate, upstream: true, fits: time.Second},
			0, time.Second, upstream.Throttle},
		{"the probe's 15 ms: the upstream's (its probe answered for all)", decideIn{out: outFailure, v: rate, upstream: true, probe: true, fits: 15 * time.Millisecond},
			0, 15 * time.Millisecond, upstream.Throttle},
		{"quota: the upstream pauses", decideIn{out: outFailure, v: quota, upstream: true, fits: 15 * time.Millisecond},
			0, 10 * time.Second, upstream.Suspend},
		{"no upstream: nothing to write to", decideIn{out: outFailure, v: rate, fits: 15 * time.Millisecond},
			0, 15 * time.Millisecond, upstream.Keep},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := o.decide(tc.in)
			if d.fits != tc.fits || d.job.ttl != tc.jobTTL || d.upstream.Op != tc.upstream {
				t.Fatalf("decide: fits %v, job %v, upstream %+v; want fits %v, job %v, upstream op %v", d.fits, d.job.ttl, d.upstream, tc.fits, tc.jobTTL, tc.upstream)
			}
		})
	}
}
