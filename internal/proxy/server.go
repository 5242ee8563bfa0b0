// Package proxy is Switchyard's data plane: an OpenAI-compatible HTTP gateway that sends each
// request to the best routable provider channel and fails over transparently. It asks the health
// engine (internal/health) which channels may take traffic and reports every attempt's outcome to
// it; it never decides health itself. The upstream URL and key only ever come from the compiled
// routing table, never from the request, and the client's own credentials are never forwarded.
package proxy

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/audit"
	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/fleet"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/proxy/clients"
	"github.com/switchyard-io/switchyard/internal/proxy/piimask"
	"github.com/switchyard-io/switchyard/internal/proxy/transport"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Clock tells the time. The proxy's health decisions use it, so tests can move time.
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Defaults of the data plane's limits (see Options).
const (
	DefaultMaxBodyBytes         = 4 << 20
	DefaultMaxBufferedBodyBytes = 128 << 20
	DefaultMaxInFlight          = 1024
	DefaultBodyReadTimeout      = 30 * time.Second
	DefaultClientWriteTimeout   = 30 * time.Second
)

// Options configure a Server.
type Options struct {
	// MaxBodyBytes bounds one client request body (default 4 MiB, DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxBufferedBodyBytes bounds the request bodies held in memory at once, across requests
	// (default 128 MiB): beyond it a request is refused with 503 and Retry-After, so a flood of
	// large or stalled bodies cannot exhaust the process's memory.
	MaxBufferedBodyBytes int64
	// MaxInFlight bounds the API requests being served at once (default 1024); beyond it, 503
	// with Retry-After.
	MaxInFlight int
	// BodyReadTimeout bounds reading a request body (default 30s): a client that stalls mid-body
	// gets 408 and its buffer is freed.
	BodyReadTimeout time.Duration
	// ClientWriteTimeout bounds each write to the client (default 30s): a client that stops
	// reading gives up its request, and the upstream connection, instead of holding them.
	ClientWriteTimeout time.Duration
	// RequestIDHeader, when set, names a request header trusted to carry the request id (set by
	// a front proxy); otherwise the proxy makes every request id itself.
	RequestIDHeader string
	// AccessLog receives one JSON line per upstream attempt; nil disables it.
	AccessLog io.Writer
	// Logger for operational logs (never request bodies or keys).
	Logger *slog.Logger
	// Registry for the metrics; a fresh one when nil.
	Registry *prometheus.Registry
	// Clock; the real one when nil. The health engine, the failover planner (deadlines, retry
	// budget) and, when it is also a Sleeper, the planner's waits run on it.
	Clock Clock
	// Rand gives the failover planner its randomness (channel draws, back-off jitter) for one
	// request, by its request id; math/rand/v2's global source when nil. A test that gives replay
	// the same function gets the same draws for every request, whatever else the proxy served.
	Rand func(requestID string) failover.Rand
	// Transport, when set, carries every upstream call, those of channels with spec.tls included
	// (their CA bundle and client certificate are then the transport's business): the seam for
	// tests and benchmarks to put an in-memory or pre-trusted upstream behind every channel. When
	// nil, a tuned http.Transport carries the channels without spec.tls and each TLS client
	// configuration gets its own (tlstransport.go).
	Transport http.RoundTripper
	// Replica names this process on the admin API (default: the hostname).
	Replica string
	// JournalSize is the number of health events kept for /admin/v1/events (default 1024).
	JournalSize int
	// RequireClientKey refuses every request without a GatewayClient key (401), even while the
	// config has no GatewayClient. Without it the proxy requires keys only once a client exists.
	RequireClientKey bool
	// Audit receives one line per API request (clientauth.go); nil disables it.
	Audit *audit.Log
	// AuditRequired says when the proxy refuses requests (503 audit_unavailable, /readyz 503)
	// while Audit cannot be written: by default while client keys are required.
	AuditRequired AuditRequirement
	// AuthFailuresPerSecond is the rate at which a source address (IPv4, or IPv6 /64) may fail
	// the key check after a burst of 20 (clients.Throttle); beyond it, 429 too_many_auth_failures.
	// 0: clients.DefaultAuthFailuresPerSecond (2); negative: not throttled.
	AuthFailuresPerSecond float64
	// Fleet connects the replica to a fleet store (--fleet-redis); nil: it judges alone.
	Fleet *FleetOptions
}

