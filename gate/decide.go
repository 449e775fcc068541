package gate

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/gate/internal/upstream"
)

// decide is the gate's one decision: what a run's end writes to its job
// and to the upstream it used. Its rows are the state diagram of the
// package doc. decide_test.go holds one test row per arrow.

// outcome is how a run ended.
type outcome uint8

const (
	outSuccess  outcome = iota + 1
	outRelease          // Release: no cooldown, no attempt counted
	outCanceled         // the caller's context ended while fn ran
	outFailure          // fn failed: the verdict says how
)

// decideIn is what decide knows.
type decideIn struct {
	out outcome
	v   classify.Verdict // outFailure
	// hist is the job's last settled value, which the run's acquire took
	// over. It holds the attempt count and the last failure.
	hist store.Job
	// upstream: the run used an upstream (Options.Upstream or Fallbacks).
	upstream bool
	// probe: the run probes its upstream after a cooldown or pause. level
	// is the stops in a row before it.
	probe bool
	level int
	// wave: a permanent failure is part of a wave of its reason in the
	// upstream (UpstreamPolicy.PermanentWave). Or the upstream is paused
	// for that reason already.
	wave bool
	// fallback: the gate has another upstream for the job's next call.
	fallback bool
	// fits is, for a provider-wide failure, the wait until one more call
	// fits, as the run's responses said (Lease.budgetWait). It is 0 when
	// they did not say. It replaces the verdict's hint for the upstream
	// and for the job. That hint may be the time until the limit is whole.
	// The upstream's budget then judges the job's retry.
	fits time.Duration
}

// jobWrite is what a run's end writes to its job (job_settle.lua).
type jobWrite struct {
	kind store.Kind    // store.Cooling, store.Failed, store.Done
	ttl  time.Duration // how long the state lasts
	keep time.Duration // how much longer the key keeps the attempt count
	// state, attempts, suspect, reason and evidence are the value's
	// content. The settle reports them.
	state            State
	attempts         int
	suspect          bool
	reason, evidence string
}

// decision is decide's answer.
type decision struct {
	job      jobWrite
	upstream upstream.Write
	// fits is a short wait the run's responses gave for one call of its
	// size, after a provider-wide transient failure. It is the job's own.
	// It is written to the upstream's budget. The budget refuses calls of
	// that size until then, and gives each its own turn. The upstream does
	// not cool for it.
	fits time.Duration
}

// minProviderWait is the shortest cooldown a provider's hint sets. So a
// hint of a few milliseconds is not an immediate free retry. The run's
// budget may explain a shorter wait (decideIn.fits). That wait is one
// call's, not the upstream's. "Please try again in 15ms" says when a
// request of that size fits.
const minProviderWait = time.Second

