package gateotel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/retrygate/retrygate/gate/gateotel"

// Options configures New. The zero value uses the global providers.
type Options struct {
	// TracerProvider makes the spans. Default: otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the instruments. Default: otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Reasons are custom reason codes (from your own classify rules) to
	// keep as metric attribute values; any code neither here nor in
	// classify.Reasons is "other".
	Reasons []string
	// TenantLabel maps a call's tenant (gate.WithTenant) to the tenant
	// attribute of the line metrics, as gateprom's Options.TenantLabel:
	// a few values (plans, your largest customers), "" for the rest;
	// beyond MaxTenantLabels distinct values, and for values not UTF-8,
	// it is "other". Default: nil, every tenant "".
	TenantLabel func(tenant string) string
	// MaxTenantLabels bounds the distinct tenant values. Default: 100.
	MaxTenantLabels int
}

// Observer turns gate events into spans and metrics. Pass it as
// gate.Options.Observer.
type Observer struct {
	tracer  trace.Tracer
	reasons map[string]bool
	tenants *labelSet

	counters   [nCounters]metric.Int64Counter
	held       metric.Float64Histogram
	lineWait   metric.Float64Histogram
	cooldown   metric.Float64Histogram
	budgetLeft metric.Int64Gauge

	mu   sync.RWMutex
	sets map[setKey]measure
}

var _ gate.Observer = (*Observer)(nil)

// The counters, indexed by series; series names the attribute sets too.
type series uint8

const (
	acquisitions series = iota
	coalesced
	settles
	renewals
	leaseLost
	notOwned
	redisErrors
	upstreamTransitions
	warnings
	budgetRefusals
	lineCalls
	nCounters
	held       = nCounters
	cooldown   = nCounters + 1
	budgetLeft = nCounters + 2
	lineWait   = nCounters + 3
)

// instruments are the series' names, descriptions and attributes (after
// upstream), matching gateprom's.
var instruments = [...]struct {
	name, desc string
	labels     []string
}{
	acquisitions:        {"retrygate.acquisitions", "Calls that asked for a job's lock, by outcome (acquired, refused, fail_open, shadow_refused) and, for refusals, the refusing state.", []string{"outcome", "state"}},
	coalesced:           {"retrygate.coalesced", "Refusals decided in-process: the job was already running in this process (no Redis round trip).", nil},
	settles:             {"retrygate.settles", "Outcomes recorded in Redis after a call, by outcome (succeeded, cooled_down, marked_failed, released) and reason code.", []string{"outcome", "reason"}},
	renewals:            {"retrygate.renewals", "Lease renewals, by outcome (ok, failed: Redis unreachable).", []string{"outcome"}},
	leaseLost:           {"retrygate.lease_lost", "Leases lost while the call ran (expired, taken over, or renewals failing).", nil},
	notOwned:            {"retrygate.not_owned", `Settles rejected because the lock was no longer the caller's ("lock not owned"); nothing was written.`, nil},
	redisErrors:         {"retrygate.redis_errors", "Redis operations that failed, by operation and cause (unavailable, refused).", []string{"op", "cause"}},
	upstreamTransitions: {"retrygate.upstream_transitions", "Provider-wide failures that cooled (state=cooling_down) or paused (state=paused) the upstream, by reason.", []string{"state", "reason"}},
	warnings:            {"retrygate.warnings", "Warnings an operator must look at, by reason.", []string{"reason"}},
	held:                {"retrygate.lock_held", "How long calls held the job's lock, from acquire to settle or lease loss, by outcome.", []string{"outcome"}},
	cooldown:            {"retrygate.cooldown", "Cooldowns set, for a job (kind=job) or the upstream (kind=upstream).", []string{"kind"}},
	budgetRefusals:      {"retrygate.budget_refusals", "Calls refused before they were sent because the upstream's budget would have less than its reserve left (also counted as acquisitions refused with state upstream_cooling).", nil},
	lineCalls:           {"retrygate.line_calls", "Calls admitted (outcome=acquired) or refused, by class (gate.WithPriority: batch, normal, interactive or its number) and tenant (Options.TenantLabel).", []string{"class", "tenant", "outcome"}},
	lineWait:            {"retrygate.line_wait", "Time calls spent in their upstream's line before they were admitted (outcome=acquired) or refused, 0 for a call that did not wait, by class and tenant.", []string{"class", "tenant", "outcome"}},
	budgetLeft:          {"retrygate.budget_left", "What the upstream's budget (the provider's reported rate limits, shared in Redis) had left at the last call admitted or refused by it, less the calls in flight, by limit (requests, tokens).", []string{"limit"}},
}

