package gateotel_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateotel"
	"github.com/retrygate/retrygate/gate/gateprom"
)

// everyEvent drives every series gateprom exports at least once.
func everyEvent() []gate.Event {
	const upstream = "openai:prod"
	return []gate.Event{
		{Kind: gate.EventAcquired, Upstream: upstream, Job: "a", Fence: 1, Attempt: 1},
		{Kind: gate.EventRefused, Upstream: upstream, Job: "a", State: gate.CoolingDown, Reason: classify.ReasonTimeout, Cooldown: time.Minute},
		{Kind: gate.EventRefused, Upstream: upstream, Job: "a", State: gate.Running, Cooldown: time.Second, Local: true},
		{Kind: gate.EventFailOpen, Upstream: upstream, Job: "a"},
		{Kind: gate.EventSettled, Upstream: upstream, Job: "a", State: gate.Ready, Held: 2 * time.Second},
		{Kind: gate.EventSettled, Upstream: upstream, Job: "a", State: gate.CoolingDown, Reason: classify.ReasonRateLimited, Held: time.Second, Cooldown: 30 * time.Second},
		{Kind: gate.EventSettled, Upstream: upstream, Job: "a", State: gate.Failed, Reason: "my_own_code", Held: time.Second},
		{Kind: gate.EventSettled, Upstream: upstream, Job: "a", State: gate.Ready, Reason: classify.ReasonCanceled, Held: time.Second},
		{Kind: gate.EventSettled, Upstream: upstream, Job: "a", State: gate.Running, Held: time.Second, Err: gate.ErrNotOwned},
		{Kind: gate.EventRenewed, Upstream: upstream, Job: "a"},
		{Kind: gate.EventRenewed, Upstream: upstream, Job: "a", Err: fmt.Errorf("down")},
		{Kind: gate.EventLeaseLost, Upstream: upstream, Job: "a", Held: 70 * time.Second},
		{Kind: gate.EventRedisError, Upstream: upstream, Job: "a", Op: "acquire", Err: gate.ErrUnavailable},
		{Kind: gate.EventRedisError, Upstream: upstream, Op: "weird", Err: gate.ErrRedisRefused},
		{Kind: gate.EventUpstreamCooling, Upstream: upstream, Reason: classify.ReasonRateLimited, Cooldown: 20 * time.Second},
		{Kind: gate.EventUpstreamPaused, Upstream: upstream, Reason: classify.ReasonQuotaExhausted, Cooldown: 10 * time.Minute},
		{Kind: gate.EventUpstreamPaused, Upstream: upstream, Reason: gate.ReasonOperator, Cooldown: 10 * time.Minute},
		{Kind: gate.EventRefused, Upstream: upstream, Job: "c", State: gate.UpstreamCooling, Reason: gate.ReasonOperator, Cooldown: 9 * time.Minute},
		{Kind: gate.EventWarning, Upstream: upstream, Reason: gate.WarnPermanentWave},
		{Kind: gate.EventAcquired, Upstream: upstream, Job: "d", Priority: gate.PriorityInteractive, Tenant: "acme", Waited: 40 * time.Millisecond},
		{Kind: gate.EventAcquired, Upstream: upstream, Job: "e", Priority: gate.PriorityBatch, Tenant: "globex", Waited: 3 * time.Second},
		{Kind: gate.EventRefused, Upstream: upstream, Job: "f", Priority: 7, Tenant: "initech", State: gate.UpstreamCooling, Waited: 9 * time.Second},
		{Kind: gate.EventRefused, Upstream: upstream, Job: "b", State: gate.UpstreamCooling, Reason: classify.ReasonRateLimited, Cooldown: 20 * time.Millisecond,
			Budget: gate.UpstreamBudget{Spent: true, Requests: gate.BudgetLimit{Reported: true, Left: 1}, Tokens: gate.BudgetLimit{Reported: true, Left: 900}}},
	}
}

// TestSameSeriesAsGateprom feeds both observers the same events: through
// OpenTelemetry's Prometheus exporter, gateotel's instruments must give
// gateprom's families, with the same labels and values.
func TestSameSeriesAsGateprom(t *testing.T) {
	promReg := prometheus.NewRegistry()
	tenant := func(t string) string { return t }
	promObs := gateprom.New(gateprom.Options{TenantLabel: tenant, MaxTenantLabels: 2})
	promReg.MustRegister(promObs)

	otelReg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(otelReg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		t.Fatal(err)
	}
	otelObs, err := gateotel.New(gateotel.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)),
		TenantLabel: tenant, MaxTenantLabels: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, e := range everyEvent() {
		promObs.Observe(ctx, e)
		otelObs.Observe(ctx, e)
	}
	want, got := series(t, promReg), series(t, otelReg)
	if len(want) < 15 {
		t.Fatalf("gateprom exported %d families, the events should drive all 15", len(want))
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("gateotel has no %s", name)
			continue
		}
		if w != g {
			t.Errorf("%s:\n gateprom %s\n gateotel %s", name, w, g)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("gateotel exports %s, gateprom does not", name)
		}
	}
}

// series gathers reg into family name → its series, each its labels and
// value (a histogram's count, sum and buckets), sorted.
func series(t *testing.T, reg *prometheus.Registry) map[string]string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, mf := range mfs {
		var lines []string
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			lines = append(lines, strings.Join(labels, ",")+" "+value(mf.GetType(), m))
		}
		sort.Strings(lines)
		out[mf.GetName()] = strings.Join(lines, "; ")
	}
	return out
}

func value(typ dto.MetricType, m *dto.Metric) string {
	if typ == dto.MetricType_HISTOGRAM {
		h := m.GetHistogram()
		var b []string
		for _, bk := range h.GetBucket() {
			b = append(b, fmt.Sprintf("%g:%d", bk.GetUpperBound(), bk.GetCumulativeCount()))
		}
		return fmt.Sprintf("count=%d sum=%g buckets=%s", h.GetSampleCount(), h.GetSampleSum(), strings.Join(b, ","))
	}
	return fmt.Sprintf("%g", m.GetCounter().GetValue())
}