// Server is the proxy. Its data-plane Handler and AdminHandler are served on separate ports.
type Server struct {
	opts      Options
	log       *slog.Logger
	clock     Clock
	rand      func(requestID string) failover.Rand // nil: failover.GlobalRand
	engine    *health.Engine
	metrics   *Metrics
	registry  *prometheus.Registry
	transport http.RoundTripper
	channelTr transport.Channels // of the channels with spec.tls; unused with Options.Transport
	// injected: Options.Transport was given, and carries the TLS channels too.
	injected  bool
	accessLog *accessLog
	observers []attemptObserver // the effects of a finished attempt, in order (observer.go)
	bootID    string
	clients   *clientsState // client keys, limits and the audit log (clientauth.go)
	fleet     *fleet.Syncer // the fleet exchange (fleet.go); nil without a fleet store
	fleetPeer *fleetPeer

	cfg     atomic.Pointer[config]
	cfgMu   sync.Mutex // serialises Apply
	loadMu  sync.Mutex
	load    adminapi.ConfigState
	budgets sync.Map // policy key -> *failover.Budget, kept across reloads
	// rollouts holds the cohorts' figures of the policies being rolled out (rollout.go).
	rollouts sync.Map // policy key -> *rolloutStats, kept across reloads
	// routeStates pools the per-request routing state (handler.go).
	routeStates sync.Pool

	draining  atomic.Bool
	inFlight  atomic.Int64 // API requests being served
	bodyBytes atomic.Int64 // request body buffers held, in bytes
	probeWG   sync.WaitGroup
	lastSeq   atomic.Uint64 // journal events already turned into metrics
	eventsMu  sync.Mutex
	apiPaths  sync.Map // health.Key -> the API path of its last successful request, for probes
	answered  sync.Map // health.Key -> *atomic.Uint64, answers completed (see answeredCounter)

	// publishStatus's state (under cfgMu): the statuses of one round, the keys last seen panic
	// routed and how many per model, and the models whose panic gauge is to be set.
	statusScratch []health.Status
	panicKeys     map[health.Key]bool
	panicModels   map[string]int
	panicTouched  map[string]bool
}

// config is one compiled table plus the indexes the request path needs. It is immutable once
// published, so a reload never disturbs a request in flight.
type config struct {
	table    *routing.Table
	channels map[string]*routing.Channel
	models   map[string]*modelRoute
	keys     []health.Key // every channel×model the engine was configured with
	redact   *redactor    // removes this table's provider keys from upstream-derived text
	// transports are the upstream transports of the channels with TLS settings, by channel ID.
	transports map[string]http.RoundTripper
	auth       *clients.Index // the table's GatewayClients by key hash
	// adapters are the bedrock and vertex channels' wire adapters, by channel ID (adapters.go).
	adapters map[string]*channelAdapter
}

// modelRoute is everything needed to route one public model: the planner's view of it and the
// proxy's own.
type modelRoute struct {
	failover.Model
	pii *piimask.Route // the policy's masking, shared by its models; nil when off
}

