package proxy

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/switchyard-io/switchyard/internal/audit"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/proxy/clientapi"
	"github.com/switchyard-io/switchyard/internal/proxy/clients"
	"github.com/switchyard-io/switchyard/internal/proxy/sse"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Who may call. The compiled table carries each GatewayClient with the SHA-256 of its keys; the
// proxy hashes the key a request presents and looks the hash up. The lookup is on the hash, so
// its timing says nothing about any key's bytes; the final comparison is constant-time anyway.
// The presented key itself is dropped at once: it is never forwarded (copyRequestHeaders does not
// pass Authorization, api-key or x-api-key), logged, put in a metric or echoed; the audit line and
// the logs name a key by the first 8 hex digits of its hash (keyId).
//
// Open or closed: the proxy requires a key when it was started with RequireClientKey (the
// default of the cluster install) or when the served table has any GatewayClient. Standalone with
// none it serves whoever reaches it, and says so in its log, on /admin/v1/channels and as
// switchyard_client_auth_required 0.

// clientCall is one API request as the client layer sees it: who sent it, what it cost, and the
// audit line it becomes. A nil *clientCall (no clients, no audit log) does nothing.
type clientCall struct {
	s     *Server
	path  string
	w     *statusWriter
	start time.Time
	keyID string
	entry *clients.Entry
	auth  *clients.Index // the client index entry was found in
	// running: the request counts in entry's inFlight (limit), until finish; bodyHeld is what
	// it counts in entry's bodyBytes.
	running  bool
	bodyHeld int64
	model    string
	policy   string
	reason   string // why the gateway refused it, when it did

	mu        sync.Mutex
	attempts  []audit.Attempt
	prompt    int64
	complete  int64
	estimated bool // some of the tokens are estimates (priorTokens)
	residency string
	pii       map[string]int
	served    string   // the model that answered (a fallback or overflow hop may change it)
	skipped   []string // hops the client may not call, passed over (failover.Plan.Skipped)
	// stripUsage: the client did not ask for the usage of its stream; the proxy did, to count
	// the tokens, and drops the usage-only event before it reaches the client.
	stripUsage bool
}

// beginCall starts the client layer for a request. It returns nil when there is nothing to do:
// the proxy is open and writes no audit log (the request path is then as it was).
func (s *Server) beginCall(w http.ResponseWriter, path string) (*clientCall, http.ResponseWriter) {
	c := s.cfg.Load()
	required := s.opts.RequireClientKey || (c != nil && c.auth != nil && c.auth.Required)
	if !required && s.opts.Audit == nil {
		return nil, w
	}
	sw := &statusWriter{ResponseWriter: w}
	return &clientCall{s: s, path: path, w: sw, start: s.clock.Now()}, sw
}

// authenticate identifies the client by its key: 401 for a missing or unknown key; 403 for a
// disabled or expired client. It runs before the body is read.
func (cc *clientCall) authenticate(r *http.Request) bool {
	if cc == nil {
		return true
	}
	s := cc.s
	c := s.cfg.Load()
	required := s.opts.RequireClientKey || (c != nil && c.auth != nil && c.auth.Required)
	if !required {
		return true // open: audit only
	}
	now := s.clock.Now()
	src, fromIP := clients.AuthSource(r.RemoteAddr)
	if wait := s.clients.throttle.Wait(src, now); fromIP && wait > 0 {
		// Before the key is looked at: a throttled source learns nothing about the keys it tries.
		cc.refuseUnread(r, http.StatusTooManyRequests, "rate_limit_error", "too_many_auth_failures",
			"too many requests without a valid client key from this address; retry later", wait)
		s.clients.metrics.authFailures.WithLabelValues("throttled").Inc()
		return false
	}
	key := clients.PresentedKey(r.Header)
	var e *clients.Entry
	if key != "" {
		var ix *clients.Index
		if c != nil {
			ix = c.auth
		}
		e, cc.keyID = ix.Lookup(key)
	}
	if e == nil {
		if fromIP {
			s.clients.throttle.Failed(src, now)
		}
		cc.refuseKey(r, key == "")
		return false
	}
	cc.entry, cc.auth = e, c.auth
	return cc.admitClient(r, e, now)
}