func (o *Options) decide(in decideIn) decision {
	h := in.hist
	// A run that ends without a failure keeps the job's history as it was.
	keepHist := jobWrite{kind: store.Cooling, state: Ready, attempts: h.Attempts,
		suspect: h.Suspect, reason: h.Reason, evidence: h.Evidence}
	if h.Attempts > 0 || h.Reason != "" {
		keepHist.keep = o.Retention.Attempts
	}
	var d decision
	if in.probe {
		d.upstream.Op = upstream.Recover // the upstream answered, unless a row says otherwise
	}
	switch in.out {
	case outSuccess:
		d.job = jobWrite{kind: store.Done, ttl: o.Retention.Done, state: Ready}
		if o.Retention.Done > 0 {
			d.job.state = Done
		}
		return d
	case outRelease:
		d.job = keepHist
		d.upstream = unclaimIfProbe(in)
		return d
	case outCanceled:
		d.upstream = unclaimIfProbe(in)
		if o.Backoff.Canceled <= 0 {
			d.job = keepHist
			return d
		}
		d.job = o.cooling(h.Attempts, o.Backoff.Canceled, classify.ReasonCanceled, "")
		return d
	}

	v := in.v
	switch {
	case v.ProviderWide && (v.Class == classify.ClassTransient || v.Class == classify.ClassSystemic):
		// The provider's or the key's limits, not the job. No attempt is
		// counted, and the job is never Failed.
		if in.fits > 0 && v.Class == classify.ClassTransient {
			v.RetryAfter = in.fits
		}
		d.upstream = upstream.Write{Op: upstream.Throttle, Reason: v.Reason, TTL: o.upstreamCooldown(v.RetryAfter, in)}
		wait := o.Cooldown
		if in.upstream {
			wait = o.UpstreamPolicy.Cooldown
		}
		switch {
		case in.fits > 0 && v.Class == classify.ClassTransient:
			// The budget judges the retry: it runs when one call fits.
			wait = in.fits
		case v.RetryAfter > 0:
			wait = max(v.RetryAfter, minProviderWait)
		}
		if v.Class == classify.ClassSystemic {
			// The pause starts short. It grows with each probe that finds
			// the same answer. So an ambiguous "quota" costs seconds. A
			// billing lapse settles into PauseTTL, with one probe each.
			pause := o.upstreamPause(v.RetryAfter, in)
			d.upstream = upstream.Write{Op: upstream.Suspend, Reason: v.Reason, TTL: pause}
			wait = max(v.RetryAfter, o.Cooldown)
			if in.upstream {
				wait = pause
			}
		}
		if in.fits > 0 && in.fits < minProviderWait && v.Class == classify.ClassTransient && !in.probe {
			// The refused call's own wait. The budget gives the others
			// their turns. No one comes back at the wait's end with it.
			d.upstream, d.fits = upstream.Write{}, in.fits
		}
		if !in.upstream {
			d.upstream, d.fits = upstream.Write{}, 0
		}
		d.job = o.cooling(h.Attempts, wait, v.Reason, v.Evidence)
		if in.fallback {
			// The next call runs on the next ready upstream: no wait, or
			// UpstreamPolicy.FallbackCooldown.
			d.job = o.cooling(h.Attempts, o.UpstreamPolicy.FallbackCooldown, v.Reason, v.Evidence)
			if o.UpstreamPolicy.FallbackCooldown <= 0 {
				d.job.ttl, d.job.state = 0, Ready
			}
		}
	case v.Class == classify.ClassSystemic:
		// The job's own request cannot run until an operator acts (a
		// model it names, a permission). Cool it, count nothing.
		d.job = o.cooling(h.Attempts, max(v.RetryAfter, o.Cooldown), v.Reason, v.Evidence)
	case v.Class == classify.ClassPermanent && in.wave:
		// Many jobs rejected for one reason: not theirs. Pause the
		// upstream for it. Cool the job, count nothing.
		d.job = o.cooling(h.Attempts, max(v.RetryAfter, o.Cooldown), v.Reason, v.Evidence)
		d.upstream = upstream.Write{Op: upstream.Suspend, Reason: v.Reason, TTL: o.UpstreamPolicy.PauseTTL}
	case v.Class == classify.ClassPermanent && (!v.Suspect || confirmed(h, v)):
		d.job = o.failed(h.Attempts+1, v)
	case v.Class == classify.ClassPermanent:
		// A suspect rejection, first seen: cool with the attempt counted.
		// The same rejection on the next attempt confirms it.
		d.job = o.counted(h.Attempts+1, v)
		d.job.suspect = d.job.state == CoolingDown
	default: // transient, the job's
		d.job = o.counted(h.Attempts+1, v)
		if !in.probe && v.Reason == classify.ReasonUpstream5xx && in.upstream {
			d.upstream = upstream.Write{Op: upstream.Count, Reason: v.Reason, TTL: o.UpstreamPolicy.Cooldown}
		}
	}
	if in.upstream && !v.ProviderWide && addressFailed(v.Evidence) && o.UpstreamPolicy.UnreachableJobs > 0 {
		// The upstream's address failed, not the job. After a few
		// distinct jobs the upstream cools. A probe that cannot reach it
		// either cools it one level up. The job's own write stays.
		d.upstream = upstream.Write{Op: upstream.Unreached, Reason: v.Reason, TTL: o.upstreamCooldown(0, in)}
		if in.probe {
			d.upstream.Op = upstream.Throttle
		}
	}
	return d
}

// addressFailed reports classify's evidence of a call that never reached
// the upstream's address. Its host does not resolve, refuses connections
// or is unreachable. Or its certificate fails verification, or its URL is
// malformed. A connection that broke mid-call (go:network, go:timeout)
// reached it.
func addressFailed(evidence string) bool {
	switch evidence {
	case "go:dns", "go:refused", "go:unreachable", "go:tls", "go:url":
		return true
	}
	return false
}

