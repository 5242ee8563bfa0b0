// Package names keeps the names that the deployment and monitoring files share with the code
// honest: every metric (and every label in a selector or grouping) the Grafana dashboard and the
// alerts use is one internal/proxy registers, every command-line flag the chart and config/ pass to
// `switchyard proxy` and `switchyard controller` is one the binary defines, and the alerts pass
// promtool's checks and their unit tests (config/monitoring/tests).
package names

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/switchyard-io/switchyard/internal/controller"
	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/testenv"
)

// metric is one registered metric family.
type metric struct {
	labels    []string
	histogram bool
}

var descRE = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

// recorder is a Registerer that remembers every collector registered on it.
type recorder struct {
	reg        *prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.reg.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// registered returns the metrics proxy.NewMetrics registers and the controller's own, read from the descriptors of the
// collectors it registers (so a vector that was never touched still counts).
func registered(t *testing.T) map[string]metric {
	t.Helper()
	rec := &recorder{reg: prometheus.NewRegistry()}
	proxy.NewMetrics(rec)
	rec.MustRegister(controller.Collectors()...)
	out := map[string]metric{}
	// Collectors that serve their series at scrape time from state of their own (the health
	// gauges) cannot be filled here; the proxy's tests check their exposition.
	atScrape := map[string]bool{}
	for _, c := range rec.collectors {
		var custom bool
		switch c.(type) {
		case *prometheus.CounterVec, *prometheus.GaugeVec, *prometheus.HistogramVec, prometheus.Metric:
		default:
			custom = true
		}
		_, isHist := c.(*prometheus.HistogramVec)
		if _, ok := c.(prometheus.Histogram); ok {
			isHist = true
		}
		ch := make(chan *prometheus.Desc, 4)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			sm := descRE.FindStringSubmatch(d.String())
			if sm == nil {
				t.Fatalf("cannot read descriptor %s", d)
			}
			var labels []string
			for _, l := range strings.Split(sm[2], ",") {
				if l = strings.TrimSpace(l); l != "" {
					labels = append(labels, l)
				}
			}
			out[sm[1]] = metric{labels: labels, histogram: isHist}
			atScrape[sm[1]] = custom
		}
	}
	if len(out) == 0 {
		t.Fatal("proxy.NewMetrics registered nothing")
	}
	// Cross-check against what the registry gathers, once every vector has a child: the
	// descriptors and the exposition agree on names.
	for _, c := range rec.collectors {
		switch c := c.(type) {
		case *prometheus.CounterVec:
			c.WithLabelValues(fill(out, c)...).Inc()
		case *prometheus.GaugeVec:
			c.WithLabelValues(fill(out, c)...).Set(1)
		case *prometheus.HistogramVec:
			c.WithLabelValues(fill(out, c)...).Observe(1)
		}
	}
	mfs, err := rec.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	gathered := map[string]bool{}
	for _, mf := range mfs {
		gathered[mf.GetName()] = true
	}
	for name := range out {
		if !gathered[name] && !atScrape[name] {
			t.Errorf("%s has a descriptor but is not gathered", name)
		}
	}
	return out
}

// fill returns one placeholder value per variable label of a vector.
func fill(known map[string]metric, c prometheus.Collector) []string {
	ch := make(chan *prometheus.Desc, 1)
	go func() { c.Describe(ch); close(ch) }()
	d := <-ch
	for range ch {
	}
	sm := descRE.FindStringSubmatch(d.String())
	vals := make([]string, len(known[sm[1]].labels))
	for i := range vals {
		vals[i] = "x"
	}
	return vals
}

// Labels Prometheus adds to every series it scrapes through the ServiceMonitors, and le of histogram buckets.
var targetLabels = []string{"namespace", "pod", "job", "instance", "service", "container", "endpoint"}

// query is one PromQL expression and where it comes from.
type query struct {
	where, expr string
}

func repoFile(t *testing.T, parts ...string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, parts...)...)
}

