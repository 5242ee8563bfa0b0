package proxy

import (
	"net/http"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-io/switchyard/internal/audit"
)

// AuditRequirement says whether the proxy serves while it cannot write its audit log.
type AuditRequirement int

const (
	// AuditRequiredWithKeys (the default): required while client keys are (RequireClientKey, or
	// GatewayClients in the config): the trail of who called is then part of what is promised.
	AuditRequiredWithKeys AuditRequirement = iota
	// AuditRequiredAlways: never serve a request the audit log cannot record.
	AuditRequiredAlways
	// AuditRequiredNever: serve, counting the lines lost.
	AuditRequiredNever
)

func (r AuditRequirement) String() string {
	switch r {
	case AuditRequiredAlways:
		return "always"
	case AuditRequiredNever:
		return "never"
	default:
		return "with-keys"
	}
}

// auditRequired reports whether the proxy must stop serving while its audit log is not writable.
func (s *Server) auditRequired(c *config) bool {
	if s.opts.Audit == nil {
		return false
	}
	switch s.opts.AuditRequired {
	case AuditRequiredAlways:
		return true
	case AuditRequiredNever:
		return false
	}
	return s.opts.RequireClientKey || (c != nil && c.auth != nil && c.auth.Required)
}

// auditHeld reports whether requests are refused now: the audit trail is required and its last
// write failed. /readyz says so too, so that load balancers send the traffic elsewhere.
func (s *Server) auditHeld() bool {
	return s.auditRequired(s.cfg.Load()) && !s.opts.Audit.Writable()
}

// refuseUnaudited answers 503 audit_unavailable while auditHeld. The refusal's own audit line is
// queued as any other: it is the write that finds out whether the log works again.
func (cc *clientCall) refuseUnaudited() bool {
	if cc == nil || !cc.s.auditHeld() {
		return false
	}
	cc.s.metrics.Rejected.WithLabelValues("audit_unavailable").Inc()
	kind := "server_error"
	if cc.path == "/messages" {
		kind = "overloaded_error" // what Anthropic's SDKs retry
	}
	cc.refuse(http.StatusServiceUnavailable, kind, "audit_unavailable",
		"the gateway cannot write its audit log and does not serve requests it cannot record; retry shortly", time.Second)
	return true
}

// The audit log's figures beside switchyard_audit_lines_lost_total, read from the log when
// scraped. Every reason is exported from the start (at 0), so that increase() sees the first one.
var (
	auditSegmentReasons = []string{audit.StartTornTail, audit.StartUnreadableTail, audit.StartUnreadableFile}
	auditReopenReasons  = []string{audit.ReopenDeleted, audit.ReopenReplaced, audit.ReopenTruncated, audit.ReopenWriteError}
)

type auditCollector struct {
	log                          *atomic.Pointer[audit.Log]
	writable, segments, reopened *prometheus.Desc
}

func newAuditCollector(log *atomic.Pointer[audit.Log]) *auditCollector {
	return &auditCollector{log: log,
		writable: prometheus.NewDesc("switchyard_audit_writable",
			"1 while the audit log's last write reached the file, 0 while writes fail (lines are lost and counted; with --audit-required the proxy answers 503 and /readyz fails). Absent without --audit-log.", nil, nil),
		segments: prometheus.NewDesc("switchyard_audit_segments_started_total",
			"Audit chain segments begun because the log's tail could not be continued as it was, by reason (torn_tail, unreadable_tail, unreadable_file); the start record in the log says the same.", []string{"reason"}, nil),
		reopened: prometheus.NewDesc("switchyard_audit_reopened_total",
			"Times the audit writer reopened its file, by reason: deleted, replaced or truncated under it, or after a failed write.", []string{"reason"}, nil),
	}
}

func (c *auditCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.writable
	ch <- c.segments
	ch <- c.reopened
}

func (c *auditCollector) Collect(ch chan<- prometheus.Metric) {
	l := c.log.Load()
	if l == nil {
		return
	}
	w := 0.0
	if l.Writable() {
		w = 1
	}
	ch <- prometheus.MustNewConstMetric(c.writable, prometheus.GaugeValue, w)
	counts := func(d *prometheus.Desc, known []string, m map[string]uint64) {
		for _, r := range known {
			if _, ok := m[r]; !ok {
				m[r] = 0
			}
		}
		reasons := make([]string, 0, len(m))
		for r := range m {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		for _, r := range reasons {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(m[r]), r)
		}
	}
	counts(c.segments, auditSegmentReasons, l.Segments())
	counts(c.reopened, auditReopenReasons, l.Reopened())
}
