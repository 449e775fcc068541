package alerts

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/retrygate/retrygate/gate/gateprom"
)

const (
	rulesFile = "retrygate-alerts.yml"
	testsFile = "retrygate-alerts_test.yml"
	// requireEnv turns a skip for a missing promtool into a failure.
	requireEnv = "RETRYGATE_REQUIRE_PROMTOOL"
)

// promtool returns the path of promtool, or skips (fails under
// RETRYGATE_REQUIRE_PROMTOOL=1) when it is missing.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv(requireEnv) == "1" {
			t.Fatalf("promtool not found on PATH, and %s=1", requireEnv)
		}
		t.Skipf("promtool not found on PATH (Debian: apt-get install prometheus); set %s=1 to fail instead", requireEnv)
	}
	return p
}

func runPromtool(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestCheckRules(t *testing.T) {
	out, err := runPromtool(t, ".", "check", "rules", rulesFile)
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if exp := "SUCCESS: 8 rules found"; !strings.Contains(out, exp) {
		t.Fatalf("promtool check rules: exp %q in\n%s", exp, out)
	}
}

func TestRulesFireAndClear(t *testing.T) {
	out, err := runPromtool(t, ".", "test", "rules", testsFile)
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestBrokenRulesFail puts back the expressions issue 13 found broken and
// checks the promtool tests catch each one.
func TestBrokenRulesFail(t *testing.T) {
	for _, tc := range []struct{ alert, expr string }{
		// Different label sets on the two sides of "+": always empty.
		{"RetrygateNotOwnedRatio", `sum by (upstream) (rate(retrygate_not_owned_total[10m])) / sum by (upstream) (rate(retrygate_settles_total[10m]) + rate(retrygate_not_owned_total[10m])) > 0.01`},
		// Without the "or": an upstream whose every settle was rejected.
		{"RetrygateNotOwnedRatio", `sum by (upstream) (rate(retrygate_not_owned_total[10m])) / (sum by (upstream) (rate(retrygate_settles_total[10m])) + sum by (upstream) (rate(retrygate_not_owned_total[10m]))) > 0.01`},
		// increase() alone misses a series' first sample at 1.
		{"RetrygateUpstreamPaused", `sum by (upstream, reason) (increase(retrygate_upstream_transitions_total{state="paused"}[15m])) > 0`},
		{"RetrygateRedisEvictionPolicy", `sum by (reason) (increase(retrygate_warnings_total{reason="maxmemory_policy_evicts"}[1h])) > 0`},
		{"RetrygateRedisRefused", `sum by (upstream, op) (increase(retrygate_redis_errors_total{cause="refused"}[5m])) > 0`},
		{"RetrygateSettleUnwritten", `sum by (upstream) (increase(retrygate_warnings_total{reason="settle_unwritten"}[15m])) > 0`},
		// Every class: a batch flood waiting behind people would page.
		{"RetrygateInteractiveWaitLong", `histogram_quantile(0.99, sum by (upstream, le) (rate(retrygate_line_wait_seconds_bucket{outcome="acquired"}[15m]))) > 10`},
	} {
		t.Run(tc.alert, func(t *testing.T) {
			dir := t.TempDir()
			rules, err := os.ReadFile(rulesFile)
			if err != nil {
				t.Fatal(err)
			}
			broken, err := replaceExpr(string(rules), tc.alert, tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			tests, err := os.ReadFile(testsFile)
			if err != nil {
				t.Fatal(err)
			}
			for name, data := range map[string]string{rulesFile: broken, testsFile: string(tests)} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if out, err := runPromtool(t, dir, "check", "rules", rulesFile); err != nil {
				t.Fatalf("the broken rule does not even parse: %v\n%s", err, out)
			}
			out, err := runPromtool(t, dir, "test", "rules", testsFile)
			if err == nil {
				t.Fatalf("promtool test rules passed with the broken %s expression", tc.alert)
			}
			if !strings.Contains(out, "alertname: "+tc.alert) {
				t.Fatalf("promtool test rules failed, but not on %s:\n%s", tc.alert, out)
			}
		})
	}
}

// replaceExpr replaces the expr of one alert in a rules file, keeping the
// rest byte for byte.
func replaceExpr(rules, alert, expr string) (string, error) {
	lines := strings.Split(rules, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == "- alert: "+alert })
	if start < 0 {
		return "", os.ErrNotExist
	}
	for i := start + 1; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " ")
		if !strings.HasPrefix(trimmed, "expr:") {
			continue
		}
		indent := len(lines[i]) - len(trimmed)
		end := i + 1
		for end < len(lines) && (strings.TrimSpace(lines[end]) == "" || len(lines[end])-len(strings.TrimLeft(lines[end], " ")) > indent) {
			end++
		}
		pad := strings.Repeat(" ", indent)
		repl := []string{pad + "expr: |", pad + "  " + expr}
		return strings.Join(slices.Concat(lines[:i], repl, lines[end:]), "\n"), nil
	}
	return "", os.ErrNotExist
}

