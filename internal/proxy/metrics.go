package proxy

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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
	Recoveries       *prometheus.CounterVec
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
	// UpstreamOpen and UpstreamIdle read the upstream transport's connection counts (transport.Transport.ConnStats).
	UpstreamOpen, UpstreamIdle prometheus.GaugeFunc
	// Clients are the GatewayClient metrics (clientauth.go).
	Clients *clientMetrics

	connStats atomic.Pointer[func() (open, idle int)]

	// The health gauges of every channel×model (switchyard_channel_health_score,
	// switchyard_channel_traffic_percent, switchyard_channel_phase) are plain values here, turned
	// into series only when scraped (healthCollector). As one GaugeVec child per series, 5,000
	// keys were 45,000 gauges of a dozen small heap objects each: three quarters of the objects
	// of a proxy at scale, which every garbage collection cycle had to mark (BenchmarkGCAtScale).
	statusMu sync.Mutex
	status   map[health.Key]statusSeries
	scrape   []statusSeries // Collect's copy of status, reused (under scrapeMu)
	scrapeMu sync.Mutex
	health   *healthCollector
}

// statusSeries is one channel×model's health gauges: its labels and the values last published.
type statusSeries struct {
	namespace, channel, model string
	score, traffic            int
	phase                     health.Phase
	dryRun                    bool // the key's policy is in DryRun: dryRunPhase is its would-be phase
	dryRunPhase               health.Phase
}

// latencyBuckets span 5 ms to 2 min: LLM calls are slow, and the tail is what matters.
var latencyBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 4, 8, 15, 30, 60, 120}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_requests_total", Help: "Client requests by public model (and the namespace of the policy that routes it), final outcome class and rollout cohort (policy: the policy's failover and ejection; listed: the listed channels in order, spec.rollout).",
		}, []string{"namespace", "model", "outcome", "cohort"}),
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
		Recoveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_stream_continuations_total", Help: "Streams that broke on a channel after text reached the client, by how they ended: continued (on a prefill-capable channel), spliced (a deterministic regeneration matched the text sent) or gave_up (in-band error). namespace and channel are the channel the stream broke on.",
		}, []string{"namespace", "channel", "model", "result"}),
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
	m.status = map[health.Key]statusSeries{}
	m.health = &healthCollector{m: m,
		score: prometheus.NewDesc("switchyard_channel_health_score", "Health score 0-100 of a channel×model.",
			[]string{"namespace", "channel", "model"}, nil),
		phase: prometheus.NewDesc("switchyard_channel_phase", "1, with the current phase of a channel×model as its phase label; no series for the other phases.",
			[]string{"namespace", "channel", "model", "phase"}, nil),
		dryRunPhase: prometheus.NewDesc("switchyard_channel_dryrun_phase", "For a channel×model of a DryRun policy: 1, with the phase the policy would have set as its phase label (routing ignores it); no series for the other phases.",
			[]string{"namespace", "channel", "model", "phase"}, nil),
		traffic: prometheus.NewDesc("switchyard_channel_traffic_percent", "Share of its normal traffic a channel×model may take (ramp, rate limit).",
			[]string{"namespace", "channel", "model"}, nil),
	}
	// HTTP/1.1 upstream: one connection per request in flight. On a cloud's outbound NAT each
	// holds a port, so their number is worth watching.
	m.UpstreamOpen = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchyard_upstream_connections_open", Help: "Connections to upstream providers, in use or idle.",
	}, func() float64 { o, _ := m.conns(); return float64(o) })
	m.UpstreamIdle = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchyard_upstream_connections_idle", Help: "Idle connections to upstream providers, kept for reuse.",
	}, func() float64 { _, i := m.conns(); return float64(i) })
	reg.MustRegister(m.Requests, m.Attempts, m.Duration, m.TTFT, m.Failovers, m.Recoveries, m.health,
		m.Ejections, m.BudgetExhausted, m.Tokens, m.Panic, m.ConfigLoads, m.ConfigLastLoaded, m.ConfigStale,
		m.UpstreamOpen, m.UpstreamIdle, m.Rejected, m.PIIMasked)
	m.Clients = newClientMetrics(reg)
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
	ss, ok := m.status[s.Key]
	if !ok {
		ss.namespace, ss.channel = routing.SplitChannelID(s.Channel)
		ss.model = s.Model
	}
	ss.score, ss.traffic, ss.phase = s.Score, s.TrafficPercent, s.Phase
	ss.dryRun, ss.dryRunPhase = s.DryRun, s.DryRunPhase
	m.status[s.Key] = ss
}

