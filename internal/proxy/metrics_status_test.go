package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// TestObserveStatusGauges: the health gauges follow every change of score, traffic and phase
// (exactly one phase series, the current phase's, at 1: none for the other phases), also after a
// key left the configuration and came back.
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
		if len(phases) != 1 {
			t.Fatalf("%d phase series, want 1: %v", len(phases), phases)
		}
		if got, ok := phases[labels+"/"+phase.String()]; !ok || got != 1 {
			t.Fatalf("phases %v, want %s = 1", phases, phase)
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

// TestHealthGaugesFollowEveryKey: Step publishes only the keys whose status may have changed
// (engine.Updates), and still every key's gauges and every model's panic gauge say what the
// engine says, through ejection, panic routing, probes and the ramp, a rate limit that heals
// without traffic, and after a reload.
func TestHealthGaugesFollowEveryKey(t *testing.T) {
	r := newRig(t, rigConfig{})
	check := func(when string) {
		t.Helper()
		fams, err := r.srv.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				key := f.GetName()
				for _, l := range m.GetLabel() {
					key += "/" + l.GetName() + "=" + l.GetValue()
				}
				got[key] = gaugeValue(m)
			}
		}
		want := map[string]float64{}
		panicked := map[string]bool{}
		for _, st := range r.srv.Engine().Status(r.clock.Now()) {
			ns, name := routing.SplitChannelID(st.Channel)
			labels := "/channel=" + name + "/model=" + st.Model + "/namespace=" + ns
			want["switchyard_channel_health_score"+labels] = float64(st.Score)
			want["switchyard_channel_traffic_percent"+labels] = float64(st.TrafficPercent)
			want["switchyard_channel_phase"+labels+"/phase="+st.Phase.String()] = 1
			panicked[st.Model] = panicked[st.Model] || st.Panic
		}
		for m, p := range panicked {
			v := 0.0
			if p {
				v = 1
			}
			want["switchyard_model_panic_routing/model="+m+"/namespace="] = v
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s: %s = %v (present %v), want %v", when, k, g, ok, v)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok && strings.HasPrefix(k, "switchyard_channel_phase/") {
				t.Errorf("%s: %s is exported, but is not the key's phase", when, k)
			}
		}
	}
	r.step(0)
	check("at start")
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 500})
	r.B.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 500})
	for range 8 {
		r.post("/v1/chat/completions", chat("gpt-4o", false))
	}
	r.post("/v1/chat/completions", chat("gpt-4o-mini", false))
	// A answers one 429 on gpt-4.1 (Retry-After longer than the proxy waits: B answers). A's
	// share of gpt-4.1 then heals with time alone, no request touching it.
	r.A.SetBehavior("gpt-4.1", mockprovider.Behavior{Mode: mockprovider.ModeRateLimit, RetryAfter: 5})
	r.post("/v1/chat/completions", chat("gpt-4.1", false))
	r.A.SetBehavior("gpt-4.1", mockprovider.Behavior{})
	r.step(0)
	check("both ejected")
	r.B.SetBehavior("gpt-4o", mockprovider.Behavior{})
	r.post("/v1/chat/completions", chat("gpt-4o", false)) // panic routing
	r.step(0)
	check("panic routing")
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{})
	for i := range 60 {
		r.step(10 * time.Second) // cooldown, probes, the ramp; the other models' windows drain
		for range 5 {
			r.post("/v1/chat/completions", chat("gpt-4o", false))
		}
		r.step(0)
		check(fmt.Sprintf("after %ds", (i+1)*10))
	}
	if p := r.phase("chan-b", "gpt-4o"); p != "RampingUp" && p != "Healthy" {
		t.Fatalf("B should be back by now, is %s", p)
	}
	r.write(rigConfig{channelA: "disabled: true"})
	if err := r.src.Load(r.srv); err != nil {
		t.Fatal(err)
	}
	check("after a reload that disables A")
	r.step(time.Second)
	check("a step after the reload")
}

// TestScrapeDuringPublishing is for the race detector: scrapes copy the health gauges while
// Step and reloads publish them.
func TestScrapeDuringPublishing(t *testing.T) {
	r := newRig(t, rigConfig{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50 {
			if _, err := r.srv.Registry().Gather(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := range 50 {
		r.post("/v1/chat/completions", chat("gpt-4o", false))
		r.step(time.Second)
		if i%10 == 5 {
			cfg := rigConfig{}
			if i%20 == 5 {
				cfg.channelB = "disabled: true"
			}
			r.write(cfg)
			if err := r.src.Load(r.srv); err != nil {
				t.Fatal(err)
			}
		}
	}
	<-done
}