// refuseUnread refuses the request before its body is read: the connection closes after it.
func (cc *clientCall) refuseUnread(r *http.Request, status int, kind, code, msg string, retryAfter time.Duration) {
	cc.s.closeUnread(cc.w, r)
	cc.refuse(status, kind, code, msg, retryAfter)
}

// refuseKey refuses (401) a request with no client key, or with one of no client.
func (cc *clientCall) refuseKey(r *http.Request, missing bool) {
	if missing {
		cc.refuseUnread(r, http.StatusUnauthorized, "authentication_error", "missing_api_key",
			"this gateway requires a client key: send it as \"Authorization: Bearer KEY\", \"api-key: KEY\" or \"x-api-key: KEY\"", 0)
		cc.s.clients.metrics.authFailures.WithLabelValues("missing_key").Inc()
		return
	}
	cc.refuseUnread(r, http.StatusUnauthorized, "authentication_error", "invalid_api_key", "the client key is not valid for this gateway", 0)
	cc.s.clients.metrics.authFailures.WithLabelValues("unknown_key").Inc()
}

// admitClient refuses (403) a request from a client that is disabled or has expired.
func (cc *clientCall) admitClient(r *http.Request, e *clients.Entry, now time.Time) bool {
	switch {
	case e.Client.Disabled:
		cc.refuseUnread(r, http.StatusForbidden, "permission_error", "client_disabled",
			fmt.Sprintf("GatewayClient %s is disabled", e.ID), 0)
		return false
	case e.Client.ExpiresAt != nil && !now.Before(*e.Client.ExpiresAt):
		cc.refuseUnread(r, http.StatusForbidden, "permission_error", "client_expired",
			fmt.Sprintf("GatewayClient %s expired at %s", e.ID, e.Client.ExpiresAt.UTC().Format(time.RFC3339)), 0)
		return false
	}
	return true
}

// limit counts the request against its client's limits (429 with Retry-After), at key time:
// before the body is read and before the model is checked, so a request refused later (403 for
// a model the client may not use) counts as any other, and a client cannot flood the audit trail
// with refusals beyond its requestsPerMinute.
func (cc *clientCall) limit(r *http.Request) bool {
	if cc == nil || cc.entry == nil {
		return true // open: audited, not limited
	}
	e := cc.entry
	if limit, wait := e.Limiter.Admit(cc.s.clock.Now(), e.Client.Limits, cc.auth.Replicas); limit != "" {
		e.Limiter.Count(cc.s.clients.metrics.limited, limit, 1)
		cc.s.closeUnread(cc.w, r)
		cc.refuse(http.StatusTooManyRequests, "rate_limit_error", "client_rate_limit_exceeded",
			fmt.Sprintf("GatewayClient %s reached its %s limit on this gateway", e.ID, limit), wait)
		return false
	}
	s := cc.s
	n := e.Limiter.InFlight.Add(1)
	if n == 1 {
		s.clients.active.Add(1)
	}
	cc.running = true
	verdict := clients.ConcurrencyVerdict(clients.ConcurrencyInputs{Client: n, ClientMax: clients.Share(e.Client.Limits.MaxInFlight, cc.auth.Replicas),
		Global: s.inFlight.Load(), GlobalMax: int64(s.opts.MaxInFlight), Active: s.clients.active.Load()})
	switch verdict {
	case clients.LimitMaxInFlight:
		cc.release()
		e.Limiter.Count(s.clients.metrics.limited, verdict, 1)
		cc.s.closeUnread(cc.w, r)
		cc.refuse(http.StatusTooManyRequests, "rate_limit_error", "concurrency_limit_exceeded",
			fmt.Sprintf("GatewayClient %s has its maxInFlight of requests in flight on this gateway", e.ID), time.Second)
		return false
	case clients.LimitFairShare:
		cc.release()
		e.Limiter.Count(s.clients.metrics.limited, verdict, 1)
		cc.s.closeUnread(cc.w, r)
		cc.capacityExceeded("requests in flight")
		return false
	}
	return true
}

