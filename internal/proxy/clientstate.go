package proxy

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/audit"
	"github.com/switchyard-io/switchyard/internal/proxy/clients"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// clientsState is the proxy's client authentication, limits and audit: what outlives a reload.
type clientsState struct {
	s        *Server
	limiters sync.Map // client ID -> *clients.Limiter
	metrics  *clientMetrics
	throttle *clients.Throttle // failed keys per source (clients.Throttle); nil: off
	active   atomic.Int64      // clients with a request in flight (the fair share's divisor)
	mu       sync.Mutex
	mode     string // the last mode logged ("required", "open")
}

// clientMetrics are the client layer's metrics, part of Metrics (NewMetrics registers them).
type clientMetrics struct {
	required     prometheus.Gauge
	requests     *prometheus.CounterVec
	tokens       *prometheus.CounterVec
	authFailures *prometheus.CounterVec
	limited      *prometheus.CounterVec
	auditLost    prometheus.CounterFunc
	audit        atomic.Pointer[audit.Log] // the log auditLost reads; nil: none
}

func newClientMetrics(reg prometheus.Registerer) *clientMetrics {
	m := &clientMetrics{}
	m.required = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "switchyard_client_auth_required", Help: "1 while the proxy requires a GatewayClient key (--require-client-key, or GatewayClients in the config); 0 while it serves anyone who reaches it.",
	})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_client_requests_total", Help: "Requests of each GatewayClient by the HTTP status answered.",
	}, []string{"namespace", "client", "code"})
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_client_tokens_total", Help: "Tokens of each GatewayClient's requests as the providers reported them, by type (prompt, completion).",
	}, []string{"namespace", "client", "type"})
	m.authFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_client_auth_failures_total", Help: "Requests refused before any client was known: 401 for a missing or unknown key (missing_key, unknown_key), 429 for a source throttled after too many of those (throttled).",
	}, []string{"reason"})
	m.limited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_client_limited_total", Help: "Requests of a GatewayClient refused with 429 by this replica's share of a limit (requestsPerMinute, tokensPerMinute, tokensPerDay, maxInFlight), or by its fair share of the proxy's --max-in-flight and body budget while they are contended (fairShare).",
	}, []string{"namespace", "client", "limit"})
	m.auditLost = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "switchyard_audit_lines_lost_total", Help: "Audit lines lost: dropped because the audit writer fell behind (the next line records the count), or in a write that failed (a gap record counts them once writing works again).",
	}, func() float64 { return float64(m.audit.Load().Lost()) })
	reg.MustRegister(m.required, m.requests, m.tokens, m.authFailures, m.limited, m.auditLost, newAuditCollector(&m.audit))
	return m
}

func newClientsState(s *Server) *clientsState {
	s.metrics.Clients.audit.Store(s.opts.Audit)
	cs := &clientsState{s: s, metrics: s.metrics.Clients}
	if rate := s.opts.AuthFailuresPerSecond; rate > 0 {
		cs.throttle = clients.NewThrottle(clients.ThrottleSettings{Rate: rate, Burst: clients.AuthFailureBurst, Sources: clients.ThrottleSources})
	}
	return cs
}

// index builds the client index of a table being applied, and logs when the proxy turns open or
// closed (the first config included). It returns the limiters of the clients that left the table:
// apply retires them (and their metric series) once the new config is in place.
func (cs *clientsState) index(t *routing.Table) (*clients.Index, []*clients.Limiter) {
	keep := map[string]bool{}
	ix, invalid := clients.NewIndex(t, cs.s.opts.RequireClientKey, func(c *routing.Client) *clients.Limiter {
		keep[c.ID()] = true
		l, _ := cs.limiters.LoadOrStore(c.ID(), &clients.Limiter{Namespace: c.Namespace, Name: c.Name})
		return l.(*clients.Limiter)
	})
	for _, h := range invalid {
		// Its value is not logged: it may be a key pasted by mistake.
		cs.s.log.Error("A GatewayClient's key hash in the config is not 64 lower-case hex digits; the entry is ignored",
			"client", h.Client, "index", h.Index, "length", h.Length)
	}
	var gone []*clients.Limiter
	cs.limiters.Range(func(k, v any) bool {
		if !keep[k.(string)] {
			cs.limiters.Delete(k)
			gone = append(gone, v.(*clients.Limiter))
		}
		return true
	})
	mode := "open"
	if ix.Required {
		mode = "required"
		cs.metrics.required.Set(1)
	} else {
		cs.metrics.required.Set(0)
	}
	cs.mu.Lock()
	changed := cs.mode != mode
	cs.mode = mode
	cs.mu.Unlock()
	if changed {
		if ix.Required {
			cs.s.log.Info("Client keys required", "clients", ix.Clients, "reason", ix.Reason)
		} else {
			cs.s.log.Warn("Serving without client keys", "reason", ix.Reason)
		}
	}
	return ix, gone
}

// retire removes the metric series of clients that left the table, as the health series of a
// channel×model that left it go. Called after the new config is stored; a request still in flight
// on the old one counts through its limiter, which, once retired, counts nothing more, so it
// cannot bring a series back.
func (cs *clientsState) retire(gone []*clients.Limiter) {
	for _, l := range gone {
		labels := prometheus.Labels{"namespace": l.Namespace, "client": l.Name}
		l.Retire(func() {
			cs.metrics.requests.DeletePartialMatch(labels)
			cs.metrics.tokens.DeletePartialMatch(labels)
			cs.metrics.limited.DeletePartialMatch(labels)
		})
	}
}

// admin is the client part of /admin/v1/channels.
func (cs *clientsState) admin(c *config, now time.Time) (*adminapi.ClientAuthState, []adminapi.ClientUsage) {
	st := &adminapi.ClientAuthState{Required: cs.s.opts.RequireClientKey, Reason: "no routing config loaded yet"}
	if c == nil || c.auth == nil {
		return st, nil
	}
	st.Required, st.Clients, st.Reason = c.auth.Required, c.auth.Clients, c.auth.Reason
	var out []adminapi.ClientUsage
	cs.limiters.Range(func(k, v any) bool {
		day, req, tok, last := v.(*clients.Limiter).Usage(now)
		if req == 0 && tok == 0 {
			return true
		}
		u := adminapi.ClientUsage{Client: k.(string), Day: day, Requests: req, Tokens: tok}
		if !last.IsZero() {
			l := last.UTC()
			u.LastUsed = &l
		}
		out = append(out, u)
		return true
	})
	slices.SortFunc(out, func(a, b adminapi.ClientUsage) int { return strings.Compare(a.Client, b.Client) })
	return st, out
}
