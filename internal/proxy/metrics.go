package proxy

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Metrics are the proxy's Prometheus metrics, registered on an injected registry. Label sets are
// bounded by the configuration (channels × models), never by request content.
type Metrics struct {
	Requests         *prometheus.CounterVec
	Attempts         *prometheus.CounterVec
	Duration         *prometheus.HistogramVec
	TTFT             *prometheus.HistogramVec
	Failovers        *prometheus.CounterVec
	HealthScore      *prometheus.GaugeVec
	Phase            *prometheus.GaugeVec
	Traffic          *prometheus.GaugeVec
	Ejections        *prometheus.CounterVec
	BudgetExhausted  *prometheus.CounterVec
	Tokens           *prometheus.CounterVec
	Panic            *prometheus.GaugeVec
	ConfigLoads      *prometheus.CounterVec
	ConfigLastLoaded prometheus.Gauge
	ConfigStale      prometheus.Gauge
	Rejected         *prometheus.CounterVec
	PIIMasked        *prometheus.CounterVec
	InFlight         prometheus.GaugeFunc
	BodyBytes        prometheus.GaugeFunc
	// UpstreamOpen and UpstreamIdle read the upstream transport's connection counts (connStats).
	UpstreamOpen, UpstreamIdle prometheus.GaugeFunc

	connStats atomic.Pointer[func() (open, idle int)]

	statusMu sync.Mutex
	status   map[health.Key]*statusSeries // the health gauges of each channel×model, resolved once
}

// statusSeries holds one channel×model's health gauges and the values last set on them, so that a
// sweep over thousands of keys neither hashes label values nor writes what did not change.
type statusSeries struct {
	score, traffic prometheus.Gauge
	phases         [len(allPhases)]prometheus.Gauge
	lastScore      int
	lastTraffic    int
	lastPhase      health.Phase
}

// latencyBuckets span 5 ms to 2 min: LLM calls are slow, and the tail is what matters.
var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 4, 8, 15, 30, 60, 120}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_requests_total", Help: "Client requests by public model (and the namespace of the policy that routes it) and final outcome class.",
		}, []string{"namespace", "model", "outcome"}),
		Attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_upstream_attempts_total", Help: "Upstream attempts by channel, provider, model and outcome class.",
		}, []string{"namespace", "channel", "provider", "model", "outcome"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchyard_upstream_duration_seconds", Help: "Duration of upstream attempts, to the last byte.", Buckets: latencyBuckets,
		}, []string{"namespace", "channel", "model"}),
		TTFT: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchyard_upstream_ttft_seconds", Help: "Time to the first streamed event (or to headers when not streaming).", Buckets: latencyBuckets,
		}, []string{"namespace", "channel", "model"}),
		Failovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_failovers_total", Help: "Attempts moved from one channel to another, by the reason the first failed (namespace is to_channel's; from_channel is namespace/name when it is another).",
		}, []string{"namespace", "model", "from_channel", "to_channel", "reason"}),
		HealthScore: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_channel_health_score", Help: "Health score 0-100 of a channel×model.",
		}, []string{"namespace", "channel", "model"}),
		Phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_channel_phase", Help: "1 for the current phase of a channel×model, 0 for the others.",
		}, []string{"namespace", "channel", "model", "phase"}),
		Traffic: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_channel_traffic_percent", Help: "Share of its normal traffic a channel×model may take (ramp, rate limit).",
		}, []string{"namespace", "channel", "model"}),
		Ejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_ejections_total", Help: "Ejections of a channel×model by the rule that fired.",
		}, []string{"namespace", "channel", "model", "reason"}),
		BudgetExhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_retry_budget_exhausted_total", Help: "Retries refused because the model's retry budget was spent.",
		}, []string{"namespace", "model"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_tokens_total", Help: "Tokens reported by upstream usage, by type (prompt, completion).",
		}, []string{"namespace", "channel", "model", "type"}),
		Panic: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_model_panic_routing", Help: "1 while a model has no routable channel and panic routing is in use.",
		}, []string{"namespace", "model"}),
		ConfigLoads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_config_loads_total", Help: "Config loads by result (success, failure).",
		}, []string{"result"}),
		ConfigLastLoaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_config_last_success_timestamp_seconds", Help: "Unix time of the last successful config load.",
		}),
		ConfigStale: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_config_stale", Help: "1 while the last config load failed and an older config keeps serving.",
		}),
	}
	m.Rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_rejected_requests_total",
		Help: "Client requests refused before any upstream attempt, by reason (overloaded, body_too_large, body_timeout, invalid_request, pii_detected, ...).",
	}, []string{"reason"})
	m.PIIMasked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_pii_masked_total",
		Help: "Values of personal data masked in prompts before they went upstream, by policy and detector (RoutingPolicy spec.pii, mode Mask).",
	}, []string{"namespace", "policy", "detector"})
	m.status = map[health.Key]*statusSeries{}
	// HTTP/1.1 upstream: one connection per request in flight. On a cloud's outbound NAT each
	// holds a port, so their number is worth watching.
	m.UpstreamOpen = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchyard_upstream_connections_open", Help: "Connections to upstream providers, in use or idle.",
	}, func() float64 { o, _ := m.conns(); return float64(o) })
	m.UpstreamIdle = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchyard_upstream_connections_idle", Help: "Idle connections to upstream providers, kept for reuse.",
	}, func() float64 { _, i := m.conns(); return float64(i) })
	reg.MustRegister(m.Requests, m.Attempts, m.Duration, m.TTFT, m.Failovers, m.HealthScore, m.Phase, m.Traffic,
		m.Ejections, m.BudgetExhausted, m.Tokens, m.Panic, m.ConfigLoads, m.ConfigLastLoaded, m.ConfigStale,
		m.UpstreamOpen, m.UpstreamIdle, m.Rejected, m.PIIMasked)
	return m
}

