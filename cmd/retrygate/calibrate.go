package main

import (
	"context"
	"fmt"
	"github.com/retrygate/retrygate/internal/limits"
	"strings"
	"time"
)

// calibration is the lease arithmetic:
//
//	TTL      = p99 + jitter + guard  (a p99 call finishes within one lease
//	                                  even if every renewal fails)
//	renew    = TTL / 3               (the gate's renewal period)
//	takeover ≤ TTL + detect          (a process that crashes right after a
//	                                  renewal keeps the lock for TTL; a waiting
//	                                  retry then notices up to detect later)
type calibration struct {
	P99, Jitter, Guard, Detect, SLO time.Duration

	TTL, Renew, Takeover time.Duration
	Raised               bool // TTL raised to limits.MinLease
}

func calibrate(p99, jitter, guard, detect, slo time.Duration) calibration {
	c := calibration{P99: p99, Jitter: jitter, Guard: guard, Detect: detect, SLO: slo}
	c.TTL = p99 + jitter + guard
	if c.TTL < limits.MinLease {
		c.TTL, c.Raised = limits.MinLease, true
	}
	c.Renew = c.TTL / 3
	c.Takeover = c.TTL + detect
	return c
}

func (c calibration) met() bool { return c.SLO == 0 || c.Takeover <= c.SLO }

// optDuration is a duration flag that may be left unset: its usage shows
// no default, where a sentinel value would print as "default -1ns".
type optDuration struct {
	d   time.Duration
	set bool
}

func (o *optDuration) String() string {
	if o == nil || !o.set {
		return ""
	}
	return o.d.String()
}

func (o *optDuration) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	o.d, o.set = d, true
	return nil
}

// Bounds of calibrate's inputs: a call that holds a lease longer than an
// hour is out of what the lease arithmetic (and gateprom's default
// retrygate_lock_held_seconds buckets, which end at 10 min) is for; a
// larger value is most likely a unit typo (18h for 18s).
const (
	maxCallDuration = time.Hour
	maxTakeoverSLO  = 24 * time.Hour
)

// checkCalibration names every input out of its bounds, in one error.
func checkCalibration(p99, jitter, guard time.Duration, detect optDuration, slo time.Duration) error {
	var bad []string
	switch {
	case p99 == 0:
		bad = append(bad, "--p99 is required (read it from retrygate_lock_held_seconds, e.g. --p99 18s)")
	case p99 < 0:
		bad = append(bad, fmt.Sprintf("--p99 %s is negative: a call's duration is positive", shortDur(p99)))
	case p99 > maxCallDuration:
		bad = append(bad, fmt.Sprintf("--p99 %s is over %s: is the unit right? (retrygate_lock_held_seconds is in seconds)", shortDur(p99), shortDur(maxCallDuration)))
	}
	for _, f := range []struct {
		name string
		d    time.Duration
		max  time.Duration
	}{{"jitter", jitter, maxCallDuration}, {"guard", guard, maxCallDuration}, {"detect", detect.d, maxCallDuration},
		{"takeover-slo", slo, maxTakeoverSLO}} {
		switch {
		case f.d < 0:
			bad = append(bad, fmt.Sprintf("--%s %s is negative", f.name, shortDur(f.d)))
		case f.d > f.max:
			bad = append(bad, fmt.Sprintf("--%s %s is over %s: is the unit right?", f.name, shortDur(f.d), shortDur(f.max)))
		}
	}
	if len(bad) > 0 {
		return usageErrorf("%s", strings.Join(bad, "; "))
	}
	return nil
}