// dashboardQueries returns every expression of a Grafana dashboard: panel targets (rows' nested
// panels included) and template variable queries.
func dashboardQueries(t *testing.T, path string) []query {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s is not JSON: %v", path, err)
	}
	var out []query
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				w := where
				if title, ok := x["title"].(string); ok {
					w = where + " panel " + quote(title)
				}
				if name, ok := x["name"].(string); ok && k == "query" {
					w = where + " variable " + name
				}
				if s, ok := c.(string); ok && (k == "expr" || k == "query" || k == "definition") {
					out = append(out, query{w, s})
					continue
				}
				walk(w, c)
			}
		case []any:
			for _, c := range x {
				walk(where, c)
			}
		}
	}
	walk(filepath.Base(path), d)
	if len(out) == 0 {
		t.Fatalf("%s has no queries", path)
	}
	return out
}

func quote(s string) string { return `"` + s + `"` }

// ruleQueries returns the expressions of a PrometheusRule's alerts.
func ruleQueries(t *testing.T, path string) []query {
	t.Helper()
	var pr struct {
		Spec struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Alert string `json:"alert"`
					Expr  string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &pr); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []query
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			out = append(out, query{filepath.Base(path) + " alert " + r.Alert, r.Expr})
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no rules", path)
	}
	return out
}