// New returns an Observer with its instruments created.
func New(opts Options) (*Observer, error) {
	tp, mp := opts.TracerProvider, opts.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName)
	o := &Observer{
		tracer:  tp.Tracer(ScopeName),
		reasons: make(map[string]bool),
		tenants: newLabelSet(opts.TenantLabel, opts.MaxTenantLabels),
		sets:    make(map[setKey]measure),
	}
	var err error
	for i := range o.counters {
		in := instruments[i]
		if o.counters[i], err = meter.Int64Counter(in.name, metric.WithDescription(in.desc)); err != nil {
			return nil, fmt.Errorf("gateotel: %s: %w", in.name, err)
		}
	}
	if o.held, err = meter.Float64Histogram(instruments[held].name, metric.WithDescription(instruments[held].desc),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(heldBuckets...)); err != nil {
		return nil, fmt.Errorf("gateotel: %s: %w", instruments[held].name, err)
	}
	if o.cooldown, err = meter.Float64Histogram(instruments[cooldown].name, metric.WithDescription(instruments[cooldown].desc),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(cooldownBuckets...)); err != nil {
		return nil, fmt.Errorf("gateotel: %s: %w", instruments[cooldown].name, err)
	}
	if o.lineWait, err = meter.Float64Histogram(instruments[lineWait].name, metric.WithDescription(instruments[lineWait].desc),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(waitBuckets...)); err != nil {
		return nil, fmt.Errorf("gateotel: %s: %w", instruments[lineWait].name, err)
	}
	if o.budgetLeft, err = meter.Int64Gauge(instruments[budgetLeft].name, metric.WithDescription(instruments[budgetLeft].desc)); err != nil {
		return nil, fmt.Errorf("gateotel: %s: %w", instruments[budgetLeft].name, err)
	}
	for _, r := range classify.Reasons() {
		o.reasons[r] = true
	}
	for _, r := range opts.Reasons {
		o.reasons[r] = true
	}
	o.reasons[gate.ReasonOperator] = true // an operator's pause (Gate.PauseUpstream), as gateprom
	return o, nil
}

// Observe records e: its metrics, and its spans when ctx carries a
// recording span.
func (o *Observer) Observe(ctx context.Context, e gate.Event) {
	o.measure(ctx, e)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		o.trace(ctx, span, e)
	}
}

// measure records e's metrics, as gateprom does. It never uses e.Job.
func (o *Observer) measure(ctx context.Context, e gate.Event) {
	upstream := e.Upstream
	switch e.Kind {
	case gate.EventAcquired:
		o.add(ctx, acquisitions, upstream, "acquired", "")
		o.budget(ctx, upstream, e.Budget)
		o.line(ctx, upstream, "acquired", e)
	case gate.EventRefused:
		o.add(ctx, acquisitions, upstream, "refused", e.State.String())
		if e.Local {
			o.add(ctx, coalesced, upstream, "", "")
		}
		o.budget(ctx, upstream, e.Budget)
		if e.Budget.Spent {
			o.add(ctx, budgetRefusals, upstream, "", "")
		}
		if !e.Shadow {
			o.line(ctx, upstream, "refused", e)
		}
	case gate.EventFailOpen:
		o.add(ctx, acquisitions, upstream, "fail_open", "")
	case gate.EventSettled:
		outcome := settleOutcome(e)
		o.held.Record(ctx, e.Held.Seconds(), o.set(held, upstream, outcome, "").rec...)
		if outcome == "not_owned" {
			o.add(ctx, notOwned, upstream, "", "")
			break
		}
		reason := ""
		if outcome != "succeeded" {
			reason = o.reason(e.Reason)
		}
		o.add(ctx, settles, upstream, outcome, reason)
		if outcome == "cooled_down" {
			o.cooldown.Record(ctx, e.Cooldown.Seconds(), o.set(cooldown, upstream, "job", "").rec...)
		}
	case gate.EventRenewed:
		if e.Err != nil {
			o.add(ctx, renewals, upstream, "failed", "")
		} else {
			o.add(ctx, renewals, upstream, "ok", "")
		}
	case gate.EventLeaseLost:
		o.add(ctx, leaseLost, upstream, "", "")
		o.held.Record(ctx, e.Held.Seconds(), o.set(held, upstream, "lease_lost", "").rec...)
	case gate.EventRedisError:
		o.add(ctx, redisErrors, upstream, e.Op, cause(e.Err))
	case gate.EventUpstreamCooling:
		o.add(ctx, upstreamTransitions, upstream, gate.CoolingDown.String(), o.reason(e.Reason))
		o.cooldown.Record(ctx, e.Cooldown.Seconds(), o.set(cooldown, upstream, "upstream", "").rec...)
	case gate.EventUpstreamPaused:
		o.add(ctx, upstreamTransitions, upstream, gate.Paused.String(), o.reason(e.Reason))
	case gate.EventWarning:
		o.add(ctx, warnings, upstream, e.Reason, "") // the gate's own Warn* codes
	}
}

