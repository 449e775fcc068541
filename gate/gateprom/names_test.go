package gateprom_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateprom"
)

// The sample alert rules and the operating guide must only name metrics
// this package exports.
func TestDocsNameRealMetrics(t *testing.T) {
	obs := gateprom.New(gateprom.Options{})
	for k := gate.EventAcquired; k <= gate.EventWarning; k++ {
		obs.Observe(context.Background(), gate.Event{Kind: k, Local: true, Held: time.Second, Cooldown: time.Second})
	}
	obs.Observe(context.Background(), gate.Event{Kind: gate.EventSettled, Err: gate.ErrNotOwned})
	obs.Observe(context.Background(), gate.Event{Kind: gate.EventRefused, State: gate.UpstreamCooling,
		Budget: gate.UpstreamBudget{Spent: true, Requests: gate.BudgetLimit{Reported: true}}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, mf := range mfs {
		known[mf.GetName()] = true
		if strings.HasSuffix(mf.GetName(), "_seconds") {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				known[mf.GetName()+s] = true
			}
		}
	}
	if exp, got := 15, len(mfs); exp != got {
		t.Fatalf("metric families: exp %d, got %d", exp, got)
	}
	name := regexp.MustCompile(`retrygate_[a-z_]+`)
	for _, path := range []string{"../../examples/alerts/retrygate-alerts.yml", "../../docs/operating.md", "doc.go"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, n := range name.FindAllString(string(b), -1) {
			found++
			if !known[n] {
				t.Errorf("%s names %s, which gateprom does not export", path, n)
			}
		}
		if found == 0 {
			t.Errorf("%s names no metric", path)
		}
	}
}