// capacityExceeded is the 429 of a client over its fair share of the gateway's capacity.
func (cc *clientCall) capacityExceeded(what string) {
	cc.refuse(http.StatusTooManyRequests, "rate_limit_error", "capacity_exceeded",
		fmt.Sprintf("the gateway is busy and GatewayClient %s holds more than its fair share of its %s; retry shortly", cc.entry.ID, what), time.Second)
}

// holdBody is what readBody asks before it holds n more bytes of this request's body, the proxy
// then holding global of its budget: false when the client would be over its fair share of a
// contended budget. A request without a client may always.
func (cc *clientCall) holdBody(n, global int64) bool {
	if cc == nil || cc.entry == nil {
		return true
	}
	l := cc.entry.Limiter
	if !clients.BodyShareOK(l.BodyBytes.Load()+n, global, cc.s.opts.MaxBufferedBodyBytes, cc.s.clients.active.Load()) {
		return false
	}
	l.BodyBytes.Add(n)
	cc.bodyHeld += n
	return true
}

// release gives back what the request counts in its client's in-flight figures.
func (cc *clientCall) release() {
	if !cc.running {
		return
	}
	cc.running = false
	l := cc.entry.Limiter
	if l.InFlight.Add(-1) == 0 {
		cc.s.clients.active.Add(-1)
	}
	l.BodyBytes.Add(-cc.bodyHeld)
	cc.bodyHeld = 0
}

// admit checks the model against the client's globs (403; the request counted against the
// client's limits already, see limit), and for a stream asks the upstream for its usage so the tokens
// can be counted. It returns the request to route (with stream_options added) or false when it
// answered the client.
func (cc *clientCall) admit(cfg *config, cr *clientapi.Request) (*clientapi.Request, bool) {
	if cc == nil {
		return cr, true
	}
	cc.model = cr.Model
	e := cc.entry
	if e == nil {
		return cr, true // open: audited, not limited
	}
	if !e.Client.Allows(cr.Model) {
		cc.refuse(http.StatusForbidden, "permission_error", "model_not_allowed",
			fmt.Sprintf("GatewayClient %s may not use model %q", e.ID, cr.Model), 0)
		return nil, false
	}
	if cr.Stream && (cc.path == "/chat/completions" || cc.path == "/completions") {
		if body, asked, ok := clients.WithIncludeUsage(cr.Body, cr.Fields); ok && !asked {
			if ncr, err := clientapi.ParseRequest(body); err == nil {
				cc.stripUsage = true
				return ncr, true
			}
		}
	}
	return cr, true
}

// refuse answers the client in the error shape of the endpoint called and records why.
func (cc *clientCall) refuse(status int, kind, code, msg string, retryAfter time.Duration) {
	cc.reason = code
	cc.s.metrics.Rejected.WithLabelValues(code).Inc()
	clientapi.WriteError(cc.w, clientapi.ShapeFor(cc.path), status, kind, code, msg, retryAfter)
}