// budget records what an event says the upstream's budget had left.
func (o *Observer) budget(ctx context.Context, upstream string, b gate.UpstreamBudget) {
	if b.Requests.Reported && b.Requests.Left >= 0 {
		o.budgetLeft.Record(ctx, b.Requests.Left, o.set(budgetLeft, upstream, "requests", "").rec...)
	}
	if b.Tokens.Reported && b.Tokens.Left >= 0 {
		o.budgetLeft.Record(ctx, b.Tokens.Left, o.set(budgetLeft, upstream, "tokens", "").rec...)
	}
}

func (o *Observer) add(ctx context.Context, s series, upstream, a, b string) {
	o.counters[s].Add(ctx, 1, o.set(s, upstream, a, b).add...)
}

// line counts an admitted or refused call by its class and tenant, and
// the time it waited in line, as gateprom does.
func (o *Observer) line(ctx context.Context, upstream, outcome string, e gate.Event) {
	class, tenant := e.Priority.String(), o.tenants.label(e.Tenant)
	o.counters[lineCalls].Add(ctx, 1, o.set3(lineCalls, upstream, class, tenant, outcome).add...)
	o.lineWait.Record(ctx, e.Waited.Seconds(), o.set3(lineWait, upstream, class, tenant, outcome).rec...)
}

// other replaces a reason code outside the known set, as gateprom's
// OtherLabel does.
const other = "other"

// reason bounds a classification's reason code: classify's codes and
// Options.Reasons are kept, any other (a custom classifier's) is other.
// The gate's own vocabularies (operations, warnings) are fixed sets.
func (o *Observer) reason(r string) string {
	if r == "" || o.reasons[r] {
		return r
	}
	return other
}

// The histograms' default bounds, in seconds: gateprom's
// DefaultHeldBuckets and DefaultCooldownBuckets, which this module does
// not import (that would build the Prometheus client into every program
// using OpenTelemetry). TestSameSeriesAsGateprom compares the two.
var (
	heldBuckets     = []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600}
	cooldownBuckets = []float64{1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 21600, 86400}
	waitBuckets     = []float64{0, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}
)

// settleOutcome names an EventSettled as gateprom does: not_owned,
// cooled_down, marked_failed, released or succeeded.
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

// setKey names one attribute set: a series and its label values.
type setKey struct {
	s                 series
	upstream, a, b, c string
}

// measure holds an attribute set as the options both instrument kinds
// take, built once: a measurement with a known set allocates nothing.
type measure struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

// set returns the options of k's attribute set. Its label values are
// bounded (states, outcomes, known reasons, the operator's upstreams,
// classes, bounded tenant labels), so the cache is too.
func (o *Observer) set(s series, upstream, a, b string) measure {
	return o.set3(s, upstream, a, b, "")
}

// set3 is set for a series of three labels after upstream.
func (o *Observer) set3(s series, upstream, a, b, c string) measure {
	k := setKey{s, upstream, a, b, c}
	o.mu.RLock()
	m, ok := o.sets[k]
	o.mu.RUnlock()
	if ok {
		return m
	}
	kvs := []attribute.KeyValue{attribute.String("upstream", upstream)}
	for i, l := range instruments[s].labels {
		kvs = append(kvs, attribute.String(l, [...]string{a, b, c}[i]))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(kvs...))
	m = measure{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}}
	o.mu.Lock()
	o.sets[k] = m
	o.mu.Unlock()
	return m
}

