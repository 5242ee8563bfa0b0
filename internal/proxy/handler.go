package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/pii"
	"github.com/switchyard-io/switchyard/internal/proxy/clientapi"
	"github.com/switchyard-io/switchyard/internal/proxy/clients"
	"github.com/switchyard-io/switchyard/internal/proxy/piimask"
	"github.com/switchyard-io/switchyard/internal/proxy/recovery"
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
		shape := clientapi.ShapeFor(path)
		switch {
		case apiPaths[path]:
			if r.Method != http.MethodPost {
				w.Header().Set("Allow", http.MethodPost)
				s.refuseUnread(w, r, shape, http.StatusMethodNotAllowed, "method_not_allowed", "invalid_request_error",
					fmt.Sprintf("%s %s is not supported; use POST", r.Method, path), 0)
				return
			}
			s.serveAPI(w, r, strings.TrimPrefix(path, "/v1"))
		case path == "/healthz" || path == "/readyz":
			s.serveProbe(w, r, path)
		case path == "/v1/models":
			if r.Method != http.MethodGet {
				w.Header().Set("Allow", http.MethodGet)
				s.refuseUnread(w, r, shape, http.StatusMethodNotAllowed, "method_not_allowed", "invalid_request_error",
					fmt.Sprintf("%s %s is not supported; use GET", r.Method, path), 0)
				return
			}
			s.serveModels(w, r)
		default:
			s.refuseUnread(w, r, shape, http.StatusNotFound, "unknown_url", "invalid_request_error",
				fmt.Sprintf("unknown path %s %s; Switchyard serves /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, /v1/messages, /v1/messages/count_tokens and /v1/models", r.Method, path), 0)
		}
	})
}

// serveProbe answers /healthz and /readyz on the API port too, for load balancers and clients
// that reach only that port. No key is needed, so the answer says nothing but ok or not ready:
// why a proxy is not ready is for the admin port.
func (s *Server) serveProbe(w http.ResponseWriter, r *http.Request, path string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		s.refuseUnread(w, r, clientapi.ShapeFor(path), http.StatusMethodNotAllowed, "method_not_allowed", "invalid_request_error",
			fmt.Sprintf("%s %s is not supported; use GET", r.Method, path), 0)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if path == "/readyz" && s.notReady() != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready\n"))
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// serveModels lists the served models. With keys required it needs a key like the API and lists
// only the models that client may call: the list must not tell one team what another routes.
// It writes no audit line (nothing is routed), but a failed key counts as on the API.
func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		// A GET with a body: net/http discards it after the answer, within the body deadline.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.BodyReadTimeout))
	}
	call, w := s.beginCall(w, "/models")
	if !call.authenticate(r) {
		return
	}
	var allowed func(string) bool // nil: every model (an open proxy)
	if call != nil && call.entry != nil {
		allowed = call.entry.Client.Allows
	}
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
			if allowed == nil || allowed(name) {
				out.Data = append(out.Data, model{ID: name, Object: "model", OwnedBy: "switchyard"})
			}
		}
	}
	sort.Slice(out.Data, func(i, j int) bool { return out.Data[i].ID < out.Data[j].ID })
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// serveAPI serves one client API request: admission, the client layer, the body, the routing
// configuration, PII masking, then the failover walk (routeState.run).
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, path string) {
	shape := clientapi.ShapeFor(path)
	rc := http.NewResponseController(w) // kept here: returned from a function, it would escape
	// A write deadline left by the connection's previous request must not cut this one short.
	_ = rc.SetWriteDeadline(time.Time{})
	// The body must arrive within the body-read deadline, from now: whatever answers before it is
	// read (closeUnread), net/http then discards it, and only this deadline bounds that wait.
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyReadTimeout))
	reqID, ok := s.admitConnection(w, r, shape)
	if !ok {
		return
	}
	defer s.inFlight.Add(-1)
	// Client keys, limits and the audit line (clientauth.go): the key is checked before the body
	// is read; call is nil, and w unchanged, on an open proxy without an audit log.
	call, w := s.beginCall(w, path)
	defer call.finish(reqID)
	if call.refuseUnaudited() || !call.authenticate(r) || !call.limit(r) {
		return
	}
	body, held, ok := s.readRequestBody(w, r, shape, call)
	defer s.bodyBytes.Add(-held)
	if !ok {
		return
	}
	_ = rc.SetReadDeadline(time.Time{})
	c, cr, ok := s.admitRequest(w, shape, body, call)
	if !ok {
		return
	}
	body = cr.BodyOr(body)
	if path == clientapi.PathCountTokens {
		if mr := c.models[cr.Model]; mr != nil && c.countsLocally(mr) {
			s.serveCountTokens(w, shape, mr, body)
			return
		}
	}
	// The planner holds the request (its Fit) behind an interface, so a routeState lives on the
	// heap: it is pooled, with its plan's scratch, instead of allocated per request.
	rt, _ := s.routeStates.Get().(*routeState)
	if rt == nil {
		rt = new(routeState)
	}
	*rt = routeState{
		s: s, c: c, w: w, req: cr, path: path, header: r.Header, requestID: reqID,
		drill: strings.EqualFold(r.Header.Get("X-Switchyard-Drill"), "true"), call: call, plan: rt.plan,
	}
	defer s.putRouteState(rt)
	defer call.routed(rt)
	masked, ok := s.maskForModel(rt, shape, body)
	defer s.bodyBytes.Add(-masked)
	if !ok {
		return
	}
	start := s.clock.Now()
	s.countRequest(c.models[cr.Model].Policy, cr.Model, rt.cohort, rt.run(r.Context()), start)
}