// routed records where the request went (after routing).
func (cc *clientCall) routed(rt *routeState) {
	if cc == nil || rt == nil {
		return
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if first := rt.plan.First(); first != nil {
		cc.policy = routing.QualifiedName(first.Policy.Namespace, first.Policy.Name)
	}
	cc.pii = rt.piiMasked
	if sk := rt.plan.Skipped(); len(sk) > 0 {
		cc.skipped = slices.Clone(sk) // the plan's scratch goes back to the pool
	}
}

// client is the client the request was authenticated as (nil: none, or no client layer).
func (cc *clientCall) client() *clients.Entry {
	if cc == nil {
		return nil
	}
	return cc.entry
}

// attempt records one upstream attempt (finishAttempt).
func (cc *clientCall) attempt(a *attempt, r *result) {
	if cc == nil || a.probe {
		return
	}
	outcome := r.outcome.String()
	if r.canceled {
		outcome = "canceled"
	}
	cc.mu.Lock()
	cc.attempts = append(cc.attempts, audit.Attempt{Channel: a.channel.ID(), Status: r.status, Outcome: outcome, Ms: r.latency.Milliseconds()})
	if r.canceled && r.reason != "" && cc.reason == "" {
		cc.reason = r.reason // the client's failure, named (a stream it stopped reading)
	}
	if r.outcome == health.OutcomeSuccess {
		cc.residency = a.channel.Residency
		cc.served = a.model
	}
	cc.mu.Unlock()
}

// priorTokens records the parts of a recovered stream that broke before the part that finished
// it (recovery.UsageSum): the tokens the client's usage was told, estimated where a part reported
// none. They count against the client's token limits, as the provider bills them.
func (cc *clientCall) priorTokens(p, c int64, estimated bool) { cc.add(p, c, estimated) }

// add records tokens of the request: the provider's figures (addTokens), or a recovered stream's
// earlier parts (priorTokens).
func (cc *clientCall) add(p, c int64, estimated bool) {
	if cc == nil {
		return
	}
	cc.mu.Lock()
	cc.prompt += p
	cc.complete += c
	cc.estimated = cc.estimated || estimated
	cc.mu.Unlock()
	if e := cc.entry; e != nil {
		e.Limiter.AddTokens(cc.s.clock.Now(), p+c)
		if p > 0 {
			e.Limiter.Count(cc.s.clients.metrics.tokens, "prompt", float64(p))
		}
		if c > 0 {
			e.Limiter.Count(cc.s.clients.metrics.tokens, "completion", float64(c))
		}
	}
}

// stripUsageChunk leaves out of a stream event the usage-only chunk the proxy asked for on the
// client's behalf (clients.StripUsageChunk).
func (cc *clientCall) stripUsageChunk(ev *sse.Event, translated bool) (raw []byte, dropped bool) {
	if cc == nil || !cc.stripUsage || ev.Usage == nil {
		return ev.Raw, false
	}
	return clients.StripUsageChunk(ev.Raw, ev.Data, translated)
}

// GatewayClients is the number of GatewayClients in the config served now (0 before one is loaded).
func (s *Server) GatewayClients() int {
	if c := s.cfg.Load(); c != nil && c.auth != nil {
		return c.auth.Clients
	}
	return 0
}

// finish counts the request for its client and writes its audit line.
func (cc *clientCall) finish(requestID string) {
	if cc == nil {
		return
	}
	s := cc.s
	cc.release()
	status := cc.w.status
	if status == 0 {
		status = http.StatusOK // nothing written: net/http answers 200
	}
	client := ""
	if e := cc.entry; e != nil {
		client = e.ID
		e.Limiter.Count(s.clients.metrics.requests, strconv.Itoa(status), 1)
	}
	if s.opts.Audit == nil {
		return
	}
	cc.mu.Lock()
	line := &audit.Line{TS: cc.start.UTC(), RequestID: requestID, Client: client, KeyID: cc.keyID, Model: cc.model, Policy: cc.policy,
		Attempts: cc.attempts, Status: status, Reason: cc.reason, Tokens: audit.Tokens{Prompt: cc.prompt, Completion: cc.complete, Estimated: cc.estimated},
		Residency: cc.residency, PII: cc.pii, ServedModel: cc.served, SkippedModels: cc.skipped}
	if line.Attempts == nil {
		line.Attempts = []audit.Attempt{}
	}
	cc.mu.Unlock()
	s.opts.Audit.Record(line)
}
