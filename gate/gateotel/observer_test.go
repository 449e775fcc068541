package gateotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateotel"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// tracing is an Observer whose spans go to an in-memory exporter, and a
// tracer for the caller's own span.
type tracing struct {
	obs    *gateotel.Observer
	spans  *tracetest.InMemoryExporter
	tracer trace.Tracer
	reader *sdkmetric.ManualReader
}

func newTracing(t *testing.T) *tracing {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	reader := sdkmetric.NewManualReader()
	obs, err := gateotel.New(gateotel.Options{TracerProvider: tp, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	return &tracing{obs: obs, spans: exp, tracer: tp.Tracer("test"), reader: reader}
}

// byName returns the ended spans called name.
func (tr *tracing) byName(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range tr.spans.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func (tr *tracing) one(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	got := tr.byName(name)
	if len(got) != 1 {
		t.Fatalf("exp one %s span, got %d (all: %v)", name, len(got), names(tr.spans.GetSpans()))
	}
	return got[0]
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func attr(kvs []attribute.KeyValue, key string) (attribute.Value, bool) {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func wantAttr(t *testing.T, where string, kvs []attribute.KeyValue, key string, exp any) {
	t.Helper()
	v, ok := attr(kvs, key)
	if !ok {
		t.Errorf("%s: no attribute %s (have %v)", where, key, kvs)
		return
	}
	if got := v.AsInterface(); got != exp {
		t.Errorf("%s: %s: exp %v, got %v", where, key, exp, got)
	}
}

var (
	errTimeout = errors.New("upstream timed out: secret upstream text")
	testOpts   = gate.Options{Cooldown: time.Minute, Upstream: "openai:prod",
		Classify: func(err error) classify.Verdict {
			return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonTimeout}
		},
		Backoff: gate.Backoff{Jitter: -1}}
)

// A failed call under the caller's span: acquire and call are its
// children, settle the call's, and the settle says what it recorded.
func TestSpansOfAFailedCall(t *testing.T) {
	tr := newTracing(t)
	_, c := redistest.Miniredis(t)
	opts := testOpts
	opts.Observer = tr.obs
	g := gatetest.New(t, c, opts)
	ctx, parent := tr.tracer.Start(context.Background(), "request")
	err := g.Do(ctx, "doc-1", func(context.Context, *gate.Lease) error {
		time.Sleep(20 * time.Millisecond)
		return errTimeout
	})
	parent.End()
	if !errors.Is(err, gate.ErrCoolingDown) {
		t.Fatalf("exp a cooldown, got %v", err)
	}
	pid := parent.SpanContext().SpanID()

	acq := tr.one(t, "retrygate.acquire")
	if acq.Parent.SpanID() != pid {
		t.Errorf("acquire's parent is not the caller's span")
	}
	wantAttr(t, "acquire", acq.Attributes, "retrygate.outcome", "acquired")
	wantAttr(t, "acquire", acq.Attributes, "retrygate.job", "doc-1")
	wantAttr(t, "acquire", acq.Attributes, "retrygate.attempt", int64(1))
	wantAttr(t, "acquire", acq.Attributes, "gen_ai.provider.name", "openai")
	if _, ok := attr(acq.Attributes, "retrygate.fence"); !ok {
		t.Error("acquire: no fence")
	}

	call := tr.one(t, "retrygate.call")
	if call.Parent.SpanID() != pid {
		t.Errorf("call's parent is not the caller's span")
	}
	if d := call.EndTime.Sub(call.StartTime); d < 20*time.Millisecond {
		t.Errorf("call span lasts %v, the call took at least 20 ms", d)
	}
	if call.Status.Code != codes.Error {
		t.Errorf("call status: exp Error, got %v", call.Status)
	}

	settle := tr.one(t, "retrygate.settle")
	if settle.Parent.SpanID() != call.SpanContext.SpanID() {
		t.Errorf("settle's parent is not the call span")
	}
	wantAttr(t, "settle", settle.Attributes, "retrygate.state", "cooling_down")
	wantAttr(t, "settle", settle.Attributes, "retrygate.outcome", "cooled_down")
	wantAttr(t, "settle", settle.Attributes, "retrygate.reason", classify.ReasonTimeout)
	wantAttr(t, "settle", settle.Attributes, "error.type", classify.ReasonTimeout)
	wantAttr(t, "settle", settle.Attributes, "retrygate.wait", 60.0)
	noUpstreamText(t, tr.spans.GetSpans())
}

// The trace of a refused retry says why it was refused and until when.
func TestRefusedRetryShowsWhyAndUntilWhen(t *testing.T) {
	tr := newTracing(t)
	_, c := redistest.Miniredis(t)
	opts := testOpts
	opts.Observer = tr.obs
	g := gatetest.New(t, c, opts)
	_ = g.Do(context.Background(), "doc-1", func(context.Context, *gate.Lease) error { return errTimeout })

	ctx, parent := tr.tracer.Start(context.Background(), "retry")
	err := g.Do(ctx, "doc-1", func(context.Context, *gate.Lease) error { return nil })
	parent.End()
	wait, ok := gate.RetryAfter(err)
	if !ok {
		t.Fatalf("exp a refusal with a wait, got %v", err)
	}
	acq := tr.one(t, "retrygate.acquire")
	if acq.Parent.SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("the refusal's parent is not the caller's span")
	}
	if acq.Status.Code != codes.Error || !strings.Contains(acq.Status.Description, "cooling_down") {
		t.Errorf("status: exp Error naming cooling_down, got %+v", acq.Status)
	}
	wantAttr(t, "refusal", acq.Attributes, "retrygate.outcome", "refused")
	wantAttr(t, "refusal", acq.Attributes, "retrygate.state", "cooling_down")
	wantAttr(t, "refusal", acq.Attributes, "retrygate.reason", classify.ReasonTimeout)
	wantAttr(t, "refusal", acq.Attributes, "error.type", classify.ReasonTimeout)
	v, _ := attr(acq.Attributes, "retrygate.retry_at")
	at, perr := time.Parse(time.RFC3339Nano, v.AsString())
	if perr != nil {
		t.Fatalf("retry_at %q: %v", v.AsString(), perr)
	}
	if want := acq.EndTime.Add(wait); at.Sub(want).Abs() > 50*time.Millisecond {
		t.Errorf("retry_at %v, want about %v (the refusal's wait %v)", at, want, wait)
	}
	if len(tr.byName("retrygate.call")) != 0 {
		t.Error("a refused call has a call span")
	}
}

// Without a recording span in ctx the gate starts no trace of its own.
func TestNoSpansOutsideATrace(t *testing.T) {
	tr := newTracing(t)
	for _, e := range everyEvent() {
		tr.obs.Observe(context.Background(), e)
	}
	if got := tr.spans.GetSpans(); len(got) != 0 {
		t.Fatalf("exp no spans without a caller's span, got %v", names(got))
	}
}

// Every event kind, under a recording span: a span of its own or an event
// on the caller's span, with the attributes that say what happened.
func TestEveryEventKind(t *testing.T) {
	for _, tc := range []struct {
		e     gate.Event
		span  string // a span of this name, else an event on the caller's
		event string
		attrs map[string]any
	}{
		{e: gate.Event{Kind: gate.EventAcquired, Job: "j", Fence: 7, Attempt: 2}, span: "retrygate.acquire",
			attrs: map[string]any{"retrygate.outcome": "acquired", "retrygate.fence": int64(7), "retrygate.attempt": int64(2)}},
		{e: gate.Event{Kind: gate.EventRefused, Job: "j", State: gate.Running, Cooldown: time.Second, Local: true}, span: "retrygate.acquire",
			attrs: map[string]any{"retrygate.state": "running", "retrygate.wait": 1.0, "retrygate.local": true, "error.type": "running"}},
		{e: gate.Event{Kind: gate.EventRefused, Job: "j", State: gate.UpstreamCooling, Reason: "rate_limited", Cooldown: 2 * time.Second}, span: "retrygate.acquire",
			attrs: map[string]any{"retrygate.state": "upstream_cooling", "retrygate.reason": "rate_limited", "error.type": "rate_limited"}},
		{e: gate.Event{Kind: gate.EventFailOpen, Job: "j", Err: errTimeout}, span: "retrygate.acquire",
			attrs: map[string]any{"retrygate.outcome": "fail_open"}},
		{e: gate.Event{Kind: gate.EventSettled, Job: "j", State: gate.Ready, Held: time.Second}, span: "retrygate.settle",
			attrs: map[string]any{"retrygate.outcome": "succeeded", "retrygate.state": "ready"}},
		{e: gate.Event{Kind: gate.EventSettled, Job: "j", State: gate.Failed, Class: classify.ClassPermanent, Reason: "context_length_exceeded", Held: time.Second}, span: "retrygate.settle",
			attrs: map[string]any{"retrygate.outcome": "marked_failed", "retrygate.class": "permanent", "error.type": "context_length_exceeded"}},
		{e: gate.Event{Kind: gate.EventSettled, Job: "j", State: gate.Running, Held: time.Second, Err: gate.ErrNotOwned}, span: "retrygate.settle",
			attrs: map[string]any{"retrygate.outcome": "not_owned", "error.type": "not_owned"}},
		{e: gate.Event{Kind: gate.EventLeaseLost, Job: "j", Held: time.Second, Err: gate.ErrNotOwned}, span: "retrygate.call",
			attrs: map[string]any{"retrygate.held": 1.0}},
		{e: gate.Event{Kind: gate.EventLeaseLost, Job: "j", Err: gate.ErrNotOwned}, event: "retrygate.lease_lost",
			attrs: map[string]any{"retrygate.job": "j"}},
		{e: gate.Event{Kind: gate.EventRenewed, Job: "j", Err: errTimeout}, event: "retrygate.renewed",
			attrs: map[string]any{"retrygate.outcome": "failed"}},
		{e: gate.Event{Kind: gate.EventRedisError, Job: "j", Op: "acquire", Err: errTimeout}, event: "retrygate.redis_error",
			attrs: map[string]any{"retrygate.op": "acquire", "retrygate.cause": "unavailable"}},
		{e: gate.Event{Kind: gate.EventUpstreamCooling, Upstream: "anthropic:k", Reason: "overloaded", Class: classify.ClassTransient, Cooldown: 30 * time.Second}, event: "retrygate.upstream_cooling",
			attrs: map[string]any{"retrygate.reason": "overloaded", "retrygate.wait": 30.0, "gen_ai.provider.name": "anthropic"}},
		{e: gate.Event{Kind: gate.EventUpstreamPaused, Upstream: "gemini", Reason: "quota_exhausted", Class: classify.ClassSystemic, Cooldown: time.Minute}, event: "retrygate.upstream_paused",
			attrs: map[string]any{"retrygate.reason": "quota_exhausted", "gen_ai.provider.name": "gcp.gemini"}},
		{e: gate.Event{Kind: gate.EventWarning, Reason: gate.WarnPermanentWave, Err: errTimeout}, event: "retrygate.warning",
			attrs: map[string]any{"retrygate.reason": gate.WarnPermanentWave}},
	} {
		name := tc.e.Kind.String() + "/" + tc.span + tc.event
		t.Run(name, func(t *testing.T) {
			tr := newTracing(t)
			ctx, parent := tr.tracer.Start(context.Background(), "caller")
			tr.obs.Observe(ctx, tc.e)
			parent.End()
			var kvs []attribute.KeyValue
			if tc.span != "" {
				kvs = tr.one(t, tc.span).Attributes
			} else {
				evs := tr.one(t, "caller").Events
				if len(evs) != 1 || evs[0].Name != tc.event {
					t.Fatalf("exp one event %s on the caller's span, got %+v", tc.event, evs)
				}
				kvs = evs[0].Attributes
			}
			for k, v := range tc.attrs {
				wantAttr(t, name, kvs, k, v)
			}
			noUpstreamText(t, tr.spans.GetSpans())
		})
	}
}

// noUpstreamText: error text (here, errTimeout's) never becomes an attribute.
func noUpstreamText(t *testing.T, spans tracetest.SpanStubs) {
	t.Helper()
	check := func(kvs []attribute.KeyValue) {
		for _, kv := range kvs {
			if strings.Contains(kv.Value.Emit(), "secret upstream text") {
				t.Errorf("attribute %s carries error text: %q", kv.Key, kv.Value.Emit())
			}
		}
	}
	for _, s := range spans {
		check(s.Attributes)
		for _, ev := range s.Events {
			check(ev.Attributes)
		}
		if strings.Contains(s.Status.Description, "secret upstream text") {
			t.Errorf("span %s's status carries error text", s.Name)
		}
	}
}

// The hot path (acquired, refused, settled) allocates nothing when no
// tracer is configured and the caller has no span: with the global no-op
// providers, as a program that never set up OpenTelemetry has, and with
// the SDK's meter recording the metrics.
func TestNoAllocationWithoutTracer(t *testing.T) {
	for name, mp := range map[string]metric.MeterProvider{
		"noop": metricnoop.NewMeterProvider(),
		"sdk":  sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
	} {
		obs, err := gateotel.New(gateotel.Options{MeterProvider: mp})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, e := range []gate.Event{
			{Kind: gate.EventAcquired, Job: "doc-1", Upstream: "openai", Fence: 1, Attempt: 1},
			{Kind: gate.EventRefused, Job: "doc-1", Upstream: "openai", State: gate.CoolingDown, Reason: "rate_limited", Cooldown: time.Second},
			{Kind: gate.EventSettled, Job: "doc-1", Upstream: "openai", State: gate.CoolingDown, Reason: "timeout", Held: time.Second, Cooldown: time.Minute},
		} {
			obs.Observe(ctx, e) // fill the attribute-set cache
			if n := testing.AllocsPerRun(100, func() { obs.Observe(ctx, e) }); n != 0 {
				t.Errorf("%s meter, %v: %v allocations per event, want 0", name, e.Kind, n)
			}
		}
	}
}

// An acquire's span says the call's place in line: its class, its tenant
// and the seconds it waited for its turn.
func TestAcquireSpanSaysThePlaceInLine(t *testing.T) {
	tr := newTracing(t)
	ctx, parent := tr.tracer.Start(context.Background(), "request")
	tr.obs.Observe(ctx, gate.Event{Kind: gate.EventAcquired, Job: "doc-1", Upstream: "openai:prod",
		Priority: gate.PriorityInteractive, Tenant: "acme", Waited: 1500 * time.Millisecond})
	parent.End()
	acq := tr.one(t, "retrygate.acquire")
	wantAttr(t, "acquire", acq.Attributes, "retrygate.priority", "interactive")
	wantAttr(t, "acquire", acq.Attributes, "retrygate.tenant", "acme")
	wantAttr(t, "acquire", acq.Attributes, "retrygate.waited", 1.5)
}