// countRequest counts a routed request by its outcome, and in its rollout cohort's figures.
func (s *Server) countRequest(pol *routing.Policy, model string, cohort failover.Cohort, outcome string, start time.Time) {
	s.metrics.Requests.WithLabelValues(pol.Namespace, model, outcome, cohort.String()).Inc()
	if pol.Rollout != nil {
		s.recordCohort(pol, cohort, outcome, s.clock.Now().Sub(start))
	}
}

// admitConnection sets the request's ID and takes an in-flight slot; when it returns ok the
// caller must give the slot back (s.inFlight.Add(-1)).
func (s *Server) admitConnection(w http.ResponseWriter, r *http.Request, shape clientapi.Shape) (string, bool) {
	reqID := s.requestID(r)
	w.Header().Set("X-Request-Id", reqID)
	if n := s.inFlight.Add(1); n > int64(s.opts.MaxInFlight) {
		s.inFlight.Add(-1)
		s.refuseUnread(w, r, shape, http.StatusServiceUnavailable, "overloaded", "server_error",
			fmt.Sprintf("the gateway is serving its limit of %d requests at once; retry shortly", s.opts.MaxInFlight), time.Second)
		return reqID, false
	}
	return reqID, true
}

// readRequestBody reads the client's body within the size and memory limits, or answers why
// not. held is what the body holds of the gateway's body budget, to give back whatever ok says.
func (s *Server) readRequestBody(w http.ResponseWriter, r *http.Request, shape clientapi.Shape, call *clientCall) (body []byte, held int64, ok bool) {
	if len(r.TransferEncoding) > 0 {
		// Go's server lets Transfer-Encoding override a Content-Length sent with it, where a
		// front proxy may have framed the body by the Content-Length: a smuggled request. Every
		// OpenAI client sends Content-Length, so a chunked body is refused, and with it any
		// request carrying both.
		w.Header().Set("Connection", "close")
		s.reject(w, shape, http.StatusLengthRequired, "framing", "invalid_request_error",
			"request bodies must be sent with a Content-Length, not Transfer-Encoding", 0)
		return nil, 0, false
	}
	if r.ContentLength > s.opts.MaxBodyBytes {
		s.rejectTooLarge(w, shape)
		return nil, 0, false
	}
	body, held, err := s.readBody(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes), r.ContentLength, call)
	if err != nil {
		// What is left of the body is not read: the connection closes after the answer, and
		// the read deadline stays to bound net/http's discard of it.
		w.Header().Set("Connection", "close")
		s.rejectBodyRead(w, shape, call, err)
		return nil, held, false
	}
	return body, held, true
}

