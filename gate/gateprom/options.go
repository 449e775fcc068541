package gateprom

import "github.com/prometheus/client_golang/prometheus"

// Options configures New. The zero value is ready to use.
type Options struct {
	// Namespace prefixes every metric name. Default: "retrygate".
	Namespace string
	// Subsystem goes between Namespace and the metric name. Default: none.
	Subsystem string
	// ConstLabels are added to every series (e.g. {"service": "eval"}).
	ConstLabels prometheus.Labels

	// HeldBuckets are the upper bounds, in seconds, of
	// retrygate_lock_held_seconds. Default: DefaultHeldBuckets.
	HeldBuckets []float64
	// CooldownBuckets are the upper bounds, in seconds, of
	// retrygate_cooldown_seconds. Default: DefaultCooldownBuckets.
	CooldownBuckets []float64

	// WaitBuckets are the upper bounds, in seconds, of
	// retrygate_line_wait_seconds. Default: DefaultWaitBuckets.
	WaitBuckets []float64

	// TenantLabel maps a call's tenant (gate.WithTenant) to the tenant
	// label of the line metrics: your plans ("free", "pro") or your few
	// largest customers, "" for the rest. A label per tenant is a series
	// per customer, and as many as a client can make up is an outage of
	// the metrics backend: keep its values few. Beyond MaxTenantLabels
	// distinct values, and for values not UTF-8, the label is OtherLabel.
	// Default: nil, every tenant "" (the metrics are per class only).
	TenantLabel func(tenant string) string
	// MaxTenantLabels bounds the distinct tenant label values, the
	// safety net under TenantLabel. Default: 100.
	MaxTenantLabels int

	// Reasons are custom reason codes (from your own classify rules) to
	// keep as label values; any reason neither here nor in
	// classify.Reasons is counted as "other".
	Reasons []string
}

// DefaultNamespace is the default metric namespace.
const DefaultNamespace = "retrygate"

// DefaultHeldBuckets span LLM calls: 100 ms to 10 min.
var DefaultHeldBuckets = []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600}

// DefaultCooldownBuckets span cooldowns from a second (a short server
// hint) to a day (classify.MaxHint).
var DefaultCooldownBuckets = []float64{1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 21600, 86400}

// DefaultWaitBuckets span a wait for a turn in line: none, 10 ms (a
// provider refilling one call) to 5 min.
var DefaultWaitBuckets = []float64{0, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// OtherLabel replaces a label value outside the known set.
const OtherLabel = "other"