// confirmed reports whether a suspect rejection repeats the job's last
// failure. That failure has the same reason and evidence, and was itself
// a suspect rejection.
func confirmed(h store.Job, v classify.Verdict) bool {
	return h.Suspect && h.Reason == v.Reason && h.Evidence == v.Evidence
}

func unclaimIfProbe(in decideIn) upstream.Write {
	if in.probe {
		return upstream.Write{Op: upstream.Unclaim}
	}
	return upstream.Write{}
}

// cooling is a cooldown that counts no attempt.
func (o *Options) cooling(attempts int, wait time.Duration, reason, evidence string) jobWrite {
	return jobWrite{kind: store.Cooling, ttl: o.capWait(wait), keep: o.Retention.Attempts, state: CoolingDown,
		attempts: attempts, reason: reason, evidence: evidence}
}

// counted is a failure that counts an attempt. It is a cooldown that
// escalates with the attempts, or the server's hint when longer. Once the
// attempts reach MaxAttempts, it is Failed.
func (o *Options) counted(attempts int, v classify.Verdict) jobWrite {
	if m := o.Backoff.MaxAttempts; m > 0 && attempts >= m {
		return o.failed(attempts, v)
	}
	return jobWrite{kind: store.Cooling, ttl: o.capWait(max(v.RetryAfter, o.backoff(attempts))), keep: o.Retention.Attempts,
		state: CoolingDown, attempts: attempts, reason: v.Reason, evidence: v.Evidence}
}

func (o *Options) failed(attempts int, v classify.Verdict) jobWrite {
	return jobWrite{kind: store.Failed, ttl: o.Retention.Failed, state: Failed, attempts: attempts,
		reason: v.Reason, evidence: v.Evidence}
}

// capWait bounds a cooldown: at most Backoff.Max, at least a millisecond.
func (o *Options) capWait(d time.Duration) time.Duration {
	return max(min(d, o.Backoff.Max), time.Millisecond)
}

// upstreamCooldown is how long a provider-wide transient failure cools the
// upstream. It is the provider's hint. Without one, it is
// UpstreamPolicy.Cooldown, × Backoff.Factor per failed probe in a row.
// It is at most Backoff.Max.
func (o *Options) upstreamCooldown(hint time.Duration, in decideIn) time.Duration {
	if hint > 0 {
		return o.capWait(hint)
	}
	d := float64(o.UpstreamPolicy.Cooldown)
	if in.probe {
		d *= math.Pow(o.Backoff.Factor, float64(in.level))
	}
	return o.capWait(time.Duration(min(d, float64(o.Backoff.Max))))
}

// upstreamPause is how long a provider-wide systemic failure pauses the
// upstream. It is UpstreamPolicy.Cooldown, multiplied by Backoff.Factor
// per failed probe in a row, up to PauseTTL. The provider's hint wins
// when longer. It is at most Backoff.Max.
func (o *Options) upstreamPause(hint time.Duration, in decideIn) time.Duration {
	p := o.UpstreamPolicy
	d := float64(p.Cooldown)
	if in.probe {
		d *= math.Pow(o.Backoff.Factor, float64(in.level))
	}
	return o.capWait(max(time.Duration(min(d, float64(p.PauseTTL))), hint))
}

// backoff is the cooldown of the n-th counted failure in a row. It is
// Cooldown × Backoff.Factor^(n-1), spread by ± Backoff.Jitter. It is at
// most Backoff.Max.
func (o *Options) backoff(n int) time.Duration {
	d := float64(o.Cooldown) * math.Pow(o.Backoff.Factor, float64(n-1))
	if o.Backoff.Jitter > 0 {
		d *= 1 + o.Backoff.Jitter*(2*rand.Float64()-1)
	}
	if d >= float64(o.Backoff.Max) {
		return o.Backoff.Max
	}
	return time.Duration(d)
}

// settlement is what the store writes for w.
func (w jobWrite) settlement() store.Settlement {
	return store.Settlement{Kind: w.kind, TTL: w.ttl, Keep: w.keep, Attempts: w.attempts,
		Suspect: w.suspect, Reason: w.reason, Evidence: w.evidence}
}

// refusal is the refusal w stands for while it lasts. It serves the
// process that ran the job when Redis did not take w (unwritten).
func (w jobWrite) refusal(job string) BlockedError {
	return BlockedError{Job: job, State: w.state, Attempts: w.attempts, Reason: w.reason, Evidence: w.evidence, local: true}
}