// rejectBodyRead answers a body that could not be read whole.
func (s *Server) rejectBodyRead(w http.ResponseWriter, shape clientapi.Shape, call *clientCall, err error) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		s.rejectTooLarge(w, shape)
	case errors.Is(err, errFairShare):
		s.rejectFairShare(call)
	case errors.Is(err, errBodyBudget):
		s.reject(w, shape, http.StatusServiceUnavailable, "overloaded", "server_error",
			"the gateway holds its limit of request bodies in memory; retry shortly", time.Second)
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.reject(w, shape, http.StatusRequestTimeout, "body_timeout", "invalid_request_error",
			fmt.Sprintf("the request body did not arrive within %s", s.opts.BodyReadTimeout), 0)
	default:
		s.reject(w, shape, http.StatusBadRequest, "body_read_error", "invalid_request_error", "failed to read the request body", 0)
	}
}

// admitRequest parses the body and has the client layer admit it against the loaded
// configuration, or answers why not (malformed, no config, a model the client may not use or
// the gateway does not route).
func (s *Server) admitRequest(w http.ResponseWriter, shape clientapi.Shape, body []byte, call *clientCall) (*config, *clientapi.Request, bool) {
	cr, err := clientapi.ParseRequest(body)
	if err != nil {
		code := "invalid_request"
		if br, ok := err.(clientapi.BadRequest); ok && br.Code != "" {
			code = br.Code
		}
		s.reject(w, shape, http.StatusBadRequest, code, "invalid_request_error", err.Error(), 0)
		return nil, nil, false
	}
	c := s.cfg.Load()
	if c == nil {
		clientapi.WriteError(w, shape, http.StatusServiceUnavailable, "server_error", "no_config", "the gateway has no routing configuration loaded yet", 0)
		return nil, nil, false
	}
	cr, admitted := call.admit(c, cr)
	if !admitted {
		return nil, nil, false
	}
	if c.models[cr.Model] == nil {
		s.metrics.Requests.WithLabelValues("", "unknown", "model_not_found", "").Inc()
		clientapi.WriteError(w, shape, http.StatusNotFound, "invalid_request_error", "model_not_found",
			fmt.Sprintf("the model %q does not exist or is not routed by this gateway; GET /v1/models lists the served models", cr.Model), 0)
		return nil, nil, false
	}
	return c, cr, true
}

// maskForModel masks the request's personal data when the requested model's policy says so
// (for every hop: fallbacks get the same masked body), or answers why it cannot. held is what
// the masked copy holds of the body budget, to give back whatever ok says.
func (s *Server) maskForModel(rt *routeState, shape clientapi.Shape, body []byte) (held int64, ok bool) {
	pr := rt.c.models[rt.req.Model].pii
	if pr == nil {
		return 0, true
	}
	if clientapi.IsMessagesPath(rt.path) {
		s.reject(rt.w, shape, http.StatusBadRequest, "pii_unsupported", "invalid_request_error",
			fmt.Sprintf("model %q is routed by a policy that masks personal data, which /v1/messages does not support yet; use /v1/chat/completions", rt.req.Model), 0)
		return 0, false
	}
	cr := rt.req
	if rt.req, rt.restore, rt.piiMasked, ok = s.applyPII(rt.w, pr, rt.path, body, cr); !ok {
		return 0, false
	}
	if rt.req != cr {
		// The masked copy is held for the whole request too (not against the budget: the
		// client's body was, and the copy is about its size).
		held = int64(len(rt.req.Body))
		s.bodyBytes.Add(held)
	}
	return held, true
}

// routeState is one client request's walk through channels and fallback models: the I/O around
// the failover planner (internal/failover), which decides every step.
type routeState struct {
	s         *Server
	c         *config
	w         http.ResponseWriter
	req       *clientapi.Request
	path      string
	header    http.Header
	requestID string
	drill     bool
	cohort    failover.Cohort // the request's rollout cohort (failover.ChooseCohort)

	plan       failover.Plan
	res        result           // the last attempt's result (a 4xx handed back as it is)
	prev       *routing.Channel // the channel of the previous attempt, whatever its outcome
	prevReason string
	restore    *pii.Session   // the masked values to put back into the answer; nil for none
	piiMasked  map[string]int // values masked per detector, for the access log
	call       *clientCall    // the client layer's record of the request (nil: none)
	// need and translations are capability routing's (messages.go).
	need         need
	translations map[translationKey]translationResult
	// failedOn are the channels that failed this request, and whether a failure there was a
	// timeout: a stream recovery tries them last, or not at all (recover.go). nil until one does.
	failedOn map[string]bool
}

