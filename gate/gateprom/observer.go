package gateprom

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// Observer turns gate events into Prometheus metrics. Register it with a
// prometheus.Registerer and pass it as gate.Options.Observer.
type Observer struct {
	acquisitions *prometheus.CounterVec
	coalesced    *prometheus.CounterVec
	settles      *prometheus.CounterVec
	renewals     *prometheus.CounterVec
	leaseLost    *prometheus.CounterVec
	notOwned     *prometheus.CounterVec
	redisErrors  *prometheus.CounterVec
	transitions  *prometheus.CounterVec
	warnings     *prometheus.CounterVec
	held         *prometheus.HistogramVec
	cooldown     *prometheus.HistogramVec
	budgetLeft   *prometheus.GaugeVec
	budgetSpent  *prometheus.CounterVec
	lineCalls    *prometheus.CounterVec
	lineWait     *prometheus.HistogramVec

	reasons map[string]bool
	tenants *labelSet
}

var (
	_ gate.Observer        = (*Observer)(nil)
	_ prometheus.Collector = (*Observer)(nil)
)

// New returns an Observer with its metrics created but not registered.
func New(opts Options) *Observer {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.HeldBuckets == nil {
		opts.HeldBuckets = DefaultHeldBuckets
	}
	if opts.CooldownBuckets == nil {
		opts.CooldownBuckets = DefaultCooldownBuckets
	}
	if opts.WaitBuckets == nil {
		opts.WaitBuckets = DefaultWaitBuckets
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: opts.Namespace, Subsystem: opts.Subsystem, Name: name, Help: help,
			ConstLabels: opts.ConstLabels,
		}, append([]string{"upstream"}, labels...))
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: opts.Namespace, Subsystem: opts.Subsystem, Name: name, Help: help,
			ConstLabels: opts.ConstLabels, Buckets: buckets,
		}, append([]string{"upstream"}, labels...))
	}
	o := &Observer{
		acquisitions: counter("acquisitions_total",
			"Calls that asked for a job's lock, by outcome (acquired, refused, fail_open, shadow_refused) and, for refusals, the refusing state.",
			"outcome", "state"),
		coalesced: counter("coalesced_total",
			"Refusals decided in-process: the job was already running in this process (no Redis round trip)."),
		settles: counter("settles_total",
			"Outcomes recorded in Redis after a call, by outcome (succeeded, cooled_down, marked_failed, released) and reason code.",
			"outcome", "reason"),
		renewals: counter("renewals_total",
			"Lease renewals, by outcome (ok, failed: Redis unreachable).",
			"outcome"),
		leaseLost: counter("lease_lost_total",
			"Leases lost while the call ran (expired, taken over, or renewals failing); the call's writes may overlap a newer owner's."),
		notOwned: counter("not_owned_total",
			`Settles rejected because the lock was no longer the caller's ("lock not owned"); nothing was written.`),
		redisErrors: counter("redis_errors_total",
			"Redis operations that failed, by operation and cause (unavailable: Redis could not serve the call now; refused: Redis answered with an error no wait fixes, such as NOPERM or OOM).",
			"op", "cause"),
		transitions: counter("upstream_transitions_total",
			"Provider-wide failures that cooled (state=cooling_down) or paused (state=paused) the upstream, by reason.",
			"state", "reason"),
		warnings: counter("warnings_total",
			"Warnings an operator must look at, by reason: problems found by the start-up check (maxmemory_policy_evicts, config_unchecked, no_persistence, server_version, multi_master, scripts_not_atomic, scripts_unchecked, no_maxmemory, memory_nearly_full), outcomes that could not be written: a failure's cooldown, a success's done mark (settle_unwritten), waves of one permanent reason (permanent_wave), waits that poll because they cannot subscribe (wait_polling).",
			"reason"),
		held: histogram("lock_held_seconds",
			"How long calls held the job's lock, from acquire to settle or lease loss, by outcome.",
			opts.HeldBuckets, "outcome"),
		cooldown: histogram("cooldown_seconds",
			"Cooldowns set, for a job (kind=job) or the upstream (kind=upstream).",
			opts.CooldownBuckets, "kind"),
		budgetLeft: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: opts.Namespace, Subsystem: opts.Subsystem, Name: "budget_left",
			Help:        "What the upstream's budget (the provider's reported rate limits, shared in Redis) had left at the last call admitted or refused by it, less the calls in flight, by limit (requests, tokens).",
			ConstLabels: opts.ConstLabels,
		}, []string{"upstream", "limit"}),
		budgetSpent: counter("budget_refusals_total",
			"Calls refused before they were sent because the upstream's budget would have less than its reserve left (also counted as acquisitions refused with state upstream_cooling)."),
		lineCalls: counter("line_calls_total",
			"Calls admitted (outcome=acquired) or refused, by class (gate.WithPriority: batch, normal, interactive or its number) and tenant (Options.TenantLabel).",
			"class", "tenant", "outcome"),
		lineWait: histogram("line_wait_seconds",
			"Time calls spent in their upstream's line before they were admitted (outcome=acquired) or refused, 0 for a call that did not wait, by class and tenant.",
			opts.WaitBuckets, "class", "tenant", "outcome"),
		reasons: make(map[string]bool),
		tenants: newLabelSet(opts.TenantLabel, opts.MaxTenantLabels),
	}
	for _, r := range classify.Reasons() {
		o.reasons[r] = true
	}
	for _, r := range opts.Reasons {
		o.reasons[r] = true
	}
	o.reasons[gate.ReasonOperator] = true // an operator's pause (Gate.PauseUpstream)
	return o
}