// withDefaults is opts with every unset field at its default.
func (opts Options) withDefaults() Options {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxBufferedBodyBytes <= 0 {
		opts.MaxBufferedBodyBytes = DefaultMaxBufferedBodyBytes
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.BodyReadTimeout <= 0 {
		opts.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if opts.ClientWriteTimeout <= 0 {
		opts.ClientWriteTimeout = DefaultClientWriteTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	if opts.Transport == nil {
		opts.Transport = transport.Default()
	}
	if opts.Replica == "" {
		opts.Replica, _ = os.Hostname()
	}
	if opts.JournalSize <= 0 {
		opts.JournalSize = 1024
	}
	if opts.AuthFailuresPerSecond == 0 {
		opts.AuthFailuresPerSecond = clients.DefaultAuthFailuresPerSecond
	}
	return opts
}

// New creates a proxy with no configuration: it answers 503 until Apply succeeds.
func New(opts Options) *Server {
	injected := opts.Transport != nil // it carries the TLS channels too
	opts = opts.withDefaults()
	b := make([]byte, 8)
	_, _ = crand.Read(b)
	s := &Server{
		opts:         opts,
		log:          opts.Logger,
		clock:        opts.Clock,
		rand:         opts.Rand,
		engine:       health.NewEngine(opts.JournalSize),
		registry:     opts.Registry,
		metrics:      NewMetrics(opts.Registry),
		transport:    opts.Transport,
		injected:     injected,
		accessLog:    newAccessLog(opts.AccessLog),
		bootID:       hex.EncodeToString(b),
		panicKeys:    map[health.Key]bool{},
		panicModels:  map[string]int{},
		panicTouched: map[string]bool{},
	}
	s.registerServerMetrics()
	s.clients = newClientsState(s)
	s.fleet = s.newFleet()
	s.observers = s.attemptObservers()
	if cs, ok := opts.Transport.(interface{ ConnStats() (open, idle int) }); ok {
		f := func() (open, idle int) {
			o, i := cs.ConnStats()
			co, ci := s.channelTr.ConnStats()
			return o + co, i + ci
		}
		s.metrics.connStats.Store(&f)
	}
	return s
}

// registerServerMetrics registers the runtime's and the process's collectors and the gauges
// that read the server's own counters.
func (s *Server) registerServerMetrics() {
	reg := s.opts.Registry
	// The runtime's and the process's own figures (heap, goroutines, RSS, open files) beside the
	// gateway's: the first thing to look at when a replica runs out of memory or file descriptors.
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			s.log.Warn("Failed to register a metrics collector", "error", err.Error())
		}
	}
	s.metrics.InFlight = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchyard_requests_in_flight", Help: "API requests being served (bounded by --max-in-flight).",
	}, func() float64 { return float64(s.inFlight.Load()) })
	s.metrics.BodyBytes = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchyard_request_body_bytes_buffered", Help: "Bytes of client request bodies held in memory (bounded by --max-buffered-body-bytes).",
	}, func() float64 { return float64(s.bodyBytes.Load()) })
	reg.MustRegister(s.metrics.InFlight, s.metrics.BodyBytes)
}

// Engine exposes the health engine (admin API, tests).
func (s *Server) Engine() *health.Engine { return s.engine }

// Registry is the Prometheus registry the metrics live on.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Apply publishes a compiled table. In-flight requests finish on the table they started with.
// Health state of channel×models that remain is kept.
func (s *Server) Apply(t *routing.Table, source string) { s.apply(t, source, nil, nil) }

// ApplyRejected publishes t, the last good table with the operator overrides of a config that
// was rejected with err, together with that rejection: no reader sees the override without the
// error, nor switchyard_config_stale at 0, in between.
func (s *Server) ApplyRejected(t *routing.Table, source string, err error, problems []routing.Problem) {
	s.apply(t, source, err, problems)
}

func (s *Server) apply(t *routing.Table, source string, rejected error, problems []routing.Problem) {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	now := s.clock.Now()
	c := &config{table: t, channels: map[string]*routing.Channel{}, models: map[string]*modelRoute{}}
	c.redact = redactorFor(t)
	s.loadChannels(c, t)
	var goneClients []*clients.Limiter
	c.auth, goneClients = s.clients.index(t)
	piiByPolicy := s.piiRoutes(t)
	routes := failover.BuildRoutes(failover.RouteInputs{Table: t, Budget: func(p *routing.Policy) *failover.Budget {
		b, _ := s.budgets.LoadOrStore(p.Namespace+"/"+p.Name, failover.NewBudget())
		return b.(*failover.Budget)
	}})
	for _, m := range routes.Models {
		c.models[m.Name] = &modelRoute{Model: m, pii: piiByPolicy[m.Policy]}
	}
	keep := make(map[health.Key]bool, len(routes.Targets))
	for _, tg := range routes.Targets {
		if !keep[tg.Key] {
			keep[tg.Key] = true
			c.keys = append(c.keys, tg.Key)
		}
	}
	old := s.cfg.Load()
	s.engine.Configure(now, routes.Targets)
	s.cfg.Store(c)
	// Series of keys that left the config go only after the new config is in place; publishStatus
	// runs under cfgMu too, so it cannot bring them back from the old config.
	s.clients.retire(goneClients)
	if old != nil {
		s.forgetGone(old, c, keep)
	}
	s.recordLoad(now, t, source, rejected, problems)
	s.publishStatus(now, true)
}