// failed records an attempt's result on ch when it is a failure (not an answer, and not the
// client going away).
func (rt *routeState) failed(ch *routing.Channel, r *result) {
	if r.canceled || r.outcome == health.OutcomeSuccess {
		return
	}
	if rt.failedOn == nil {
		rt.failedOn = make(map[string]bool, 2)
	}
	id := ch.ID()
	rt.failedOn[id] = rt.failedOn[id] || r.endedOnTimeout()
}

// failedHere reports whether a channel failed this request, and whether it timed out there.
func (rt *routeState) failedHere(id string) (failed, timedOut bool) {
	timedOut, failed = rt.failedOn[id]
	return failed, timedOut
}

// run routes the request as the planner says (see failover.Plan for the order of resort: the
// model's channels, the same channel again, fallbackModels, context overflow, panic routing,
// 503 or 429): it runs the attempts, waits the waits and writes the answer.
//
// It returns the outcome class for switchyard_requests_total.
func (rt *routeState) run(ctx context.Context) string {
	s := rt.s
	p := &rt.plan
	var rnd failover.Rand = failover.GlobalRand{}
	if s.rand != nil {
		rnd = s.rand(rt.requestID)
	}
	p.Start(rt.c, s.engine, rnd, s.clock.Now(), rt.req.Model)
	p.SetFit(rt)
	if e := rt.call.client(); e != nil {
		p.SetAllowed(e.Client) // every hop within the client's models, as the requested one was (admit)
	}
	rt.cohort = failover.ChooseCohort(p.First().Policy, rt.cohortKey())
	p.SetCohort(rt.cohort)
	// Each attempt takes at most a wait and a try, and the planner stops after maxAttempts: the
	// bound is a guard, never reached.
	for range 2*p.First().Policy.Retry.MaxAttempts + 2 {
		st := p.Next(s.clock.Now())
		switch st.Action {
		case failover.ActionWait:
			if !s.sleep(ctx, st.Wait) {
				return "canceled"
			}
		case failover.ActionTry:
			res, done := rt.try(ctx, st)
			if done != "" {
				return done
			}
			rt.res = res
			p.Observe(failover.Result{Outcome: res.outcome, RetryAfter: res.retryAfter, ErrCode: res.errCode, Detail: res.shown()}) // the client-safe text: it reaches the 503
		default:
			return rt.stop(st)
		}
	}
	return rt.stop(failover.Step{Action: failover.ActionStop, Stop: failover.StopUnavailable, Attempts: p.Attempts(), Detail: "; the failover plan did not end"})
}

