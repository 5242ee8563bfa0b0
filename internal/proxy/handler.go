package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/pii"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// apiPaths are the OpenAI endpoints the proxy forwards (POST).
var apiPaths = map[string]bool{
	"/v1/chat/completions": true,
	"/v1/completions":      true,
	"/v1/embeddings":       true,
	"/v1/responses":        true,
	// The Anthropic Messages API (messages.go, wire.go).
	"/v1/messages":              true,
	"/v1/messages/count_tokens": true,
}

// Handler is the data plane: the OpenAI-compatible API.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimRight(r.URL.Path, "/")
		if isMessagesPath(strings.TrimPrefix(path, "/v1")) {
			w = &messagesWriter{w} // the gateway's errors in Anthropic's shape
		}
		switch {
		case apiPaths[path]:
			if r.Method != http.MethodPost {
				w.Header().Set("Allow", http.MethodPost)
				writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed",
					fmt.Sprintf("%s %s is not supported; use POST", r.Method, path), 0)
				return
			}
			s.serveAPI(w, r, strings.TrimPrefix(path, "/v1"))
		case path == "/v1/models":
			if r.Method != http.MethodGet {
				w.Header().Set("Allow", http.MethodGet)
				writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed",
					fmt.Sprintf("%s %s is not supported; use GET", r.Method, path), 0)
				return
			}
			s.serveModels(w)
		default:
			writeError(w, http.StatusNotFound, "invalid_request_error", "unknown_url",
				fmt.Sprintf("unknown path %s %s; Switchyard serves /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, /v1/messages, /v1/messages/count_tokens and /v1/models", r.Method, path), 0)
		}
	})
}

