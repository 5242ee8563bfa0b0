package names

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
)

const runbookURL = "https://github.com/switchyard-io/switchyard#on-call-runbook"

func runCombined(bin string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

var switchyardBin struct {
	once sync.Once
	path string
	err  error
}

// buildSwitchyard builds ./cmd/switchyard once per test binary.
func buildSwitchyard(t *testing.T) string {
	t.Helper()
	switchyardBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "switchyard-names-")
		if err != nil {
			switchyardBin.err = err
			return
		}
		p := filepath.Join(dir, "switchyard")
		cmd := exec.Command("go", "build", "-o", p, "./cmd/switchyard")
		cmd.Dir = repoFile(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			switchyardBin.err = fmt.Errorf("go build ./cmd/switchyard: %v\n%s", err, out)
			return
		}
		switchyardBin.path = p
	})
	if switchyardBin.err != nil {
		t.Fatal(switchyardBin.err)
	}
	return switchyardBin.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if switchyardBin.path != "" {
		os.RemoveAll(filepath.Dir(switchyardBin.path))
	}
	os.Exit(code)
}

// promtool finds the pinned promtool hack/tools.sh builds ($PROMTOOL wins). It builds nothing.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	out, err := exec.Command("bash", repoFile(t, "hack", "tools.sh"), "--check", "promtool").Output()
	if err != nil {
		t.Fatal("promtool is missing: run `bash hack/tools.sh promtool` (builds the pinned version once from the Go module proxy and caches it; minutes when cold) or `make tools` or set $PROMTOOL")
	}
	return strings.TrimSpace(string(out))
}

type alertRule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleSpec struct {
	Groups []struct {
		Name  string      `json:"name"`
		Rules []alertRule `json:"rules"`
	} `json:"groups"`
}

func readRules(t *testing.T) (ruleSpec, []byte) {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, "config", "monitoring", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       ruleSpec
	}
	if err := yaml.Unmarshal(b, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Fatalf("config/monitoring/prometheusrule.yaml is a %s %s", pr.APIVersion, pr.Kind)
	}
	// promtool reads Prometheus rule files: the object's spec is one.
	var raw struct {
		Spec any `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	file, err := yaml.Marshal(raw.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return pr.Spec, file
}

// Every alert carries what on-call needs: a severity, a summary, a description and the runbook.
func TestAlertsAreActionable(t *testing.T) {
	spec, _ := readRules(t)
	seen := map[string]bool{}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if seen[r.Alert] {
				t.Errorf("alert %s defined twice", r.Alert)
			}
			seen[r.Alert] = true
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
			}
			if r.Annotations["runbook_url"] != runbookURL {
				t.Errorf("%s: runbook_url %q, want %s", r.Alert, r.Annotations["runbook_url"], runbookURL)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs a summary and a description", r.Alert)
			}
			if r.For == "" {
				t.Errorf("%s: no `for`: one bad scrape would page", r.Alert)
			}
		}
	}
	// The alerts the issue asks for.
	for _, want := range []string{
		"SwitchyardChannelEjectedTooLong", "SwitchyardModelPanicRouting", "SwitchyardHighFailoverRate",
		"SwitchyardRetryBudgetExhausted", "SwitchyardConfigStale", "SwitchyardProxyUnreachable",
	} {
		if !seen[want] {
			t.Errorf("alert %s is missing", want)
		}
	}
}

// TestAlertRulesPromtool runs `promtool check rules` on the alerts and `promtool test rules` on
// config/monitoring/tests/alerts.test.yaml. Each alert must have a unit test.
func TestAlertRulesPromtool(t *testing.T) {
	bin := promtool(t)
	spec, file := readRules(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "switchyard.rules.yaml"), file, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(repoFile(t, "config", "monitoring", "tests", "alerts.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "check", "rules", "--lint=all", "--lint-fatal", "switchyard.rules.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	cmd = exec.Command(bin, "test", "rules", "alerts.test.yaml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("promtool test rules:\n%s", out)

	var parsed struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(tests, &parsed); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, tc := range parsed.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && !fires[r.Alert] {
				t.Errorf("alert %s has no unit test in which it fires", r.Alert)
			}
		}
	}
}