// try runs the attempt of st. done is non-empty when the request is finished (the outcome class).
func (rt *routeState) try(ctx context.Context, st failover.Step) (res result, done string) {
	s := rt.s
	ch, mr := st.Channel, st.Model
	upstream, _ := ch.Upstream(mr.Name)
	body, err := rt.req.BodyFor(upstream)
	if err != nil {
		clientapi.WriteError(rt.w, clientapi.ShapeFor(rt.path), http.StatusBadRequest, "invalid_request_error", "invalid_request", "failed to encode the request", 0)
		return result{}, "client_error"
	}
	n := rt.plan.Attempts()
	if n > 1 && rt.prev != nil && rt.prev.ID() != ch.ID() {
		// namespace is the channel that takes over's; a fallback from another namespace (by
		// consent) names the channel it leaves by namespace/name.
		from := rt.prev.Name
		if rt.prev.Namespace != ch.Namespace {
			from = rt.prev.ID()
		}
		s.metrics.Failovers.WithLabelValues(ch.Namespace, mr.Name, from, ch.Name, rt.prevReason).Inc()
	}
	a := rt.withCapabilities(&attempt{channel: ch, adapter: rt.c.adapters[ch.ID()], model: mr.Name, requested: rt.req.Model, upstream: upstream, path: rt.path, body: body,
		stream: rt.req.Stream, timeout: st.Timeout, header: rt.header, requestID: rt.requestID, number: n, drill: rt.drill,
		redact: rt.c.redact, restore: rt.restore, piiMasked: rt.piiMasked, call: rt.call})
	if rt.recoverable(mr) {
		a.tap = &recovery.Tap{Messages: clientapi.IsMessagesPath(rt.path)}
		a.meter.tap = a.tap
	}
	if rt.call != nil && a.stream && a.meter.tap == nil {
		// The client's tokens count even when it abandons the stream (abandonedTokens).
		a.meter.tap = &recovery.Tap{Messages: clientapi.IsMessagesPath(rt.path), CountOnly: true}
	}
	res = s.do(ctx, rt.w, a)
	rt.failed(ch, &res)
	if a.tap != nil && res.committed && !res.canceled && res.outcome != health.OutcomeSuccess {
		res = rt.recoverStream(ctx, a, mr, res)
	}
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
	return res, ""
}

// stop writes the answer of a request no attempt answered.
func (rt *routeState) stop(st failover.Step) string {
	if st.BudgetExhausted {
		rt.s.metrics.BudgetExhausted.WithLabelValues(st.Model.Policy.Namespace, st.Model.Name).Inc()
	}
	switch st.Stop {
	case failover.StopUnfit:
		writeUnfit(rt.w, clientapi.ShapeFor(rt.path), rt.req.Model, st.Detail)
		return "client_error"
	case failover.StopPassThrough:
		rt.passThrough(rt.res, rt.prev, st.Attempts) // content_policy_violation and other 4xx are the caller's to fix
		return "client_error"
	case failover.StopRateLimited:
		clientapi.WriteError(rt.w, clientapi.ShapeFor(rt.path), http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded",
			fmt.Sprintf("every channel of model %q is rate limited", rt.req.Model), max(st.RetryAfter, time.Second))
		return "rate_limited"
	}
	msg := fmt.Sprintf("no channel could answer for model %q after %d attempt(s)", rt.req.Model, st.Attempts)
	if st.LastChannel != "" {
		msg += fmt.Sprintf("; last error from channel %s: %s", st.LastChannel, st.Detail)
	} else {
		msg += "; no channel is routable" + st.Detail
	}
	clientapi.WriteError(rt.w, clientapi.ShapeFor(rt.path), http.StatusServiceUnavailable, "server_error", "no_channel_available", msg, 0)
	return "unavailable"
}

// putRouteState returns a finished request's state to the pool, keeping nothing of the request
// but its plan's scratch.
func (s *Server) putRouteState(rt *routeState) {
	rt.plan.Release()
	*rt = routeState{plan: rt.plan}
	s.routeStates.Put(rt)
}

// Unfit and OverflowsAll make the request the planner's failover.Fit (capability routing,
// messages.go).
func (rt *routeState) Unfit(ch *routing.Channel, model string) string { return rt.unfit(ch, model) }

func (rt *routeState) OverflowsAll(m *failover.Model) bool { return rt.overflowsAll(m) }

// Model and Channel make a config the planner's failover.Routes.
func (c *config) Model(name string) *failover.Model {
	if mr := c.models[name]; mr != nil {
		return &mr.Model
	}
	return nil
}

func (c *config) Channel(id string) *routing.Channel { return c.channels[id] }

// sleep waits d, or less when the client goes away (false then). A Clock that is also a Sleeper
// (tests) moves its own time instead.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	if sl, ok := s.clock.(Sleeper); ok {
		return sl.Sleep(ctx, d)
	}
	return sleepCtx(ctx, d)
}

// Sleeper is implemented by a Clock that waits in its own time (a test clock): the proxy's
// back-offs and Retry-After waits then move that clock instead of sleeping.
type Sleeper interface {
	Sleep(ctx context.Context, d time.Duration) bool
}