func (s *Server) serveModels(w http.ResponseWriter) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	if c := s.cfg.Load(); c != nil {
		for name := range c.models {
			out.Data = append(out.Data, model{ID: name, Object: "model", OwnedBy: "switchyard"})
		}
	}
	sort.Slice(out.Data, func(i, j int) bool { return out.Data[i].ID < out.Data[j].ID })
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, path string) {
	rc := http.NewResponseController(w)
	// A write deadline left by the connection's previous request must not cut this one short.
	_ = rc.SetWriteDeadline(time.Time{})
	reqID := s.requestID(r)
	w.Header().Set("X-Request-Id", reqID)
	if n := s.inFlight.Add(1); n > int64(s.opts.MaxInFlight) {
		s.inFlight.Add(-1)
		s.reject(w, http.StatusServiceUnavailable, "overloaded", "server_error",
			fmt.Sprintf("the gateway is serving its limit of %d requests at once; retry shortly", s.opts.MaxInFlight), time.Second)
		return
	}
	defer s.inFlight.Add(-1)
	// Client keys, limits and the audit line (clientauth.go): the key is checked before the body
	// is read; call is nil, and w unchanged, on an open proxy without an audit log.
	call, w := s.beginCall(w, path)
	defer call.finish(reqID)
	if !call.authenticate(r) {
		return
	}
	if len(r.TransferEncoding) > 0 {
		// Go's server lets Transfer-Encoding override a Content-Length sent with it, where a
		// front proxy may have framed the body by the Content-Length: a smuggled request. Every
		// OpenAI client sends Content-Length, so a chunked body is refused, and with it any
		// request carrying both.
		w.Header().Set("Connection", "close")
		s.reject(w, http.StatusLengthRequired, "framing", "invalid_request_error",
			"request bodies must be sent with a Content-Length, not Transfer-Encoding", 0)
		return
	}
	if r.ContentLength > s.opts.MaxBodyBytes {
		s.rejectTooLarge(w)
		return
	}
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyReadTimeout))
	body, held, err := s.readBody(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes), r.ContentLength)
	_ = rc.SetReadDeadline(time.Time{})
	defer s.bodyBytes.Add(-held)
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			s.rejectTooLarge(w)
		case errors.Is(err, errBodyBudget):
			s.reject(w, http.StatusServiceUnavailable, "overloaded", "server_error",
				"the gateway holds its limit of request bodies in memory; retry shortly", time.Second)
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			s.reject(w, http.StatusRequestTimeout, "body_timeout", "invalid_request_error",
				fmt.Sprintf("the request body did not arrive within %s", s.opts.BodyReadTimeout), 0)
		default:
			s.reject(w, http.StatusBadRequest, "body_read_error", "invalid_request_error", "failed to read the request body", 0)
		}
		return
	}
	cr, err := parseRequest(body)
	if err != nil {
		code := "invalid_request"
		if br, ok := err.(errBadRequest); ok && br.code != "" {
			code = br.code
		}
		s.reject(w, http.StatusBadRequest, code, "invalid_request_error", err.Error(), 0)
		return
	}
	c := s.cfg.Load()
	if c == nil {
		writeError(w, http.StatusServiceUnavailable, "server_error", "no_config", "the gateway has no routing configuration loaded yet", 0)
		return
	}
	cr, admitted := call.admit(c, cr)
	if !admitted {
		return
	}
	body = cr.bodyOr(body)
	if c.models[cr.Model] == nil {
		s.metrics.Requests.WithLabelValues("", "unknown", "model_not_found").Inc()
		writeError(w, http.StatusNotFound, "invalid_request_error", "model_not_found",
			fmt.Sprintf("the model %q does not exist or is not routed by this gateway; GET /v1/models lists the served models", cr.Model), 0)
		return
	}
	rt := &routeState{
		s: s, c: c, w: w, req: cr, path: path, header: r.Header, requestID: reqID,
		drill: strings.EqualFold(r.Header.Get("X-Switchyard-Drill"), "true"), call: call,
	}
	defer call.routed(rt)
	if c.models[cr.Model].pii != nil && isMessagesPath(path) {
		s.reject(w, http.StatusBadRequest, "pii_unsupported", "invalid_request_error",
			fmt.Sprintf("model %q is routed by a policy that masks personal data, which /v1/messages does not support yet; use /v1/chat/completions", cr.Model), 0)
		return
	}
	if pr := c.models[cr.Model].pii; pr != nil {
		// The requested model's policy masks for every hop: fallbacks get the same masked body.
		var ok bool
		if rt.req, rt.restore, rt.piiMasked, ok = s.applyPII(w, pr, path, body, cr); !ok {
			return
		}
		if rt.req != cr {
			// The masked copy is held for the whole request too (not against the budget: the
			// client's body was, and the copy is about its size).
			n := int64(len(rt.req.body))
			s.bodyBytes.Add(n)
			defer s.bodyBytes.Add(-n)
		}
	}
	outcome := rt.run(r.Context())
	s.metrics.Requests.WithLabelValues(c.models[cr.Model].policy.Namespace, cr.Model, outcome).Inc()
}

// routeState is one client request's walk through channels and fallback models.
type routeState struct {
	s         *Server
	c         *config
	w         http.ResponseWriter
	req       *clientRequest
	path      string
	header    http.Header
	requestID string
	drill     bool
	// first is the requested model's route. Its policy's namespace owns the traffic on every hop
	// (consent), and its requireResidency binds every hop.
	first *modelRoute

	attempts    int
	deadline    time.Time
	tried       []health.Key     // channel×models that failed this request: a handful at most
	last        *routing.Channel // the channel whose attempt failed last
	lastModel   string
	lastOutcome health.Outcome
	lastDetail  string
	retryAfter  time.Duration // smallest Retry-After seen from 429s
	allLimited  bool          // every attempt so far was a 429
	routes      []health.Route
	prev        *routing.Channel // the channel of the previous attempt, whatever its outcome
	prevReason  string
	restore     *pii.Session   // the masked values to put back into the answer; nil for none
	piiMasked   map[string]int // values masked per detector, for the access log
	call        *clientCall    // the client layer's record of the request (nil: none)
	// need, translations and unfitReason are capability routing's (messages.go).
	need         need
	translations map[translationKey]translationResult
	unfitReason  string
}