// redactorFor is the redactor of a table's secrets, as they may come back in an answer.
func redactorFor(t *routing.Table) *redactor {
	keys := make([]string, 0, len(t.Credentials))
	for name, k := range t.Credentials {
		// A TLS client certificate and its key never go to the provider, so it cannot echo them;
		// and redacting a PEM header's prefix would mangle any answer that shows a certificate.
		if strings.HasSuffix(name, "#"+routing.PartTLSCert) || strings.HasSuffix(name, "#"+routing.PartTLSKey) {
			continue
		}
		if ch, ok := t.Channel(name); ok && isCloud(ch.Provider) {
			keys = append(keys, adapterSecrets(ch.Provider, k.Reveal())...)
			continue
		}
		keys = append(keys, k.Reveal())
	}
	return newRedactor(keys)
}

// loadChannels gives c the table's channels, their adapters (a channel whose adapter did not
// change keeps it) and their TLS transports, and logs those that do not load.
func (s *Server) loadChannels(c *config, t *routing.Table) {
	for i := range t.Channels {
		c.channels[t.Channels[i].ID()] = &t.Channels[i]
	}
	var prevAdapters map[string]*channelAdapter
	if old := s.cfg.Load(); old != nil {
		prevAdapters = old.adapters
	}
	c.adapters = buildAdapters(t, prevAdapters)
	for id, ca := range c.adapters {
		if ca.err != nil {
			s.log.Error("A channel's adapter does not load; its attempts fail until it does", "channel", id, "error", ca.err.Error())
		}
	}
	if !s.injected { // an injected transport carries every channel: no c.transports for transportFor
		var tlsErrs []error
		c.transports, tlsErrs = s.channelTr.Update(t)
		for _, err := range tlsErrs {
			s.log.Error("A channel's TLS settings do not load; its attempts fail until they do", "error", err.Error())
		}
	}
}

// piiRoutes compiles the masking of each policy that has one; a policy whose detectors do not
// compile here gets a route that refuses its requests.
func (s *Server) piiRoutes(t *routing.Table) map[*routing.Policy]*piimask.Route {
	byPolicy := map[*routing.Policy]*piimask.Route{}
	for i := range t.Policies {
		p := &t.Policies[i]
		if p.PII == nil {
			continue
		}
		pr := piimask.NewRoute(p)
		if pr.Err() != nil {
			s.log.Error("Failed to compile a policy's PII detectors; its requests are refused", "policy", p.Namespace+"/"+p.Name, "error", pr.Err().Error())
		}
		byPolicy[p] = pr
	}
	return byPolicy
}

// forgetGone removes the series (and panic state) of the channel×models and models of old that
// c no longer has; keep is c's keys.
func (s *Server) forgetGone(old, c *config, keep map[health.Key]bool) {
	for _, k := range old.keys {
		if !keep[k] {
			s.metrics.forget(k)
			if s.panicKeys[k] {
				delete(s.panicKeys, k)
				s.panicModels[k.Model]--
			}
		}
	}
	for m, omr := range old.models {
		if nmr := c.models[m]; nmr == nil || nmr.Policy.Namespace != omr.Policy.Namespace {
			s.metrics.Panic.DeleteLabelValues(omr.Policy.Namespace, m)
		}
	}
}

// recordLoad records a config load in the admin API's load state, the config gauges and the
// log: rejected, when set, is why the source's newest config was refused, t then being the last
// good one.
func (s *Server) recordLoad(now time.Time, t *routing.Table, source string, rejected error, problems []routing.Problem) {
	loaded := adminapi.ConfigState{Source: source, Hash: t.Hash(), LoadedAt: now.UTC(), Generations: t.Generations()}
	logSource := source
	if rejected != nil {
		at := now.UTC()
		loaded.Error, loaded.ErrorAt, loaded.Problems = rejected.Error(), &at, problems
		logSource += " (last good config with the operator overrides)"
	}
	// The gauges first: whoever sees the new load state in the admin API finds them agreeing.
	s.metrics.ConfigLastLoaded.Set(float64(now.Unix()))
	if rejected != nil {
		s.metrics.ConfigStale.Set(1)
	} else {
		s.metrics.ConfigStale.Set(0)
	}
	s.loadMu.Lock()
	s.load = loaded
	s.loadMu.Unlock()
	s.metrics.ConfigLoads.WithLabelValues("success").Inc()
	s.log.Info("Loaded routing config", "source", logSource, "hash", t.Hash(), "channels", len(t.Channels), "policies", len(t.Policies))
	if rejected != nil {
		s.metrics.ConfigLoads.WithLabelValues("failure").Inc()
		s.log.Error("Rejected routing config; the last good config keeps serving", "source", source, "error", rejected.Error(), "problems", len(problems))
	}
}