// Attribute keys.
const (
	keyJob      = attribute.Key("retrygate.job")
	keyUpstream = attribute.Key("retrygate.upstream")
	keyState    = attribute.Key("retrygate.state")
	keyOutcome  = attribute.Key("retrygate.outcome")
	keyReason   = attribute.Key("retrygate.reason")
	keyClass    = attribute.Key("retrygate.class")
	keyFence    = attribute.Key("retrygate.fence")
	keyAttempt  = attribute.Key("retrygate.attempt")
	keyWait     = attribute.Key("retrygate.wait")
	keyRetryAt  = attribute.Key("retrygate.retry_at")
	keyHeld     = attribute.Key("retrygate.held")
	keyLocal    = attribute.Key("retrygate.local")
	keyOp       = attribute.Key("retrygate.op")
	keyCause    = attribute.Key("retrygate.cause")
	keyPriority = attribute.Key("retrygate.priority")
	keyTenant   = attribute.Key("retrygate.tenant")
	keyWaited   = attribute.Key("retrygate.waited")

	keyBudgetRequests = attribute.Key("retrygate.budget.requests_left")
	keyBudgetTokens   = attribute.Key("retrygate.budget.tokens_left")
	keyBudgetSpent    = attribute.Key("retrygate.budget.spent")
)

// budgetAttrs are what the upstream's budget had left at an acquire or a
// refusal, and whether it refused; none without a budget.
func budgetAttrs(b gate.UpstreamBudget) []attribute.KeyValue {
	var out []attribute.KeyValue
	if b.Requests.Reported {
		out = append(out, keyBudgetRequests.Int64(b.Requests.Left))
	}
	if b.Tokens.Reported {
		out = append(out, keyBudgetTokens.Int64(b.Tokens.Left))
	}
	if b.Spent {
		out = append(out, keyBudgetSpent.Bool(true))
	}
	return out
}

// trace records e as spans under span, the caller's, or as an event on it.
func (o *Observer) trace(ctx context.Context, span trace.Span, e gate.Event) {
	now := time.Now()
	switch e.Kind {
	case gate.EventAcquired, gate.EventRefused, gate.EventFailOpen:
		attrs := o.jobAttrs(e)
		outcome := "acquired"
		switch e.Kind {
		case gate.EventRefused:
			outcome = "refused"
		case gate.EventFailOpen:
			outcome = "fail_open"
		}
		attrs = append(attrs, keyOutcome.String(outcome))
		attrs = append(attrs, budgetAttrs(e.Budget)...)
		if e.Kind != gate.EventFailOpen {
			// The call's place in line: a span is one call, so the
			// tenant is an attribute here, never a metric label.
			attrs = append(attrs, keyPriority.String(e.Priority.String()))
			if e.Tenant != "" {
				attrs = append(attrs, keyTenant.String(e.Tenant))
			}
			if e.Waited > 0 {
				attrs = append(attrs, keyWaited.Float64(e.Waited.Seconds()))
			}
		}
		if e.Kind == gate.EventRefused {
			attrs = append(attrs, keyState.String(e.State.String()))
			attrs = append(attrs, waitAttrs(e, now)...)
			attrs = append(attrs, semconv.ErrorTypeKey.String(errorType(e)))
			if e.Local {
				attrs = append(attrs, keyLocal.Bool(true))
			}
		}
		_, s := o.tracer.Start(ctx, "retrygate.acquire", trace.WithTimestamp(now), trace.WithAttributes(attrs...))
		if e.Kind == gate.EventRefused {
			s.SetStatus(codes.Error, "refused: "+e.State.String())
		}
		s.End(trace.WithTimestamp(now))
	case gate.EventSettled, gate.EventLeaseLost:
		if e.Kind == gate.EventLeaseLost && e.Held == 0 {
			// Redis.ContinueOnLeaseLost: the settle that follows has the call.
			span.AddEvent("retrygate.lease_lost", trace.WithTimestamp(now), trace.WithAttributes(o.jobAttrs(e)...))
			return
		}
		o.call(ctx, e, now)
	default:
		attrs := o.jobAttrs(e)
		switch e.Kind {
		case gate.EventUpstreamCooling, gate.EventUpstreamPaused:
			attrs = append(attrs, keyClass.String(e.Class.String()))
			attrs = append(attrs, waitAttrs(e, now)...)
		case gate.EventRedisError:
			attrs = append(attrs, keyOp.String(e.Op), keyCause.String(cause(e.Err)))
		case gate.EventRenewed:
			if e.Err == nil {
				return // a renewal that worked is not news
			}
			attrs = append(attrs, keyOutcome.String("failed"))
		}
		span.AddEvent("retrygate."+e.Kind.String(), trace.WithTimestamp(now), trace.WithAttributes(attrs...))
	}
}