// run routes the request: healthy channels of the model → the same channel again only when it is
// the model's only channel and the failure was not a timeout → fallbackModels in order → panic
// routing to the least-bad channel of the requested model → a clear 503 (or 429).
//
// Every hop (a fallback or context-overflow model, the latter possibly named by a fallback
// model's policy) stays within what the first policy may reach: a model whose policy is in
// another namespace is skipped unless it accepts the first policy's namespace (see hopAllowed),
// and no channel outside the first policy's requireResidency is picked (see resident). Compile
// reports a fallback without consent as a problem on the policy that names it, but the proxy
// must enforce both rules itself: a policy with a problem keeps serving its last good form,
// consent may be withdrawn after it was given, and a hop named by a fallback model's own policy
// (its contextOverflowModels) is not the first policy's to compile.
//
// It returns the outcome class for switchyard_requests_total.
func (rt *routeState) run(ctx context.Context) string {
	first := rt.c.models[rt.req.Model]
	rt.first = first
	maxAttempts := first.policy.Retry.MaxAttempts
	first.budget.request(time.Now())
	rt.allLimited = true

	chain := append([]string{rt.req.Model}, first.policy.FallbackModels...)
	overflowed := false
	for i := 0; i < len(chain) && rt.attempts < maxAttempts; i++ {
		mr := rt.c.models[chain[i]]
		if mr == nil || !rt.hopAllowed(mr) {
			continue
		}
		if !overflowed && rt.overflowsAll(mr) && rt.anyHop(mr.policy.ContextOverflowModels) {
			// The prompt certainly exceeds every channel's contextWindow: overflow before sending.
			overflowed = true
			chain = append(chain[:i+1], mr.policy.ContextOverflowModels...)
			continue
		}
		sameAgain := false
		for rt.attempts < maxAttempts {
			ch := rt.pick(mr, false)
			if ch == nil && !sameAgain && rt.canRetrySame(mr) {
				ch, sameAgain = rt.last, true
				if !rt.backoff(ctx, mr.policy.Retry) {
					return "canceled"
				}
			}
			if ch == nil {
				break
			}
			res, stop := rt.try(ctx, mr, ch, maxAttempts)
			if stop != "" {
				return stop
			}
			if res.outcome == health.OutcomeClientError && res.errCode == "context_length_exceeded" {
				if overflowed || !rt.anyHop(mr.policy.ContextOverflowModels) {
					// No larger model this request may go to: the caller's to fix.
					rt.passThrough(res, ch)
					return "client_error"
				}
				overflowed = true
				chain = append(chain[:i+1], mr.policy.ContextOverflowModels...)
				break
			}
		}
	}
	// Panic routing: every channel of the requested model is out; try the least-bad ones anyway,
	// one after the other while attempts remain.
	if first.policy.PanicRouting && !rt.allRateLimited(first) {
		for rt.attempts < maxAttempts {
			ch := rt.pick(first, true)
			if ch == nil {
				break
			}
			if _, stop := rt.try(ctx, first, ch, maxAttempts); stop != "" {
				return stop
			}
		}
	}
	if rt.attempts == 0 && rt.allRateLimited(first) {
		rt.retryAfter = rt.pendingRetryAfter(first)
	}
	return rt.fail()
}