// forget removes the series of a channel×model that left the configuration.
func (m *Metrics) forget(k health.Key) {
	m.statusMu.Lock()
	delete(m.status, k)
	m.statusMu.Unlock()
}

// healthCollector serves the health gauges of Metrics.status at each scrape.
type healthCollector struct {
	m                                  *Metrics
	score, phase, traffic, dryRunPhase *prometheus.Desc
}

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.score
	ch <- c.phase
	ch <- c.traffic
	ch <- c.dryRunPhase
}

// Collect sends every key's score, traffic and phase: one phase series, the current phase's, at
// 1. A series per phase (0 for the others) was 7 of a key's 9 series, 35,000 of an idle proxy's
// 46,047 at 5,000 keys; "is it Ejected" reads the same from the one series (phase="Ejected" == 1),
// and a phase that ends leaves its series to Prometheus' staleness handling (docs/fleet.md,
// "Metrics at scale"). It copies the values first, so that a scrape never holds up the
// publishing of the next ones.
func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.scrapeMu.Lock()
	defer m.scrapeMu.Unlock()
	m.statusMu.Lock()
	all := m.scrape[:0]
	for _, ss := range m.status {
		all = append(all, ss)
	}
	m.statusMu.Unlock()
	for _, ss := range all {
		// One allocation per key for its three series; they share its three label pairs.
		k := &keySamples{vals: [3]string{ss.channel, ss.model, ss.namespace}}
		for i := range k.lp {
			k.lp[i].Name, k.lp[i].Value = &labelNames[i], &k.vals[i]
			k.pairs[i] = &k.lp[i]
		}
		base := k.pairs[:3:3]
		k.samples[0] = healthSample{desc: c.score, value: float64(ss.score), labels: base}
		k.samples[1] = healthSample{desc: c.traffic, value: float64(ss.traffic), labels: base}
		l := k.pairs[3:7:7]
		copy(l, base)
		l[3] = phaseLabel(ss.phase)
		k.samples[2] = healthSample{desc: c.phase, value: 1, labels: l}
		for i := range k.samples {
			ch <- &k.samples[i]
		}
		if ss.dryRun {
			// A few keys at most (the policies being tried out): one more allocation each.
			d := &dryRunSamples{}
			copy(d.pairs[:3], base)
			d.pairs[3] = phaseLabel(ss.dryRunPhase)
			d.sample = healthSample{desc: c.dryRunPhase, value: 1, labels: d.pairs[:]}
			ch <- &d.sample
		}
	}
	clear(all) // no strings of removed keys kept until the next scrape
	m.scrape = all[:0]
}

// labelNames are the health gauges' label names in the order a series carries them (sorted, as
// the registry wants them): channel, model, namespace, then phase.
var labelNames = [4]string{"channel", "model", "namespace", "phase"}

// phaseLabels are the phase label pairs, one per phase, shared by every key's phase series.
var phaseLabels = func() (out [len(allPhases)]*dto.LabelPair) {
	for i, p := range allPhases {
		out[i] = &dto.LabelPair{Name: &labelNames[3], Value: new(p.String())}
	}
	return out
}()

// phaseLabel is the shared label pair of phase p.
func phaseLabel(p health.Phase) *dto.LabelPair {
	for i, q := range allPhases {
		if q == p {
			return phaseLabels[i]
		}
	}
	return &dto.LabelPair{Name: &labelNames[3], Value: new(p.String())} // unreachable: every phase is listed
}

// keySamples are one key's health series for one scrape.
type keySamples struct {
	vals    [3]string
	lp      [3]dto.LabelPair
	pairs   [3 + 4]*dto.LabelPair // score and traffic: the first three; the phase: four
	samples [3]healthSample       // score, traffic, phase
}

// dryRunSamples is one DryRun key's would-be phase series for one scrape.
type dryRunSamples struct {
	pairs  [4]*dto.LabelPair
	sample healthSample
}

// healthSample is one health series at a scrape (a prometheus.Metric); the registry treats what
// Write hands it as immutable, so the label pairs can be shared.
type healthSample struct {
	desc   *prometheus.Desc
	value  float64
	labels []*dto.LabelPair
}

func (s *healthSample) Desc() *prometheus.Desc { return s.desc }

func (s *healthSample) Write(out *dto.Metric) error {
	out.Label = s.labels
	out.Gauge = &dto.Gauge{Value: &s.value}
	return nil
}