// passThrough returns an upstream 4xx to the client unchanged.
func (rt *routeState) passThrough(res result, ch *routing.Channel, attempts int) {
	h := rt.w.Header()
	ct := "application/json"
	if res.header != nil && res.header.Get("Content-Type") != "" {
		ct = res.header.Get("Content-Type")
	}
	h.Set("Content-Type", ct)
	h.Set("X-Switchyard-Channel", ch.ID())
	h.Set("X-Switchyard-Attempts", strconv.Itoa(attempts))
	rt.w.WriteHeader(res.status)
	_, _ = rt.w.Write(res.body)
}

// reject answers a request refused before any upstream attempt and counts it by reason (which
// is also the error's code).
func (s *Server) reject(w http.ResponseWriter, shape clientapi.Shape, status int, reason, typ, msg string, retryAfter time.Duration) {
	s.metrics.Rejected.WithLabelValues(reason).Inc()
	clientapi.WriteError(w, shape, status, typ, reason, msg, retryAfter)
}

// refuseUnread is reject for an answer given before the request's body is read (closeUnread).
func (s *Server) refuseUnread(w http.ResponseWriter, r *http.Request, shape clientapi.Shape, status int, reason, typ, msg string, retryAfter time.Duration) {
	s.closeUnread(w, r)
	s.reject(w, shape, status, reason, typ, msg, retryAfter)
}

// closeUnread readies an answer given while the request's announced body (Content-Length, or -1
// for chunked) is still unread: net/http discards that body after the handler returns, and
// ReadHeaderTimeout does not bound the wait, so a client that announces a body and sends none
// would hold the goroutine and the connection forever. The body-read deadline bounds it (serveAPI
// set it already; the Handler's own refusals set it here), and the connection closes after.
func (s *Server) closeUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.BodyReadTimeout))
		w.Header().Set("Connection", "close")
	}
}

func (s *Server) rejectTooLarge(w http.ResponseWriter, shape clientapi.Shape) {
	w.Header().Set("Connection", "close") // the rest of the body is not read
	s.reject(w, shape, http.StatusRequestEntityTooLarge, "request_too_large", "invalid_request_error",
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

// errFairShare: holding this body would take its client over its fair share of a contended budget.
var errFairShare = errors.New("the client's fair share of the request body budget exhausted")

// rejectFairShare answers a body refused by its client's fair share of the budget (bodyShare).
func (s *Server) rejectFairShare(call *clientCall) {
	call.entry.Limiter.Count(s.clients.metrics.limited, clients.LimitFairShare, 1)
	call.capacityExceeded("request body budget")
}

// readBody reads a request body, holding its buffer against the server-wide budget of buffered
// body bytes (MaxBufferedBodyBytes). held is what the caller must give back (bodyBytes.Add(-held))
// when the request is done, error or not.
func (s *Server) readBody(r io.Reader, hint int64, call *clientCall) (body []byte, held int64, err error) {
	budget := s.opts.MaxBufferedBodyBytes
	unfair := false
	hold := func(n int64) bool {
		global := s.bodyBytes.Add(n)
		if global > budget {
			s.bodyBytes.Add(-n)
			return false
		}
		if !call.holdBody(n, global) {
			s.bodyBytes.Add(-n)
			unfair = true
			return false
		}
		held += n
		return true
	}
	body, err = readAllSized(r, hint, hold)
	if unfair {
		err = errFairShare
	}
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

// applyPII runs the model's policy's masking over a parsed request: the request to route, the
// session whose placeholders the answer gets back (nil when there is nothing to restore) and the
// values masked per detector; false when it has answered the client itself.
func (s *Server) applyPII(w http.ResponseWriter, pr *piimask.Route, path string, body []byte, cr *clientapi.Request) (*clientapi.Request, *pii.Session, map[string]int, bool) {
	m, refused := pr.Apply(path, body, cr)
	if refused != nil {
		s.reject(w, clientapi.ShapeFor(path), refused.Status, refused.Code, refused.Type, refused.Message, 0)
		return nil, nil, nil, false
	}
	for det, n := range m.Counts {
		s.metrics.PIIMasked.WithLabelValues(pr.Namespace, pr.Policy, det).Add(float64(n))
	}
	return m.Request, m.Session, m.Counts, true
}