// try runs one attempt on ch. stop is non-empty when the request is finished (the outcome class).
func (rt *routeState) try(ctx context.Context, mr *modelRoute, ch *routing.Channel, maxAttempts int) (result, string) {
	s := rt.s
	now := time.Now()
	if rt.attempts > 0 && !mr.budget.allowRetry(now, mr.policy.Retry.BudgetPercent) {
		s.metrics.BudgetExhausted.WithLabelValues(mr.policy.Namespace, mr.model).Inc()
		rt.lastDetail += " (retry budget exhausted)"
		return result{}, rt.fail()
	}
	upstream, _ := ch.Upstream(mr.model)
	body, err := rt.req.bodyFor(upstream)
	if err != nil {
		writeError(rt.w, http.StatusBadRequest, "invalid_request_error", "invalid_request", "failed to encode the request", 0)
		return result{}, "client_error"
	}
	timeout := ch.Timeouts.Request
	if rt.attempts == 0 {
		// The request's deadline: the first channel's request timeout plus one fallback's (the
		// design notes' 30 s + 20 s), so that an attempt which ran out its whole request timeout
		// (a non-streamed answer has no first-byte timer) can still fail over once.
		rt.deadline = now.Add(timeout + ch.Timeouts.FallbackRequest)
	} else {
		timeout = min(ch.Timeouts.FallbackRequest, time.Until(rt.deadline))
		if timeout <= 0 {
			rt.lastDetail += " (request deadline reached)"
			return result{}, rt.fail()
		}
		if rt.prev != nil && rt.prev.ID() != ch.ID() {
			// namespace is the channel that takes over's; a fallback from another namespace (by
			// consent) names the channel it leaves by namespace/name.
			from := rt.prev.Name
			if rt.prev.Namespace != ch.Namespace {
				from = rt.prev.ID()
			}
			s.metrics.Failovers.WithLabelValues(ch.Namespace, mr.model, from, ch.Name, rt.prevReason).Inc()
		}
	}
	rt.attempts++
	a := rt.withCapabilities(&attempt{channel: ch, key: rt.key(ch), model: mr.model, upstream: upstream, path: rt.path, body: body,
		stream: rt.req.Stream, timeout: timeout, header: rt.header, requestID: rt.requestID, number: rt.attempts, drill: rt.drill,
		redact: rt.c.redact, restore: rt.restore, piiMasked: rt.piiMasked, call: rt.call})
	res := s.do(ctx, rt.w, a)
	rt.prev, rt.prevReason = ch, res.outcome.String()
	if res.errCode != "" {
		rt.prevReason = res.errCode
	}
	switch {
	case res.canceled:
		return res, "canceled"
	case res.outcome == health.OutcomeSuccess:
		return res, "success"
	case res.committed:
		return res, "stream_cut"
	}
	key := health.Key{Channel: ch.ID(), Model: mr.model}
	if res.outcome != health.OutcomeRateLimited {
		rt.allLimited = false
	}
	switch res.outcome {
	case health.OutcomeClientError:
		if res.errCode == "context_length_exceeded" {
			return res, ""
		}
		rt.passThrough(res, ch) // content_policy_violation and other 4xx are the caller's to fix
		return res, "client_error"
	case health.OutcomeRateLimited:
		if res.retryAfter > 0 && (rt.retryAfter == 0 || res.retryAfter < rt.retryAfter) {
			rt.retryAfter = res.retryAfter
		}
		wait := mr.policy.Settings.MaxRetryAfterWait
		if res.retryAfter > 0 && res.retryAfter <= wait && time.Now().Add(res.retryAfter).Before(rt.deadline) && rt.attempts < maxAttempts {
			// A short Retry-After is cheaper to wait out than a failover.
			if !sleepCtx(ctx, res.retryAfter) {
				return res, "canceled"
			}
			return rt.try(ctx, mr, ch, maxAttempts)
		}
	}
	rt.tried = append(rt.tried, key)
	rt.last, rt.lastModel, rt.lastOutcome, rt.lastDetail = ch, mr.model, res.outcome, res.shown()
	return res, ""
}

// fail ends the request with the answer for "no channel could answer".
func (rt *routeState) fail() string {
	if stop, ok := rt.unfitFailure(); ok {
		return stop
	}
	if rt.allLimited && (rt.attempts > 0 || rt.retryAfter > 0) {
		writeError(rt.w, http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded",
			fmt.Sprintf("every channel of model %q is rate limited", rt.req.Model), max(rt.retryAfter, time.Second))
		return "rate_limited"
	}
	msg := fmt.Sprintf("no channel could answer for model %q after %d attempt(s)", rt.req.Model, rt.attempts)
	if rt.last != nil {
		msg += fmt.Sprintf("; last error from channel %s: %s", rt.last.ID(), rt.lastDetail)
	} else {
		msg += "; no channel is routable" + rt.lastDetail
	}
	writeError(rt.w, http.StatusServiceUnavailable, "server_error", "no_channel_available", msg, 0)
	return "unavailable"
}

