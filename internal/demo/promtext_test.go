package demo

import (
	"math"
	"strings"
	"testing"
)

const exposition = `# HELP switchyard_requests_total Client requests by public model and final outcome class.
# TYPE switchyard_requests_total counter
switchyard_requests_total{model="gpt-4o",outcome="success"} 1204
switchyard_requests_total{model="gpt-4o",outcome="unavailable"} 2
switchyard_requests_total{model="gpt-4o-mini",outcome="success"} 797
switchyard_requests_total{model="unknown",outcome="model_not_found"} 1

# TYPE switchyard_failovers_total counter
switchyard_failovers_total{from_channel="provider-a",model="gpt-4o",reason="server_error",to_channel="provider-b"} 6
switchyard_failovers_total{from_channel="provider-a",model="gpt-4o-mini",reason="timeout",to_channel="provider-b"} 8
switchyard_upstream_duration_seconds_bucket{channel="provider-a",model="gpt-4o",le="+Inf"} 1.5e+03
switchyard_config_stale 0
odd_labels{a="with \"quotes\", a comma} and a \\ backslash",b="line\nbreak",} 3 1700000000000
weird_values{v="nan"} NaN
weird_values{v="inf"} +Inf
`

func TestParseMetrics(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 11 {
		t.Fatalf("got %d samples, want 11: %+v", len(m), m)
	}
	if got := m.Sum("switchyard_requests_total", nil); got != 2004 {
		t.Errorf("sum of requests = %v, want 2004", got)
	}
	if got := m.Sum("switchyard_requests_total", map[string]string{"outcome": "success"}); got != 2001 {
		t.Errorf("successes = %v, want 2001", got)
	}
	if got := m.Sum("switchyard_requests_total", map[string]string{"model": "gpt-4o", "outcome": "success"}); got != 1204 {
		t.Errorf("gpt-4o successes = %v, want 1204", got)
	}
	if got := m.Sum("switchyard_config_stale", nil); got != 0 {
		t.Errorf("stale = %v", got)
	}
	if got := m.Sum("switchyard_upstream_duration_seconds_bucket", map[string]string{"le": "+Inf"}); got != 1500 {
		t.Errorf("bucket = %v, want 1500", got)
	}
	by := m.SumBy("switchyard_failovers_total", nil, "from_channel", "reason")
	if by["provider-a|server_error"] != 6 || by["provider-a|timeout"] != 8 || len(by) != 2 {
		t.Errorf("failovers by from|reason = %v", by)
	}
	var odd Sample
	for _, s := range m {
		if s.Name == "odd_labels" {
			odd = s
		}
	}
	if odd.Labels["a"] != `with "quotes", a comma} and a \ backslash` || odd.Labels["b"] != "line\nbreak" || odd.Value != 3 {
		t.Errorf("escaped labels = %q, value %v", odd.Labels, odd.Value)
	}
	if v := m.Sum("weird_values", map[string]string{"v": "nan"}); !math.IsNaN(v) {
		t.Errorf("NaN = %v", v)
	}
	if v := m.Sum("weird_values", map[string]string{"v": "inf"}); !math.IsInf(v, 1) {
		t.Errorf("+Inf = %v", v)
	}
	if got := m.Sum("absent_metric", nil); got != 0 {
		t.Errorf("absent = %v", got)
	}
}

func TestParseMetricsRejectsMalformedLines(t *testing.T) {
	for _, line := range []string{
		`novalue`,
		`m{a="1"}`,
		`m{a="1"} abc`,
		`m{a=1} 2`,
		`m{a="1" b="2"} 2`,
		`m{a="unterminated} 2`,
		`m 1 2 3`,
	} {
		if _, err := ParseMetrics(strings.NewReader(line + "\n")); err == nil {
			t.Errorf("%q parsed without an error", line)
		}
	}
}
