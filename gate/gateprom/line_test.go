package gateprom_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateprom"
)

// The line's metrics count admitted and refused calls and their waits per
// class and tenant, and keep the tenant label bounded: "" unless
// TenantLabel maps tenants, at most MaxTenantLabels values then "other",
// never a value Prometheus cannot take.
func TestLineMetricsPerClassAndTenant(t *testing.T) {
	ctx := context.Background()
	events := []gate.Event{
		{Kind: gate.EventAcquired, Upstream: "u", Priority: gate.PriorityInteractive, Tenant: "acme", Waited: 20 * time.Millisecond},
		{Kind: gate.EventAcquired, Upstream: "u", Priority: gate.PriorityInteractive, Tenant: "acme"},
		{Kind: gate.EventAcquired, Upstream: "u", Priority: gate.PriorityBatch, Tenant: "globex", Waited: 3 * time.Second},
		{Kind: gate.EventRefused, Upstream: "u", Priority: gate.PriorityBatch, Tenant: "initech", State: gate.UpstreamCooling, Waited: 10 * time.Second},
		{Kind: gate.EventRefused, Upstream: "u", Priority: gate.PriorityBatch, Tenant: "bad\xff", State: gate.UpstreamCooling},
		{Kind: gate.EventRefused, Upstream: "u", Priority: gate.PriorityBatch, Tenant: "shadowed", State: gate.UpstreamCooling, Shadow: true},
	}
	for _, tc := range []struct {
		name string
		opts gateprom.Options
		exp  string
	}{
		{"default: no tenant label", gateprom.Options{}, `
retrygate_line_calls_total{class="batch",outcome="acquired",tenant="",upstream="u"} 1
retrygate_line_calls_total{class="batch",outcome="refused",tenant="",upstream="u"} 2
retrygate_line_calls_total{class="interactive",outcome="acquired",tenant="",upstream="u"} 2
`},
		{"tenants mapped to plans", gateprom.Options{TenantLabel: func(t string) string {
			if t == "acme" {
				return "pro"
			}
			return ""
		}}, `
retrygate_line_calls_total{class="batch",outcome="acquired",tenant="",upstream="u"} 1
retrygate_line_calls_total{class="batch",outcome="refused",tenant="",upstream="u"} 2
retrygate_line_calls_total{class="interactive",outcome="acquired",tenant="pro",upstream="u"} 2
`},
		{"at most two labels", gateprom.Options{TenantLabel: func(t string) string { return t }, MaxTenantLabels: 2}, `
retrygate_line_calls_total{class="batch",outcome="acquired",tenant="globex",upstream="u"} 1
retrygate_line_calls_total{class="batch",outcome="refused",tenant="other",upstream="u"} 2
retrygate_line_calls_total{class="interactive",outcome="acquired",tenant="acme",upstream="u"} 2
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := gateprom.New(tc.opts)
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(obs)
			for _, e := range events {
				obs.Observe(ctx, e)
			}
			exp := "# HELP retrygate_line_calls_total Calls admitted (outcome=acquired) or refused, by class (gate.WithPriority: batch, normal, interactive or its number) and tenant (Options.TenantLabel).\n# TYPE retrygate_line_calls_total counter" + tc.exp
			if err := testutil.GatherAndCompare(reg, strings.NewReader(exp), "retrygate_line_calls_total"); err != nil {
				t.Error(err)
			}
		})
	}

	// The waits: p50/p99 per class come from this histogram, one series
	// per class, tenant and outcome.
	obs := gateprom.New(gateprom.Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)
	for _, e := range events {
		obs.Observe(ctx, e)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, mf := range mfs {
		if mf.GetName() != "retrygate_line_wait_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var k []string
			for _, lp := range m.GetLabel() {
				k = append(k, lp.GetValue())
			}
			h := m.GetHistogram()
			got[strings.Join(k, ",")] = fmt.Sprintf("%d %.3f", h.GetSampleCount(), h.GetSampleSum())
		}
	}
	exp := map[string]string{ // class, outcome, tenant, upstream
		"batch,acquired,,u":       "1 3.000",
		"batch,refused,,u":        "2 10.000",
		"interactive,acquired,,u": "2 0.020",
	}
	if !maps.Equal(exp, got) {
		t.Errorf("waits: exp %v, got %v", exp, got)
	}
}