func calibrateCommand() *command {
	var p99, jitter, guard, slo time.Duration
	var detect optDuration
	return &command{
		name: "calibrate",
		summary: "compute the lease TTL, renew interval and crash takeover bound from the p99 of " +
			"retrygate_lock_held_seconds (exit 3 when --takeover-slo cannot be met)",
		flags: func(fs *flagSet) {
			durationVar(fs, &p99, "p99", 0, "99th percentile of how long calls hold the lock, a duration `D` such as 18s (required; at most 1h)")
			durationVar(fs, &jitter, "jitter", 0, "extra spread on top of p99 (GC pauses, network, clock drift), a duration `D`")
			durationVar(fs, &guard, "guard", 2*time.Second, "safety margin, a duration `D`")
			fs.Var(&detect, "detect", "how late a waiting retry notices the lock expired (its poll interval or retry jitter), a duration `D`; default: --jitter")
			durationVar(fs, &slo, "takeover-slo", 0, "longest acceptable time before another process takes over a crashed owner's job, a duration `D`; 0 = none")
		},
		run: func(ctx context.Context, c *cli, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q", echo(args[0]))
			}
			if err := checkCalibration(p99, jitter, guard, detect, slo); err != nil {
				return err
			}
			d := jitter
			if detect.set {
				d = detect.d
			}
			return printCalibration(c, calibrate(p99, jitter, guard, d, slo))
		},
	}
}

type calibrationJSON struct {
	LeaseTTLMs      int64  `json:"lease_ttl_ms"`
	LeaseTTL        string `json:"lease_ttl"`
	RenewEveryMs    int64  `json:"renew_every_ms"`
	TakeoverBoundMs int64  `json:"takeover_bound_ms"`
	P99Ms           int64  `json:"p99_ms"`
	JitterMs        int64  `json:"jitter_ms"`
	GuardMs         int64  `json:"guard_ms"`
	DetectMs        int64  `json:"detect_ms"`
	TakeoverSLOMs   int64  `json:"takeover_slo_ms,omitempty"`
	SLOMet          *bool  `json:"slo_met,omitempty"`
	Warning         string `json:"warning,omitempty"`
}

func printCalibration(c *cli, k calibration) error {
	warning := ""
	if !k.met() {
		maxTTL := k.SLO - k.Detect
		warning = fmt.Sprintf("takeover bound %v exceeds --takeover-slo %v: a lease that covers p99 calls cannot be taken over in time; "+
			"shorten the calls, relax the SLO, or set Lease ≤ %v and rely on renewal (calls longer than the lease then fail only when Redis is unreachable for a whole lease)",
			k.Takeover, k.SLO, max(maxTTL, 0))
	}
	if c.json {
		j := calibrationJSON{LeaseTTLMs: ms(k.TTL), LeaseTTL: k.TTL.String(), RenewEveryMs: ms(k.Renew),
			TakeoverBoundMs: ms(k.Takeover), P99Ms: ms(k.P99), JitterMs: ms(k.Jitter), GuardMs: ms(k.Guard),
			DetectMs: ms(k.Detect), TakeoverSLOMs: ms(k.SLO), Warning: warning}
		if k.SLO > 0 {
			met := k.met()
			j.SLOMet = &met
		}
		if err := writeJSON(c.stdout, j); err != nil {
			return err
		}
	} else {
		tw := table(c.stdout)
		ttlWhy := fmt.Sprintf("= p99 %v + jitter %v + guard %v", k.P99, k.Jitter, k.Guard)
		if k.Raised {
			ttlWhy += fmt.Sprintf(", raised to the minimum %v", limits.MinLease)
		}
		row(tw, "lease TTL", k.TTL, ttlWhy+"  → gate.Options.Lease")
		row(tw, "renew every", roundDur(k.Renew), "= TTL/3 (the gate renews on its own)")
		row(tw, "crash takeover", "≤ "+k.Takeover.String(), fmt.Sprintf("= TTL %v + detection %v (owner crashed right after a renewal)", k.TTL, k.Detect))
		if k.SLO > 0 {
			verdict := fmt.Sprintf("met, %v to spare", k.SLO-k.Takeover)
			if !k.met() {
				verdict = fmt.Sprintf("NOT met, %v over", k.Takeover-k.SLO)
			}
			row(tw, "takeover SLO", k.SLO, verdict)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if warning != "" {
		return &exitError{code: exitNotMet, msg: warning}
	}
	return nil
}

// roundDur rounds a computed duration for the table (6.666666666s → 6.67s,
// 1m6.666666666s → 1m7s), so no arithmetic noise reaches it; --json has
// the milliseconds.
func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d
}