// RejectConfig records a config that failed to load or compile. The last good table keeps serving.
func (s *Server) RejectConfig(source string, err error, problems []routing.Problem) {
	now := s.clock.Now().UTC()
	s.loadMu.Lock()
	// The gauge before the error the admin API shows, so the two agree for whoever reads them.
	if s.load.Hash != "" { // a last good config serves
		s.metrics.ConfigStale.Set(1)
	}
	s.load.Source = source
	s.load.Error = err.Error()
	s.load.ErrorAt = &now
	s.load.Problems = problems
	s.loadMu.Unlock()
	s.metrics.ConfigLoads.WithLabelValues("failure").Inc()
	s.log.Error("Rejected routing config; the last good config keeps serving", "source", source, "error", err.Error(), "problems", len(problems))
}

// Ready reports whether the proxy has a config, is not draining and may serve (its audit log
// is writable, when required).
func (s *Server) Ready() bool { return s.cfg.Load() != nil && !s.draining.Load() && !s.auditHeld() }

// Drain marks the proxy as shutting down: /readyz fails so load balancers stop sending.
func (s *Server) Drain() { s.draining.Store(true) }

// Run does the background work until ctx ends: time-driven health transitions, probes and the
// gauges, once per interval.
func (s *Server) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.probeWG.Wait()
			return
		case <-t.C:
			s.Step(ctx)
		}
	}
}

// Step runs one round of background work: advance the engine's clock, start the probes that are
// due (asynchronously) and publish health gauges. Tests call it after moving their clock.
func (s *Server) Step(ctx context.Context) {
	now := s.clock.Now()
	s.engine.Tick(now)
	s.startProbes(ctx, now)
	s.cfgMu.Lock()
	s.publishStatus(now, false)
	s.cfgMu.Unlock()
}

// WaitProbes waits for the probes started so far (tests).
func (s *Server) WaitProbes() { s.probeWG.Wait() }

// publishStatus (called with cfgMu held) refreshes the health gauges and turns new journal
// events into metrics and logs. Only the keys whose status may have changed are visited
// (engine.Updates: those touched since the last round, and those time can change), and only their
// models' panic gauges are set; after a reload (all) every model's is.
func (s *Server) publishStatus(now time.Time, all bool) {
	if c := s.cfg.Load(); c != nil {
		s.statusScratch = s.engine.Updates(now, s.statusScratch[:0])
		for i := range s.statusScratch {
			st := &s.statusScratch[i]
			s.metrics.observeStatus(*st)
			if was := s.panicKeys[st.Key]; st.Panic != was {
				if st.Panic {
					s.panicKeys[st.Key] = true
					s.panicModels[st.Model]++
				} else {
					delete(s.panicKeys, st.Key)
					s.panicModels[st.Model]--
				}
				s.panicTouched[st.Model] = true
			}
		}
		clear(s.statusScratch) // no strings of removed keys kept until the next round
		// Per model, 1 while its last routing decision was panic routing, back to 0 after.
		set := func(m string, mr *modelRoute) {
			v := 0.0
			if s.panicModels[m] > 0 {
				v = 1
			}
			s.metrics.Panic.WithLabelValues(mr.Policy.Namespace, m).Set(v)
		}
		if all {
			for m, mr := range c.models {
				set(m, mr)
			}
		} else {
			for m := range s.panicTouched {
				if mr := c.models[m]; mr != nil {
					set(m, mr)
				}
			}
		}
		clear(s.panicTouched)
	}
	s.eventsMu.Lock()
	defer s.eventsMu.Unlock()
	for _, ev := range s.engine.Events(s.lastSeq.Load()) {
		s.lastSeq.Store(ev.Seq)
		// A failed probe continues the same ejection, and a dry run's would-be ejection shows on
		// switchyard_channel_dryrun_phase instead.
		if ev.NewEjection() {
			ns, name := routing.SplitChannelID(ev.Channel)
			s.metrics.Ejections.WithLabelValues(ns, name, ev.Model, ev.Reason).Inc()
		}
		s.log.Info("Channel phase changed", "channel", ev.Channel, "model", ev.Model, "from", ev.From.String(), "to", ev.To.String(),
			"reason", ev.Reason, "message", ev.Message, "actor", ev.Actor, "at", ev.At)
	}
}