// reason bounds a classification's reason code: classify's codes,
// gate.ReasonOperator and Options.Reasons are kept, any other (a custom classifier's) is OtherLabel.
// The gate's own vocabularies (operations, warnings) are fixed sets and are
// kept as they are.
func (o *Observer) reason(r string) string {
	if r == "" || o.reasons[r] {
		return r
	}
	return OtherLabel
}

// Observe records e. It never blocks and never uses e.Job.
func (o *Observer) Observe(_ context.Context, e gate.Event) {
	upstream := e.Upstream
	switch e.Kind {
	case gate.EventAcquired:
		o.acquisitions.WithLabelValues(upstream, "acquired", "").Inc()
		o.budget(upstream, e.Budget)
		o.line(upstream, "acquired", e)
	case gate.EventRefused:
		outcome := "refused"
		if e.Shadow {
			outcome = "shadow_refused" // decided, not enforced: the call ran
		}
		o.acquisitions.WithLabelValues(upstream, outcome, e.State.String()).Inc()
		o.budget(upstream, e.Budget)
		if e.Budget.Spent {
			o.budgetSpent.WithLabelValues(upstream).Inc()
		}
		if e.Local {
			o.coalesced.WithLabelValues(upstream).Inc()
		}
		if !e.Shadow {
			o.line(upstream, "refused", e)
		}
	case gate.EventFailOpen:
		o.acquisitions.WithLabelValues(upstream, "fail_open", "").Inc()
	case gate.EventSettled:
		outcome := settleOutcome(e)
		o.held.WithLabelValues(upstream, outcome).Observe(e.Held.Seconds())
		if outcome == "not_owned" {
			o.notOwned.WithLabelValues(upstream).Inc()
			break
		}
		reason := ""
		if outcome != "succeeded" {
			reason = o.reason(e.Reason)
		}
		o.settles.WithLabelValues(upstream, outcome, reason).Inc()
		if outcome == "cooled_down" {
			o.cooldown.WithLabelValues(upstream, "job").Observe(e.Cooldown.Seconds())
		}
	case gate.EventRenewed:
		if e.Err != nil {
			o.renewals.WithLabelValues(upstream, "failed").Inc()
		} else {
			o.renewals.WithLabelValues(upstream, "ok").Inc()
		}
	case gate.EventLeaseLost:
		o.leaseLost.WithLabelValues(upstream).Inc()
		o.held.WithLabelValues(upstream, "lease_lost").Observe(e.Held.Seconds())
	case gate.EventRedisError:
		o.redisErrors.WithLabelValues(upstream, e.Op, cause(e.Err)).Inc()
	case gate.EventUpstreamCooling:
		o.transitions.WithLabelValues(upstream, gate.CoolingDown.String(), o.reason(e.Reason)).Inc()
		o.cooldown.WithLabelValues(upstream, "upstream").Observe(e.Cooldown.Seconds())
	case gate.EventUpstreamPaused:
		o.transitions.WithLabelValues(upstream, gate.Paused.String(), o.reason(e.Reason)).Inc()
	case gate.EventWarning:
		o.warnings.WithLabelValues(upstream, e.Reason).Inc() // the gate's own Warn* codes
	}
}

// line counts an admitted or refused call by its class and tenant, and
// the time it waited in line.
func (o *Observer) line(upstream, outcome string, e gate.Event) {
	class, tenant := e.Priority.String(), o.tenants.label(e.Tenant)
	o.lineCalls.WithLabelValues(upstream, class, tenant, outcome).Inc()
	o.lineWait.WithLabelValues(upstream, class, tenant, outcome).Observe(e.Waited.Seconds())
}

// budget sets the budget's gauges from what an event says is left.
func (o *Observer) budget(upstream string, b gate.UpstreamBudget) {
	if b.Requests.Reported && b.Requests.Left >= 0 {
		o.budgetLeft.WithLabelValues(upstream, "requests").Set(float64(b.Requests.Left))
	}
	if b.Tokens.Reported && b.Tokens.Left >= 0 {
		o.budgetLeft.WithLabelValues(upstream, "tokens").Set(float64(b.Tokens.Left))
	}
}

// settleOutcome names an EventSettled: not_owned, cooled_down,
// marked_failed, released or succeeded. gateotel names them alike
// (its TestSameSeriesAsGateprom).
func settleOutcome(e gate.Event) string {
	switch {
	case e.Err != nil:
		return "not_owned"
	case e.State == gate.CoolingDown:
		return "cooled_down"
	case e.State == gate.Failed:
		return "marked_failed"
	case e.State == gate.Ready && e.Reason != "":
		return "released"
	}
	return "succeeded"
}

// cause tells a Redis that could not serve the call ("unavailable") from
// one that refused it ("refused": a permission or configuration problem).
func cause(err error) string {
	if errors.Is(err, gate.ErrRedisRefused) {
		return "refused"
	}
	return "unavailable"
}

func (o *Observer) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.acquisitions, o.coalesced, o.settles, o.renewals, o.leaseLost,
		o.notOwned, o.redisErrors, o.transitions, o.warnings, o.held, o.cooldown, o.budgetLeft, o.budgetSpent,
		o.lineCalls, o.lineWait}
}

// Describe implements prometheus.Collector.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range o.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	for _, c := range o.collectors() {
		c.Collect(ch)
	}
}
