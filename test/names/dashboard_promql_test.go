package names

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// grafanaVars stand in for the dashboard's template variables: every one is used in a regex
// matcher (=~"$namespace"), where "All" is ".*"; $__rate_interval is a range.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "5m",
	"$namespace", ".*", "$model", ".*", "$channel", ".*", "$provider", ".*",
)

var labelValuesRE = regexp.MustCompile(`^label_values\((.*),\s*([a-z_]+)\)$`)

// promQL returns the dashboard's queries as PromQL, with the variables substituted; a template
// variable's label_values(selector, label) becomes its selector.
func promQL(t *testing.T) []query {
	t.Helper()
	var out []query
	for _, q := range dashboardQueries(t, repoFile(t, "config", "monitoring", "grafana", "switchyard.json")) {
		expr := strings.TrimSpace(q.expr)
		if m := labelValuesRE.FindStringSubmatch(expr); m != nil {
			expr = m[1]
		}
		if strings.Contains(expr, "$") {
			expr = grafanaVars.Replace(expr)
		}
		if strings.Contains(expr, "$") {
			t.Errorf("%s: unknown variable left in %s", q.where, expr)
		}
		out = append(out, query{q.where, expr})
	}
	return out
}

// TestDashboardQueriesParse has promtool parse and lint every dashboard query (as recording rules).
func TestDashboardQueriesParse(t *testing.T) {
	bin := promtool(t)
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	seen := map[string]bool{}
	for _, q := range promQL(t) {
		if seen[q.expr] {
			continue // a variable's query and definition are the same text
		}
		seen[q.expr] = true
		rules = append(rules, rule{fmt.Sprintf("dashboard:query_%d", len(rules)), q.expr})
	}
	file, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.rules.yaml"), file, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "check", "rules", "dashboard.rules.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules on the dashboard's queries: %v\n%s\n%s", err, out, file)
	}
}

// TestDashboardPhaseEncoding evaluates the state timeline's query with promtool: the one-hot
// phase series become the phase's severity (the value mappings' keys), and the worst replica wins.
func TestDashboardPhaseEncoding(t *testing.T) {
	bin := promtool(t)
	b, err := os.ReadFile(repoFile(t, "config", "monitoring", "grafana", "switchyard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Type        string `json:"type"`
			FieldConfig struct {
				Defaults struct {
					Mappings []struct {
						Options map[string]struct {
							Text string `json:"text"`
						} `json:"options"`
					} `json:"mappings"`
				} `json:"defaults"`
			} `json:"fieldConfig"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var expr string
	code := map[string]string{} // phase -> value
	for _, p := range d.Panels {
		if p.Type != "state-timeline" {
			continue
		}
		expr = grafanaVars.Replace(p.Targets[0].Expr)
		for _, m := range p.FieldConfig.Defaults.Mappings {
			for v, o := range m.Options {
				code[o.Text] = v
			}
		}
	}
	phases := []string{"Healthy", "Degraded", "RateLimited", "Ejected", "Probing", "RampingUp", "Disabled"}
	if expr == "" || len(code) != len(phases) {
		t.Fatalf("state timeline query %q, mappings %v", expr, code)
	}
	// Channel a: replica 1 sees Ejected, replica 2 Probing -> Ejected (the worse). Channel b:
	// Healthy everywhere. Channel c: RampingUp.
	views := []struct{ pod, channel, phase string }{
		{"p1", "a", "Ejected"}, {"p2", "a", "Probing"}, {"p1", "b", "Healthy"}, {"p2", "b", "Healthy"}, {"p1", "c", "RampingUp"},
	}
	// The proxy exports only the current phase's series, at 1.
	var series []map[string]string
	for _, v := range views {
		series = append(series, map[string]string{
			"series": fmt.Sprintf(`switchyard_channel_phase{namespace="llm",pod=%q,channel=%q,model="gpt-4o",phase=%q}`, v.pod, v.channel, v.phase),
			"values": "1x5",
		})
	}
	sample := func(channel, phase string) map[string]any {
		v, err := strconv.ParseFloat(code[phase], 64)
		if err != nil {
			t.Fatalf("value mapping %q of %s: %v", code[phase], phase, err)
		}
		return map[string]any{"labels": fmt.Sprintf(`{channel=%q,model="gpt-4o",namespace="llm"}`, channel), "value": v}
	}
	tests := map[string]any{
		"evaluation_interval": "1m",
		"tests": []any{map[string]any{
			"interval":     "1m",
			"input_series": series,
			"promql_expr_test": []any{map[string]any{
				"expr":        expr,
				"eval_time":   "2m",
				"exp_samples": []any{sample("a", "Ejected"), sample("b", "Healthy"), sample("c", "RampingUp")},
			}},
		}},
	}
	file, err := yaml.Marshal(tests)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "phase.test.yaml"), file, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "test", "rules", "phase.test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules on the phase query: %v\n%s", err, out)
	}
}