// pick returns the next channel to try for a model: the engine's order, skipping channels tried
// already, preferring one in another failure domain than the channel that just failed.
func (rt *routeState) pick(mr *modelRoute, panicRouting bool) *routing.Channel {
	rnd := rand.Float64() // math/rand/v2's global source: per-thread state, no lock, no allocation
	cands := mr.candidates
	if panicRouting {
		// The engine names one least-bad channel; leave out those this request already tried.
		cands = rt.untried(mr)
	}
	rt.routes = rt.s.engine.Select(rt.s.clock.Now(), mr.model, cands, mr.strategy, panicRouting, rnd, rt.routes)
	var fallback *routing.Channel
	for _, route := range rt.routes {
		if panicRouting && !route.Panic {
			return nil // something is routable after all: not a panic
		}
		if rt.wasTried(health.Key{Channel: route.Channel, Model: mr.model}) {
			continue
		}
		ch := rt.c.channels[route.Channel]
		if ch == nil || !rt.resident(ch) {
			continue
		}
		if why := rt.unfit(ch, mr.model); why != "" {
			rt.unfitReason = why
			continue
		}
		if rt.last == nil || ch.Domain.Differs(rt.last.Domain) {
			return ch
		}
		if fallback == nil {
			fallback = ch
		}
	}
	return fallback
}

// hopAllowed reports whether this request may be routed to mr's model. The traffic belongs to the
// team of the first policy however many hops it took to get here, so consent is asked of mr's
// policy for the first policy's namespace, not for the namespace of the policy that named the
// hop: team-b accepting team-a must not let team-a's traffic through to a team-c that accepts
// only team-b. The requested model itself is the first policy's own.
func (rt *routeState) hopAllowed(mr *modelRoute) bool {
	return mr.policy.AcceptsFallbackFrom(rt.first.policy.Namespace)
}

// anyHop reports whether some model of a fallback list is routed and allowed to this request.
func (rt *routeState) anyHop(models []string) bool {
	for _, m := range models {
		if mr := rt.c.models[m]; mr != nil && rt.hopAllowed(mr) {
			return true
		}
	}
	return false
}

// resident reports whether ch may serve this request: the first policy's requireResidency binds
// every hop, panic routing included. (A policy's own candidates are filtered by Compile; a
// fallback model's are filtered by its own policy's requireResidency only, and a policy kept in
// its last good form may list a channel whose residency has changed since.)
func (rt *routeState) resident(ch *routing.Channel) bool {
	want := rt.first.policy.RequireResidency
	return len(want) == 0 || slices.Contains(want, ch.Residency)
}

func (rt *routeState) wasTried(k health.Key) bool { return slices.Contains(rt.tried, k) }

// untried are the candidates panic routing may still name: not tried by this request, and
// resident (the engine picks one least-bad channel; it must pick among those that may serve).
func (rt *routeState) untried(mr *modelRoute) []health.Candidate {
	out := make([]health.Candidate, 0, len(mr.candidates))
	for _, c := range mr.candidates {
		if rt.wasTried(health.Key{Channel: c.Channel, Model: mr.model}) {
			continue
		}
		if ch := rt.c.channels[c.Channel]; ch == nil || !rt.resident(ch) || rt.unfit(ch, mr.model) != "" {
			continue
		}
		out = append(out, c)
	}
	return out
}

// canRetrySame: the same channel again only when it is the model's only candidate and its
// failure was not a timeout (a silent provider must cost one timeout, not a chain of them).
func (rt *routeState) canRetrySame(mr *modelRoute) bool {
	return rt.last != nil && rt.lastModel == mr.model && len(mr.candidates) == 1 &&
		rt.lastOutcome != health.OutcomeTimeout && rt.lastOutcome != health.OutcomeRateLimited
}

// backoff sleeps a jittered exponential delay before retrying the same channel.
func (rt *routeState) backoff(ctx context.Context, r routing.Retry) bool {
	d := r.BackoffBase << max(rt.attempts-1, 0)
	if d > r.BackoffMax || d <= 0 {
		d = r.BackoffMax
	}
	d = d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
	if time.Now().Add(d).After(rt.deadline) {
		return true // no time to wait: the attempt will be refused by the deadline check
	}
	return sleepCtx(ctx, d)
}

// allRateLimited reports whether every candidate of the model waits out a Retry-After.
func (rt *routeState) allRateLimited(mr *modelRoute) bool {
	if len(mr.candidates) == 0 {
		return false
	}
	now := rt.s.clock.Now()
	for _, c := range mr.candidates {
		st, ok := rt.s.engine.StatusOf(now, health.Key{Channel: c.Channel, Model: mr.model})
		if !ok || st.Phase != health.PhaseRateLimited || !st.RetryAfterUntil.After(now) {
			return false
		}
	}
	return true
}