var (
	metricRE   = regexp.MustCompile(`\bswitchyard_[a-z_]+\b`)
	selectorRE = regexp.MustCompile(`\b(switchyard_[a-z_]+)\s*\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	groupingRE = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
)

// base maps a series name to its metric family: histogram series carry _bucket, _sum and _count.
func base(name string, reg map[string]metric) (string, bool) {
	if _, ok := reg[name]; ok {
		return name, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suffix); ok {
			if m, ok := reg[b]; ok && m.histogram {
				return b, true
			}
		}
	}
	return "", false
}

// checkQueries reports every switchyard_ name that is not registered, every label matcher on a
// metric that lacks that label, and every grouping label that none of the expression's metrics
// has. It returns the metric families used.
func checkQueries(t *testing.T, reg map[string]metric, queries []query) map[string]bool {
	t.Helper()
	used, problems := problemsIn(reg, queries)
	for _, p := range problems {
		t.Error(p)
	}
	return used
}

func problemsIn(reg map[string]metric, queries []query) (used map[string]bool, problems []string) {
	used = map[string]bool{}
	for _, q := range queries {
		exprLabels := map[string]bool{"le": true}
		for _, l := range targetLabels {
			exprLabels[l] = true
		}
		for _, name := range metricRE.FindAllString(q.expr, -1) {
			b, ok := base(name, reg)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: metric %s is not registered by internal/proxy (NewMetrics) or internal/controller (Collectors)", q.where, name))
				continue
			}
			used[b] = true
			for _, l := range reg[b].labels {
				exprLabels[l] = true
			}
		}
		for _, sel := range selectorRE.FindAllStringSubmatch(q.expr, -1) {
			b, ok := base(sel[1], reg)
			if !ok {
				continue
			}
			for _, mm := range matcherRE.FindAllStringSubmatch(sel[2], -1) {
				l := mm[1]
				if !slices.Contains(reg[b].labels, l) && !slices.Contains(targetLabels, l) && !(l == "le" && reg[b].histogram) {
					problems = append(problems, fmt.Sprintf("%s: %s has no label %q (it has %v)", q.where, b, l, reg[b].labels))
				}
			}
		}
		if !strings.Contains(q.expr, "switchyard_") {
			continue
		}
		for _, g := range groupingRE.FindAllStringSubmatch(q.expr, -1) {
			for _, l := range strings.Split(g[2], ",") {
				if l = strings.TrimSpace(l); l != "" && !exprLabels[l] {
					problems = append(problems, fmt.Sprintf("%s: %s (%s) names label %q, which none of the expression's metrics has", q.where, g[1], g[2], l))
				}
			}
		}
	}
	return used, problems
}

// The checker itself catches the mistakes it is there for (so a green run means something).
func TestCheckerCatchesMistakes(t *testing.T) {
	reg := registered(t)
	for _, tc := range []struct{ expr, want string }{
		{`rate(switchyard_request_total[5m])`, "switchyard_request_total is not registered"},
		{`rate(switchyard_requests_total_bucket[5m])`, "switchyard_requests_total_bucket is not registered"},
		{`switchyard_channel_phase{state="Ejected"}`, `no label "state"`},
		{`sum by (from) (rate(switchyard_failovers_total[5m]))`, `names label "from"`},
		{`histogram_quantile(0.9, sum by (le, provider) (rate(switchyard_upstream_ttft_seconds_bucket[5m])))`, `names label "provider"`},
	} {
		_, problems := problemsIn(reg, []query{{"case", tc.expr}})
		if len(problems) != 1 || !strings.Contains(problems[0], tc.want) {
			t.Errorf("%s: problems %q, want one about %s", tc.expr, problems, tc.want)
		}
	}
	for _, ok := range []string{
		`histogram_quantile(0.95, sum by (le, channel, model) (rate(switchyard_upstream_duration_seconds_bucket{namespace=~"$namespace"}[5m])))`,
		`sum by (namespace, pod) (switchyard_config_stale)`,
		`up{job="switchyard-proxy"} == 0`,
	} {
		if _, problems := problemsIn(reg, []query{{"case", ok}}); len(problems) > 0 {
			t.Errorf("%s: unexpected problems %q", ok, problems)
		}
	}
}

func TestDashboardMetricsExist(t *testing.T) {
	reg := registered(t)
	for _, path := range []string{
		repoFile(t, "config", "monitoring", "grafana", "switchyard.json"),
		repoFile(t, "charts", "switchyard", "files", "dashboards", "switchyard.json"),
	} {
		used := checkQueries(t, reg, dashboardQueries(t, path))
		// The dashboard shows every metric the proxy exports.
		var missing []string
		for name := range reg {
			if !used[name] {
				missing = append(missing, name)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s shows no panel for %v", path, missing)
		}
	}
}

func TestAlertMetricsExist(t *testing.T) {
	reg := registered(t)
	for _, path := range []string{
		repoFile(t, "config", "monitoring", "prometheusrule.yaml"),
		repoFile(t, "charts", "switchyard", "files", "monitoring", "prometheusrule.yaml"),
	} {
		checkQueries(t, reg, ruleQueries(t, path))
	}
	// The rule unit tests feed series by name: those must be real too (or `up`).
	b, err := os.ReadFile(repoFile(t, "config", "monitoring", "tests", "alerts.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			Name        string `json:"name"`
			InputSeries []struct {
				Series string `json:"series"`
			} `json:"input_series"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	var qs []query
	for _, tc := range tests.Tests {
		for _, s := range tc.InputSeries {
			qs = append(qs, query{"alerts.test.yaml " + quote(tc.Name), s.Series})
		}
	}
	checkQueries(t, reg, qs)
}

// TestDashboardShape checks what Grafana and its sidecar need: a uid, the template variables the
// panels use, one Prometheus data source variable, unique panel ids.
func TestDashboardShape(t *testing.T) {
	b, err := os.ReadFile(repoFile(t, "config", "monitoring", "grafana", "switchyard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string `json:"uid"`
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
				Type string `json:"type"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q", d.UID, d.Title)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	for _, want := range []string{"namespace", "model", "channel"} {
		if vars[want] != "query" {
			t.Errorf("dashboard lacks the %s template variable (has %v)", want, vars)
		}
	}
	if vars["datasource"] != "datasource" {
		t.Errorf("dashboard lacks a datasource variable")
	}
	ids := map[int]bool{}
	types := map[string]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		types[p.Type] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the datasource variable", p.Title)
		}
		for _, tg := range p.Targets {
			for _, ref := range regexp.MustCompile(`\$([a-z_]+)`).FindAllStringSubmatch(tg.Expr, -1) {
				if _, ok := vars[ref[1]]; !ok && !strings.HasPrefix(ref[1], "__") {
					t.Errorf("panel %q uses $%s, which is no template variable", p.Title, ref[1])
				}
			}
		}
	}
	if !types["state-timeline"] {
		t.Errorf("dashboard has no state timeline for the phases")
	}
}

// flagsOf returns the flags a subcommand defines, parsed from its -h output (flag.PrintDefaults).
func flagsOf(t *testing.T, bin, sub string) map[string]bool {
	t.Helper()
	out, err := runCombined(bin, sub, "-h")
	if err != nil {
		t.Fatalf("%s %s -h: %v\n%s", bin, sub, err, out)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-zA-Z0-9][a-zA-Z0-9-]*)\b`).FindAllStringSubmatch(out, -1) {
		flags[m[1]] = true
	}
	if len(flags) < 3 {
		t.Fatalf("%s %s -h lists too few flags:\n%s", bin, sub, out)
	}
	return flags
}

var flagArgRE = regexp.MustCompile(`(?m)^\s*-\s+"?--([a-z0-9][a-z0-9-]*)`)

// argsIn returns the --flags listed as YAML list items in a file (a template or a manifest).
func argsIn(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range flagArgRE.FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

func TestDeploymentFlagsExist(t *testing.T) {
	bin := buildSwitchyard(t)
	known := map[string]map[string]bool{
		"proxy":      flagsOf(t, bin, "proxy"),
		"controller": flagsOf(t, bin, "controller"),
	}
	files := []struct {
		sub, path string
	}{
		{"proxy", repoFile(t, "charts", "switchyard", "templates", "proxy", "deployment.yaml")},
		{"controller", repoFile(t, "charts", "switchyard", "templates", "controller", "deployment.yaml")},
		{"proxy", repoFile(t, "config", "proxy", "deployment.yaml")},
		{"controller", repoFile(t, "config", "manager", "manager.yaml")},
	}
	for _, f := range files {
		args := argsIn(t, f.path)
		if len(args) < 3 {
			t.Errorf("%s: found only %v; has the args list moved?", f.path, args)
		}
		for _, a := range args {
			if !known[f.sub][a] {
				t.Errorf("%s passes --%s, which `switchyard %s` does not define", f.path, a, f.sub)
			}
		}
	}
	// Flags in the values (defaults, comments with examples) and in the all-options test values.
	for _, path := range []string{
		repoFile(t, "charts", "switchyard", "values.yaml"),
		repoFile(t, "test", "helm", "testdata", "all-options.yaml"),
	} {
		var vals struct {
			Controller struct {
				ExtraArgs []string `json:"extraArgs"`
			} `json:"controller"`
			Proxy struct {
				ExtraArgs []string `json:"extraArgs"`
			} `json:"proxy"`
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &vals); err != nil {
			t.Fatal(err)
		}
		check := func(sub string, args []string) {
			for _, a := range args {
				name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				if !known[sub][name] {
					t.Errorf("%s: %s.extraArgs has %s, which `switchyard %s` does not define", path, sub, a, sub)
				}
			}
		}
		check("controller", vals.Controller.ExtraArgs)
		check("proxy", vals.Proxy.ExtraArgs)
		// Examples in comments: `--flag` inside the controller: and proxy: sections.
		section := ""
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, " ") && strings.HasSuffix(line, ":") {
				section = strings.TrimSuffix(line, ":")
			}
			if section != "proxy" && section != "controller" || !strings.Contains(line, "#") {
				continue
			}
			_, comment, _ := strings.Cut(line, "#")
			for _, m := range regexp.MustCompile(`--([a-z0-9][a-z0-9-]*)`).FindAllStringSubmatch(comment, -1) {
				if !known[section][m[1]] {
					t.Errorf("%s: a comment in %s: names --%s, which `switchyard %s` does not define", path, section, m[1], section)
				}
			}
		}
	}
}
