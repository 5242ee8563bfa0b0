package proxy

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/switchyard-io/switchyard/internal/health"
)

// TestObserveStatusGauges: the health gauges follow every change of score, traffic and phase
// (exactly one phase series at 1), also after a key left the configuration and came back.
func TestObserveStatusGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	// A channel is namespace/name; its series carry the two as the namespace and channel labels.
	k := health.Key{Channel: "team-a/chan-a", Model: "gpt-4o"}
	labels := "/chan-a/gpt-4o/team-a" // channel, model, namespace: Gather sorts labels by name
	// series returns the gauges of a family by their labels joined with "/".
	series := func(name string) map[string]float64 {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, f := range fams {
			if f.GetName() != name {
				continue
			}
			for _, mt := range f.GetMetric() {
				key := ""
				for _, l := range mt.GetLabel() {
					key += "/" + l.GetValue()
				}
				out[key] = gaugeValue(mt)
			}
		}
		return out
	}
	check := func(phase health.Phase, score, traffic int) {
		t.Helper()
		phases := series("switchyard_channel_phase")
		if len(phases) != len(allPhases) {
			t.Fatalf("%d phase series, want %d: %v", len(phases), len(allPhases), phases)
		}
		for _, p := range allPhases {
			want := 0.0
			if p == phase {
				want = 1
			}
			if got := phases[labels+"/"+p.String()]; got != want {
				t.Fatalf("phase %s = %v, want %v", p, got, want)
			}
		}
		if got := series("switchyard_channel_health_score")[labels]; got != float64(score) {
			t.Fatalf("score = %v, want %d", got, score)
		}
		if got := series("switchyard_channel_traffic_percent")[labels]; got != float64(traffic) {
			t.Fatalf("traffic = %v, want %d", got, traffic)
		}
	}
	steps := []health.Status{
		{Key: k, Phase: health.PhaseHealthy, Score: 100, TrafficPercent: 100},
		{Key: k, Phase: health.PhaseHealthy, Score: 100, TrafficPercent: 100},
		{Key: k, Phase: health.PhaseDegraded, Score: 42, TrafficPercent: 42},
		{Key: k, Phase: health.PhaseEjected, Score: 10, TrafficPercent: 0},
		{Key: k, Phase: health.PhaseRampingUp, Score: 10, TrafficPercent: 5},
	}
	for _, st := range steps {
		m.observeStatus(st)
		check(st.Phase, st.Score, st.TrafficPercent)
	}
	m.forget(k)
	if n := len(series("switchyard_channel_phase")) + len(series("switchyard_channel_health_score")) + len(series("switchyard_channel_traffic_percent")); n != 0 {
		t.Fatalf("%d series left after forget", n)
	}
	m.observeStatus(health.Status{Key: k, Phase: health.PhaseRampingUp, Score: 10, TrafficPercent: 5})
	check(health.PhaseRampingUp, 10, 5)
}

func gaugeValue(m *dto.Metric) float64 { return m.GetGauge().GetValue() }