// TestEveryAlertFiresAndNot checks the promtool tests expect each alert of
// the rules file to fire at least once and stay silent at least once.
func TestEveryAlertFiresAndNot(t *testing.T) {
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(testsFile)
	if err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert: (\S+)\s*$`).FindAllStringSubmatch(string(rules), -1) {
		alerts = append(alerts, m[1])
	}
	if exp, got := 8, len(alerts); exp != got {
		t.Fatalf("alerts in %s: exp %d, got %d (%v)", rulesFile, exp, got, alerts)
	}
	fires, silent := map[string]int{}, map[string]int{}
	current := ""
	for _, line := range strings.Split(string(tests), "\n") {
		l := strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(l, "alertname: "); ok {
			current = name
		}
		if v, ok := strings.CutPrefix(l, "exp_alerts:"); ok {
			if current == "" {
				t.Fatalf("exp_alerts before any alertname in %s", testsFile)
			}
			if strings.TrimSpace(v) == "[]" {
				silent[current]++
			} else {
				fires[current]++
			}
			current = ""
		}
	}
	for _, a := range alerts {
		if fires[a] == 0 || silent[a] == 0 {
			t.Errorf("%s: %d firing and %d silent cases in %s; exp at least one of each", a, fires[a], silent[a], testsFile)
		}
		delete(fires, a)
		delete(silent, a)
	}
	for a := range fires {
		t.Errorf("%s tests alert %s, which %s does not define", testsFile, a, rulesFile)
	}
}

// TestSeriesShapedLikeGateprom checks every input series of the promtool
// tests against what gateprom exports: a metric it has, with exactly that
// metric's labels (plus the scrape's instance and job).
func TestSeriesShapedLikeGateprom(t *testing.T) {
	exported := gatepromLabels(t)
	tests, err := os.ReadFile(testsFile)
	if err != nil {
		t.Fatal(err)
	}
	seriesRe := regexp.MustCompile(`(?m)^\s*- series: '([a-z_]+)\{([^}]*)\}'\s*$`)
	labelRe := regexp.MustCompile(`([a-z_]+)="[^"]*"`)
	matches := seriesRe.FindAllStringSubmatch(string(tests), -1)
	if n := strings.Count(string(tests), "- series:"); n != len(matches) || n == 0 {
		t.Fatalf("parsed %d of %d series lines", len(matches), n)
	}
	for _, m := range matches {
		name := m[1]
		want, ok := exported[name]
		if base, hist := strings.CutSuffix(name, "_bucket"); hist && !ok {
			// A histogram's buckets: its labels and le.
			if want, ok = exported[base]; ok {
				want = append(slices.Clone(want), "le")
				slices.Sort(want)
			}
		}
		if !ok {
			t.Errorf("series %s: gateprom exports no such metric", name)
			continue
		}
		var got []string
		for _, l := range labelRe.FindAllStringSubmatch(m[2], -1) {
			if l[1] != "instance" && l[1] != "job" {
				got = append(got, l[1])
			}
		}
		slices.Sort(got)
		if !slices.Equal(want, got) {
			t.Errorf("series %s{%s}: labels %v, gateprom exports %v", name, m[2], got, want)
		}
	}
}

// gatepromLabels returns each metric gateprom exports, with the sorted
// names of its labels, read from the descriptions its collectors publish.
func gatepromLabels(t *testing.T) map[string][]string {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		gateprom.New(gateprom.Options{}).Describe(ch)
		close(ch)
	}()
	descRe := regexp.MustCompile(`^Desc\{fqName: "([a-z_]+)", .*variableLabels: \{([a-z_,()]*)\}\}$`)
	out := map[string][]string{}
	for d := range ch {
		m := descRe.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		labels := strings.Split(m[2], ",")
		slices.Sort(labels)
		out[m[1]] = labels
	}
	if len(out) == 0 {
		t.Fatal("gateprom describes no metric")
	}
	return out
}