// call records the guarded call, from Held before now, and its settle.
func (o *Observer) call(ctx context.Context, e gate.Event, now time.Time) {
	attrs := append(o.jobAttrs(e), keyHeld.Float64(e.Held.Seconds()))
	cctx, c := o.tracer.Start(ctx, "retrygate.call", trace.WithTimestamp(now.Add(-e.Held)), trace.WithAttributes(attrs...))
	if e.Kind == gate.EventLeaseLost {
		c.SetStatus(codes.Error, "lease lost")
		c.End(trace.WithTimestamp(now))
		return
	}
	outcome := settleOutcome(e)
	sattrs := []attribute.KeyValue{keyState.String(e.State.String()), keyOutcome.String(outcome)}
	if e.Reason != "" {
		sattrs = append(sattrs, keyReason.String(e.Reason))
	}
	switch outcome {
	case "cooled_down", "marked_failed":
		sattrs = append(sattrs, keyClass.String(e.Class.String()), semconv.ErrorTypeKey.String(errorType(e)))
		sattrs = append(sattrs, waitAttrs(e, now)...)
		c.SetStatus(codes.Error, outcome)
	case "not_owned":
		sattrs = append(sattrs, semconv.ErrorTypeKey.String(outcome))
		c.SetStatus(codes.Error, "lock not owned")
	}
	_, s := o.tracer.Start(cctx, "retrygate.settle", trace.WithTimestamp(now), trace.WithAttributes(sattrs...))
	if outcome == "not_owned" {
		s.SetStatus(codes.Error, "lock not owned")
	}
	s.End(trace.WithTimestamp(now))
	c.End(trace.WithTimestamp(now))
}

// jobAttrs are the attributes every span and span event carries.
func (o *Observer) jobAttrs(e gate.Event) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 12)
	if e.Job != "" {
		attrs = append(attrs, keyJob.String(e.Job))
	}
	if e.Upstream != "" {
		attrs = append(attrs, keyUpstream.String(e.Upstream))
		if p, ok := provider(e.Upstream); ok {
			attrs = append(attrs, p)
		}
	}
	if e.Fence != 0 {
		attrs = append(attrs, keyFence.Int64(e.Fence))
	}
	if e.Attempt != 0 {
		attrs = append(attrs, keyAttempt.Int(e.Attempt))
	}
	if e.Reason != "" && e.Kind != gate.EventSettled {
		attrs = append(attrs, keyReason.String(e.Reason))
	}
	return attrs
}

// waitAttrs say how long the wait is and when it ends.
func waitAttrs(e gate.Event, now time.Time) []attribute.KeyValue {
	if e.Cooldown <= 0 {
		return nil
	}
	return []attribute.KeyValue{
		keyWait.Float64(e.Cooldown.Seconds()),
		keyRetryAt.String(now.Add(e.Cooldown).UTC().Format(time.RFC3339Nano)),
	}
}

// errorType is a refusal's or failure's error.type: its reason code, else
// the state that refused it.
func errorType(e gate.Event) string {
	if e.Reason != "" {
		return e.Reason
	}
	return e.State.String()
}

// providers maps an upstream's first segment to gen_ai.provider.name.
var providers = func() map[string]attribute.KeyValue {
	m := map[string]attribute.KeyValue{}
	for _, kv := range []attribute.KeyValue{
		semconv.GenAIProviderNameOpenAI, semconv.GenAIProviderNameAnthropic, semconv.GenAIProviderNameGCPGemini,
		semconv.GenAIProviderNameGCPVertexAI, semconv.GenAIProviderNameGCPGenAI, semconv.GenAIProviderNameAzureAIOpenAI,
		semconv.GenAIProviderNameAzureAIInference, semconv.GenAIProviderNameAWSBedrock, semconv.GenAIProviderNameCohere,
		semconv.GenAIProviderNameDeepseek, semconv.GenAIProviderNameGroq, semconv.GenAIProviderNameMistralAI,
		semconv.GenAIProviderNamePerplexity, semconv.GenAIProviderNameXAI, semconv.GenAIProviderNameIBMWatsonxAI,
	} {
		m[kv.Value.AsString()] = kv
	}
	for alias, kv := range map[string]attribute.KeyValue{
		"gemini": semconv.GenAIProviderNameGCPGemini, "vertex": semconv.GenAIProviderNameGCPVertexAI,
		"azure": semconv.GenAIProviderNameAzureAIOpenAI, "bedrock": semconv.GenAIProviderNameAWSBedrock,
		"mistral": semconv.GenAIProviderNameMistralAI, "xai": semconv.GenAIProviderNameXAI,
	} {
		m[alias] = kv
	}
	return m
}()

func provider(upstream string) (attribute.KeyValue, bool) {
	first, _, _ := strings.Cut(upstream, ":")
	kv, ok := providers[strings.ToLower(first)]
	return kv, ok
}
