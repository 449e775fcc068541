package gateprom_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/redisop"
)

// TestDocsListEveryMetric: the package doc and docs/operating.md name every
// metric the Observer exports, with its labels, and the values of the op and
// reason labels an operator writes alerts on. A metric renamed or a label
// added in the code and not in the docs fails here.
func TestDocsListEveryMetric(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(everySeries())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	pkgDoc := read(t, "doc.go")
	operating := read(t, "../../docs/operating.md")
	lines := map[string]string{} // metric name → its doc.go entry, continuation lines included
	var cur string
	for _, l := range strings.Split(pkgDoc, "\n") {
		l = strings.TrimPrefix(l, "//\t")
		if strings.HasPrefix(l, "retrygate_") {
			cur = l[:strings.IndexAny(l, "{ ")]
			lines[cur] = l
		} else if strings.HasPrefix(l, " ") && cur != "" {
			lines[cur] += l
		} else {
			cur = ""
		}
	}
	if len(mfs) != len(lines) {
		t.Errorf("doc.go lists %d metrics, the Observer exports %d", len(lines), len(mfs))
	}
	for _, mf := range mfs {
		name := mf.GetName()
		var labels []string
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			if lp.GetName() != "upstream" && lp.GetName() != "le" {
				labels = append(labels, lp.GetName())
			}
		}
		slices.Sort(labels)
		head, _, _ := strings.Cut(lines[name], " ")
		_, doc, _ := strings.Cut(strings.TrimSuffix(head, "}"), "{")
		documented := strings.FieldsFunc(doc, func(r rune) bool { return r == ',' })
		slices.Sort(documented)
		if !slices.Equal(documented, labels) {
			t.Errorf("doc.go: %s has labels %v, documented %v (%q)", name, labels, documented, lines[name])
		}
		if !strings.Contains(operating, "| `"+name+"`") {
			t.Errorf("docs/operating.md: no row for %s", name)
		}
	}
	values := map[string][]string{
		"retrygate_redis_errors_total": redisop.All[:],
		"retrygate_warnings_total": {gate.WarnEvictionPolicy, gate.WarnUnchecked, gate.WarnNoPersistence,
			gate.WarnServerVersion, gate.WarnMultiMaster, gate.WarnScriptsNotAtomic, gate.WarnScriptsUnchecked,
			gate.WarnNoMaxmemory, gate.WarnMemoryNearlyFull, gate.WarnSettleUnwritten,
			gate.WarnPermanentWave, gate.WarnWaitPolling},
	}
	for name, vs := range values {
		words := strings.FieldsFunc(lines[name], func(r rune) bool { return strings.ContainsRune(" |,;:()", r) })
		for _, v := range vs {
			if !slices.Contains(words, v) {
				t.Errorf("doc.go: %s does not list %q", name, v)
			}
		}
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