// conns reads the upstream connection counts; 0 until a transport that counts them is set.
func (m *Metrics) conns() (open, idle int) {
	if f := m.connStats.Load(); f != nil {
		return (*f)()
	}
	return 0, 0
}

var allPhases = [...]health.Phase{health.PhaseHealthy, health.PhaseDegraded, health.PhaseRateLimited, health.PhaseEjected,
	health.PhaseProbing, health.PhaseRampingUp, health.PhaseDisabled}

// observeStatus publishes the engine's view of one channel×model.
func (m *Metrics) observeStatus(s health.Status) {
	m.statusMu.Lock()
	defer m.statusMu.Unlock()
	ss := m.status[s.Key]
	if ss == nil {
		ns, name := routing.SplitChannelID(s.Channel)
		ss = &statusSeries{
			score:   m.HealthScore.WithLabelValues(ns, name, s.Model),
			traffic: m.Traffic.WithLabelValues(ns, name, s.Model),
		}
		for i, p := range allPhases {
			ss.phases[i] = m.Phase.WithLabelValues(ns, name, s.Model, p.String())
			ss.phases[i].Set(0)
		}
		ss.score.Set(float64(s.Score))
		ss.traffic.Set(float64(s.TrafficPercent))
		ss.lastScore, ss.lastTraffic, ss.lastPhase = s.Score, s.TrafficPercent, s.Phase
		ss.phases[phaseIndex(s.Phase)].Set(1)
		m.status[s.Key] = ss
		return
	}
	if s.Score != ss.lastScore {
		ss.score.Set(float64(s.Score))
		ss.lastScore = s.Score
	}
	if s.TrafficPercent != ss.lastTraffic {
		ss.traffic.Set(float64(s.TrafficPercent))
		ss.lastTraffic = s.TrafficPercent
	}
	if s.Phase != ss.lastPhase {
		ss.phases[phaseIndex(ss.lastPhase)].Set(0)
		ss.phases[phaseIndex(s.Phase)].Set(1)
		ss.lastPhase = s.Phase
	}
}

func phaseIndex(p health.Phase) int {
	for i, q := range allPhases {
		if q == p {
			return i
		}
	}
	return 0
}

// forget removes the series of a channel×model that left the configuration.
func (m *Metrics) forget(k health.Key) {
	m.statusMu.Lock()
	delete(m.status, k)
	m.statusMu.Unlock()
	ns, name := routing.SplitChannelID(k.Channel)
	m.HealthScore.DeleteLabelValues(ns, name, k.Model)
	m.Traffic.DeleteLabelValues(ns, name, k.Model)
	for _, p := range allPhases {
		m.Phase.DeleteLabelValues(ns, name, k.Model, p.String())
	}
}