func (rt *routeState) pendingRetryAfter(mr *modelRoute) time.Duration {
	now := rt.s.clock.Now()
	var least time.Duration
	for _, c := range mr.candidates {
		if st, ok := rt.s.engine.StatusOf(now, health.Key{Channel: c.Channel, Model: mr.model}); ok {
			if d := st.RetryAfterUntil.Sub(now); d > 0 && (least == 0 || d < least) {
				least = d
			}
		}
	}
	return least
}

// passThrough returns an upstream 4xx to the client unchanged.
func (rt *routeState) passThrough(res result, ch *routing.Channel) {
	h := rt.w.Header()
	ct := "application/json"
	if res.header != nil && res.header.Get("Content-Type") != "" {
		ct = res.header.Get("Content-Type")
	}
	h.Set("Content-Type", ct)
	h.Set("X-Switchyard-Channel", ch.ID())
	h.Set("X-Switchyard-Attempts", fmt.Sprint(rt.attempts))
	rt.w.WriteHeader(res.status)
	_, _ = rt.w.Write(res.body)
}

func (rt *routeState) key(ch *routing.Channel) string {
	if k, ok := rt.c.table.Credentials[ch.ID()]; ok {
		return k.Reveal()
	}
	return ""
}

// reject answers a request refused before any upstream attempt and counts it by reason (which
// is also the error's code).
func (s *Server) reject(w http.ResponseWriter, status int, reason, typ, msg string, retryAfter time.Duration) {
	s.metrics.Rejected.WithLabelValues(reason).Inc()
	writeError(w, status, typ, reason, msg, retryAfter)
}

func (s *Server) rejectTooLarge(w http.ResponseWriter) {
	w.Header().Set("Connection", "close") // the rest of the body is not read
	s.reject(w, http.StatusRequestEntityTooLarge, "request_too_large", "invalid_request_error",
		fmt.Sprintf("request body exceeds the limit of %d bytes", s.opts.MaxBodyBytes), 0)
}

// requestID is the request's id: the trusted header's when one is configured and it holds a
// plausible id, otherwise a new one. A client-chosen id is not trusted by default: it lands in
// logs and upstream headers, where a client could forge or collide with another's.
func (s *Server) requestID(r *http.Request) string {
	if h := s.opts.RequestIDHeader; h != "" {
		if v := r.Header.Get(h); validRequestID(v) {
			return v
		}
	}
	return newRequestID()
}

// validRequestID accepts ids of up to 128 visible ASCII characters without spaces or quotes.
func validRequestID(v string) bool {
	if v == "" || len(v) > 128 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// errBodyBudget: holding this body would take the request bodies in memory over the budget.
var errBodyBudget = errors.New("request body budget exhausted")

// readBody reads a request body, holding its buffer against the server-wide budget of buffered
// body bytes (MaxBufferedBodyBytes). held is what the caller must give back (bodyBytes.Add(-held))
// when the request is done, error or not.
func (s *Server) readBody(r io.Reader, hint int64) (body []byte, held int64, err error) {
	budget := s.opts.MaxBufferedBodyBytes
	hold := func(n int64) bool {
		if s.bodyBytes.Add(n) > budget {
			s.bodyBytes.Add(-n)
			return false
		}
		held += n
		return true
	}
	body, err = readAllSized(r, hint, hold)
	return body, held, err
}

// readAllSized is io.ReadAll with the buffer sized from a Content-Length hint (capped at 1 MiB, so
// a client that announces a large body and sends nothing costs little), instead of growing from
// 512 bytes through a series of copies. hold is asked for every byte of capacity before it is
// allocated; when it refuses, reading stops with errBodyBudget.
func readAllSized(r io.Reader, hint int64, hold func(int64) bool) ([]byte, error) {
	size := int64(512)
	if hint > 0 {
		size = min(hint, 1<<20) + 1 // +1: io.EOF is seen without growing
	}
	if !hold(size) {
		return nil, errBodyBudget
	}
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			grow := int64(cap(b)) // doubling, as append would
			if !hold(grow) {
				return b, errBodyBudget
			}
			nb := make([]byte, len(b), int64(cap(b))+grow)
			copy(nb, b)
			b = nb
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
