package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchyard-io/switchyard/internal/anthropic"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/pii"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// attempt is one call to one channel.
type attempt struct {
	channel   *routing.Channel
	key       string // provider key, "" for none
	model     string // public model name
	requested string // the model the client asked for ("" for a probe)
	upstream  string // model name sent upstream
	path      string // API path after /v1, e.g. /chat/completions
	body      []byte
	stream    bool
	timeout   time.Duration // whole attempt (non-stream) or until the first event (stream)
	header    http.Header   // the client's headers (filtered before sending)
	requestID string
	number    int
	probe     bool
	drill     bool      // the request is marked as drill traffic
	redact    *redactor // the config's: keeps provider keys out of what upstream answers carry
	// answered counts the channel×model's completed answers (Server.answeredCounter), and
	// answeredBefore is its value when the attempt began: a timeout is the channel's fault only
	// if none completed since.
	answered       *atomic.Uint64
	answeredBefore uint64
	// restore, when set, puts the originals of the request's masked values back into the answer.
	restore *pii.Session
	// piiMasked counts the values masked in the request, per detector (access log).
	piiMasked map[string]int
	// call is the client layer's record of the request (clientauth.go); nil for probes.
	call *clientCall
	// caps are the model's capabilities on this channel (the max_tokens a translation adds).
	caps routing.Capabilities
	// wire is the request as the channel's provider speaks it (wire.go); set by do.
	wire *upstream
	// translated is the body in the channel's API when routing made it already (nil: do makes it).
	translated *translated
	// Stream recovery (recovery.go): tap records what the client's stream got; deferError
	// leaves a break's in-band error to the recovery; cont, on a continuation attempt (the
	// continuation-th of the request), rewrites its events into the rest of the client's stream.
	tap          *streamTap
	deferError   bool
	cont         *contRelay
	continuation int
	// counted are the prompt and completion tokens addTokens has counted for this attempt: a
	// stream's usage figures are cumulative (vLLM's continuous usage stats repeat them on every
	// chunk, growing), so each event counts only what it adds.
	counted struct{ prompt, completion int }
	// meter watches what a client's stream relayed (the recovery's tap, or one that only
	// counts): a stream the client abandons before its usage event counts its tokens anyway
	// (abandonedTokens). nil when no client layer counts tokens. meterStart is the meter's text
	// count when the attempt's relay began; sent tells that the request went to the provider.
	meter      *streamTap
	meterStart int
	sent       bool
}

// result is what happened. When committed, bytes went to the client and nothing more may be sent.
type result struct {
	outcome    health.Outcome
	status     int
	retryAfter time.Duration
	errCode    string // error.code of an upstream 4xx
	body       []byte // the upstream's error body (4xx), for passing back to the client
	header     http.Header
	latency    time.Duration
	ttft       time.Duration
	committed  bool
	canceled   bool // the client went away: says nothing about the channel
	detail     string
	// clientDetail, when set, is what a client may be told of the failure instead of detail
	// (which quotes the provider): an adapter's Failure.ClientMessage.
	clientDetail string
	// outputTokens is a non-streamed answer's completion tokens, from its usage (0 if none).
	outputTokens int
	// timedOut: the attempt ended on a timeout (firstByte, the request's, a stall past
	// streamIdle), also when its outcome is stream_cut because bytes had reached the client.
	timedOut bool
	// reason, on a canceled result, says how the client failed when the audit line names it
	// (reasonClientWriteTimeout).
	reason string
}

// endedOnTimeout reports whether the attempt timed out, whatever its outcome class.
func (r *result) endedOnTimeout() bool { return r.timedOut || r.outcome == health.OutcomeTimeout }

// shown is the failure's text for a client: clientDetail, else detail.
func (r *result) shown() string {
	if r.clientDetail != "" {
		return r.clientDetail
	}
	return r.detail
}

// stoppedTimer stands in for a timer that is never armed; Stop on it is a no-op.
var stoppedTimer = func() *time.Timer { t := time.NewTimer(time.Hour); t.Stop(); return t }()

var (
	errFirstByte  = errors.New("no response headers or first event within the firstByte timeout")
	errStreamIdle = errors.New("stream idle longer than the streamIdle timeout")
	errAttempt    = errors.New("attempt exceeded its request timeout")
)

// maxUpstreamBody bounds a non-streamed upstream answer held in memory before it is sent on.
var maxUpstreamBody int64 = 64 << 20 // a variable so tests can lower it

// do runs one attempt. On success (and for a stream, from its first event on) it writes to w.
func (s *Server) do(ctx context.Context, w http.ResponseWriter, a *attempt) (res result) {
	start := time.Now()
	a.answered = s.answeredCounter(health.Key{Channel: a.channel.ID(), Model: a.model})
	a.answeredBefore = a.answered.Load()
	defer func() {
		if res.latency == 0 {
			res.latency = time.Since(start)
		}
		s.finishAttempt(a, &res)
	}()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	whole := time.AfterFunc(a.timeout, func() { cancel(errAttempt) })
	defer whole.Stop()
	// firstByte bounds a stream until its first event, and a probe (a one-token answer). A
	// non-streamed answer's headers come only once the whole answer is generated, so a first-byte
	// timer would fail every long answer and count it against a healthy channel: the request
	// timeout alone bounds it.
	firstByte := stoppedTimer
	if a.stream || a.probe {
		firstByte = time.AfterFunc(a.channel.Timeouts.FirstByte, func() { cancel(errFirstByte) })
		defer firstByte.Stop()
	}

	if f := s.activeFault(a); f != nil {
		if r, done := s.injectFault(ctx, f); done {
			return r
		}
	}

	up, err := upstreamFor(a, a.caps, time.Now())
	if err != nil {
		return translationFailure(err)
	}
	a.wire = up
	// bedrock and vertex: the adapter builds (signs, authorizes) the request (adapters.go).
	ad, err := s.adapterFor(a.channel)
	if err != nil {
		return result{outcome: health.OutcomeServerError, detail: "the channel's adapter does not load: " + err.Error()}
	}
	var req *http.Request
	if ad != nil {
		if req, err = adapterRequest(ctx, ad, a, up); err != nil {
			return adapterRequestFailure(ctx, a, err)
		}
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, a.channel.BaseURL+up.path, bytes.NewReader(up.body))
		if err != nil {
			return result{outcome: health.OutcomeConnectionError, detail: "building the upstream request failed"}
		}
		copyRequestHeaders(req.Header, a.header)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", a.requestID)
		setUpstreamAuth(req.Header, a, up)
	}

	a.sent = true                                         // from here the provider may bill the prompt
	resp, err := s.transportFor(a.channel).RoundTrip(req) // no redirects to follow: a 3xx is a failure (below)
	if err != nil {
		return transportFailure(ctx, err, "waiting for response headers")
	}
	defer func() { resp.Body.Close() }()
	res.status = resp.StatusCode
	res.header = resp.Header
	if ad != nil {
		if resp.StatusCode >= 300 {
			return adapterError(a, ad, resp)
		}
		if a.stream {
			events, err := ad.DecodeStream(resp)
			if err != nil {
				r, _ := streamFailure(a, err)
				r.status = resp.StatusCode
				return r
			}
			resp = sseResponse(resp, events)
		}
	}
	// The outcome is health's one classification, shared with replay; the cases below handle
	// the body each class needs.
	res.outcome = health.OutcomeFromStatus(resp.StatusCode)
	if resp.StatusCode >= 400 {
		if r, done := classifyProviderError(a, resp); done {
			return r
		}
	}

	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		res.body = a.redact.bytes(b)
		res.detail = "429 rate limited"
		return res
	case resp.StatusCode >= 500:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		res.detail = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, summarize(a.redact.bytes(b)))
		return res
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		// The provider refused the gateway's own key (revoked, expired, wrong account): the
		// channel is broken, not the request. Fail over, and never hand the provider's message
		// (which quotes part of the key) to the client.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		res.detail = fmt.Sprintf("HTTP %d: the provider rejected the channel's credentials", resp.StatusCode)
		return res
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
		// The path is the provider's own API path and the model one the channel declares: a 404
		// or 405 here is a wrong baseURL or upstreamModel, or an API this provider does not
		// serve. The channel's fault, not the client's: fail over, and let the channel show it.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		res.detail = fmt.Sprintf("HTTP %d on %s (check the channel's baseURL and upstreamModel): %s", resp.StatusCode, a.path, summarize(a.redact.bytes(b)))
		return res
	case resp.StatusCode >= 400:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		res.errCode = upstreamErrorCode(b)
		res.body = a.redact.bytes(b) // passed back to the client
		if up.errorBody != nil {
			res.body = up.errorBody(resp.StatusCode, res.body)
		}
		res.detail = fmt.Sprintf("HTTP %d %s", resp.StatusCode, res.errCode)
		return res
	case resp.StatusCode >= 300:
		res.detail = fmt.Sprintf("unexpected HTTP %d from upstream", resp.StatusCode)
		return res
	}

	if a.stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return s.relayStream(ctx, cancel, w, a, resp, firstByte, whole, start)
	}
	firstByte.Stop()
	res.ttft = time.Since(start)
	// One byte more than the limit tells a body that fits from one that was cut: an answer
	// truncated to invalid JSON must never go out as a 200.
	body, err := readAllSized(io.LimitReader(resp.Body, maxUpstreamBody+1), resp.ContentLength, holdAny)
	if err != nil {
		r := transportFailure(ctx, err, "reading the response body")
		r.status = resp.StatusCode
		return r
	}
	if int64(len(body)) > maxUpstreamBody {
		return result{outcome: health.OutcomeServerError, status: resp.StatusCode,
			detail: fmt.Sprintf("the upstream answer exceeds the proxy's %d MiB limit for non-streamed bodies", maxUpstreamBody>>20)}
	}
	res.outcome = health.OutcomeSuccess
	res.latency = time.Since(start)
	if a.probe {
		return res
	}
	if up.answer != nil {
		if body, err = up.answer(body); err != nil {
			return result{outcome: health.OutcomeServerError, status: resp.StatusCode, detail: "the upstream answer could not be translated: " + err.Error()}
		}
	}
	if u, ok := answerUsage(body); ok {
		s.addTokens(a, &u)
		res.outputTokens = u.completion()
	}
	if a.restore != nil {
		body = restoreAll(body, a.restore)
	}
	writeAnswerHeaders(w, a, resp.Header)
	// The length is known: without it net/http sends an answer over 2 KiB chunked.
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	wd := s.writeDeadline(w)
	wd.extend()
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
	res.committed = true
	return res
}

// writeDeadline bounds each write to the client by ClientWriteTimeout, so a client that stops
// reading cannot hold its request, its goroutines and an upstream connection past every
// timeout: its write fails, and the attempt ends as "client went away".
type writeDeadline struct {
	rc    *http.ResponseController
	d     time.Duration
	until time.Time
}

func (s *Server) writeDeadline(w http.ResponseWriter) *writeDeadline {
	return &writeDeadline{rc: http.NewResponseController(w), d: s.opts.ClientWriteTimeout}
}

// extend moves the deadline to ClientWriteTimeout from now, but only once half of it has gone:
// a stream of many small events resets the connection's timer a few times, not once per event.
func (wd *writeDeadline) extend() {
	now := time.Now()
	if wd.until.Sub(now) > wd.d/2 {
		return
	}
	wd.until = now.Add(wd.d)
	_ = wd.rc.SetWriteDeadline(wd.until) // not supported (a probe's discard writer): no deadline needed
}

// transportFailure classifies an error from the transport or body read.
func transportFailure(ctx context.Context, err error, during string) result {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errFirstByte), errors.Is(cause, errAttempt), errors.Is(cause, errStreamIdle):
		return result{outcome: health.OutcomeTimeout, detail: cause.Error()}
	case cause != nil:
		return result{outcome: health.OutcomeClientError, canceled: true, detail: "client went away"}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return result{outcome: health.OutcomeTimeout, detail: "deadline exceeded " + during}
	}
	return result{outcome: health.OutcomeConnectionError, detail: fmt.Sprintf("connection error %s: %s", during, redactURL(err))}
}

// relayStream holds the client's headers back until the upstream's first event has arrived, so
// a provider that fails or stays silent before it can still be failed over. After that, events are
// flushed as they arrive, and a broken stream ends with an in-band error event and no [DONE].
func (s *Server) relayStream(ctx context.Context, cancel context.CancelCauseFunc, w http.ResponseWriter, a *attempt, resp *http.Response, firstByte, whole *time.Timer, start time.Time) (res result) {
	res.status = resp.StatusCode
	sr := newSSEReader(resp.Body)
	flusher, _ := w.(http.Flusher)
	flush := flushChecked(w)
	wd := s.writeDeadline(w)
	// idle is armed only while the relay waits on the upstream (sr.next): a client that reads
	// slowly blocks the writes and flushes between, and that time is the client's, never the
	// provider's silence (its limit is ClientWriteTimeout).
	var idle *time.Timer
	defer func() {
		if idle != nil {
			idle.Stop()
		}
	}()
	var complete bool
	pending := false // events written to the client but not flushed yet
	var restore *streamRestore
	if a.restore != nil {
		restore = newStreamRestore(a.restore, a.path)
	}
	if a.meter != nil {
		a.meterStart = a.meter.sent
	}
	for {
		// Events that arrived together go out in one write: flush only when no complete event
		// is waiting behind the ones written, so a burst costs one syscall and nothing waits.
		if pending && !sr.eventBuffered() {
			if err := flush(); err != nil {
				return s.clientWriteFailure(err, &res)
			}
			pending = false
		}
		if idle != nil {
			idle.Reset(a.channel.Timeouts.StreamIdle)
		}
		ev, err := sr.next()
		if idle != nil {
			idle.Stop()
		}
		if err != nil {
			if errors.Is(err, io.EOF) && complete {
				res.outcome = health.OutcomeSuccess
				if !sr.sawDone && res.committed {
					// A clean close after finish_reason is a complete answer: end it now for the
					// client, with the terminator clients wait for.
					wd.extend() // the upstream's silence before its close may have outlasted the last deadline
					if restore != nil {
						_, _ = w.Write(restore.end())
					}
					_, _ = w.Write(a.streamEnd())
					pending = true
				}
				if pending {
					// The answer is whole only once the client has it: a client that stopped
					// reading its end is the client's failure, not a success of the stream's.
					if err := flush(); err != nil {
						return s.clientWriteFailure(err, &res)
					}
				}
				return res
			}
			r := transportFailure(ctx, err, "reading the stream")
			if f, ok := streamFailure(a, err); ok && !r.canceled && r.outcome == health.OutcomeConnectionError {
				r = f // an adapter's classified failure: an error event, an exception, a stream cut short
			}
			if r.canceled {
				r.committed = res.committed
				r.ttft = res.ttft
				return r
			}
			if r.outcome == health.OutcomeConnectionError || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				r.outcome = health.OutcomeStreamCut
				r.detail = "upstream closed the stream before it completed"
			}
			if res.committed {
				// Bytes already went to the client: a cut, stall or broken stream counts as stream_cut.
				r.timedOut = r.outcome == health.OutcomeTimeout
				r.outcome = health.OutcomeStreamCut
			}
			if res.committed && !a.deferError {
				wd.extend() // the in-band error reaches a client that reads, however long the upstream was silent
				if restore != nil {
					_, _ = w.Write(restore.end())
				}
				writeStreamErrorFor(a, w, flusher, r.shown())
			}
			r.status, r.committed, r.ttft = res.status, res.committed, res.ttft
			return r
		}
		if ev.malformed {
			continue // a single malformed event is passed over, not fatal
		}
		if ev.upstreamError {
			detail := "upstream sent an error event mid-stream"
			if res.committed && !a.deferError {
				wd.extend() // the in-band error reaches a client that reads, however long the upstream was silent
				if restore != nil {
					_, _ = w.Write(restore.end())
				}
				writeStreamErrorFor(a, w, flusher, detail)
			}
			return result{outcome: health.OutcomeStreamCut, status: res.status, committed: res.committed, ttft: res.ttft, detail: detail}
		}
		if a.wire != nil && a.wire.stream != nil && !a.wire.convertEvent(&ev) {
			continue // malformed for the translation: passed over like any malformed event
		}
		if !res.committed && ev.noData {
			continue // a keep-alive before the first event commits nothing: failover stays possible
		}
		if !res.committed {
			firstByte.Stop()
			whole.Stop() // from the first event on, streamIdle governs: a long answer is not a slow one
			res.ttft = time.Since(start)
			if a.probe {
				// A probe only needs proof of life: the first event.
				res.outcome = health.OutcomeSuccess
				return res
			}
			if a.cont == nil { // a continuation's stream has its headers already
				writeAnswerHeaders(w, a, resp.Header)
				w.Header().Set("Cache-Control", "no-cache")
				w.WriteHeader(resp.StatusCode)
			}
			res.committed = true
		}
		if idle == nil {
			idle = time.AfterFunc(a.channel.Timeouts.StreamIdle, func() { cancel(errStreamIdle) })
			idle.Stop() // armed by the next wait on the upstream
		}
		if ev.finished || ev.done {
			complete = true
		}
		if ev.usage != nil {
			s.addTokens(a, ev.usage)
			if a.meter != nil {
				a.meter.sawUsage(ev.usage)
			}
		}
		if raw, dropped := a.call.stripUsageChunk(&ev, a.wire != nil && a.wire.stream != nil); dropped {
			if len(raw) == 0 {
				continue // the usage the proxy asked for on the client's behalf
			}
			ev.raw = raw
		}
		wd.extend()
		out := ev.raw
		switch {
		case restore != nil && a.wire != nil && a.wire.stream != nil:
			out = restoreEvents(restore, ev.raw)
		case restore != nil:
			out = restore.event(&ev)
		}
		if a.cont != nil {
			var ok bool
			if out, ok = a.cont.rewrite(out); !ok {
				// The model wrote another answer, which says nothing against the channel: the
				// continuation fails without touching its health.
				return result{outcome: health.OutcomeClientError, status: res.status, committed: true, ttft: res.ttft,
					detail: "the continuation does not go on from the text already sent"}
			}
			if len(out) == 0 {
				continue
			}
		}
		if a.meter != nil {
			a.meter.observe(out)
		}
		if _, err := w.Write(out); err != nil {
			return s.clientWriteFailure(err, &res)
		}
		pending = true
	}
}

// reasonClientWriteTimeout is the audit line's reason for a stream the client stopped reading.
const reasonClientWriteTimeout = "client_write_timeout"

// clientWriteFailure is the result of a write or flush to the client that failed: the client
// went away, or read nothing for ClientWriteTimeout (the write deadline). Either is the
// client's doing, so the result is canceled: it reaches neither the channel's health, nor the
// retry budget, nor a stream recovery.
func (s *Server) clientWriteFailure(err error, res *result) result {
	r := result{outcome: health.OutcomeClientError, canceled: true, committed: true, status: res.status, ttft: res.ttft, detail: "client went away"}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		r.detail = fmt.Sprintf("the client stopped reading the stream for the client write timeout (%s)", s.opts.ClientWriteTimeout)
		r.reason = reasonClientWriteTimeout
	}
	return r
}

// flushChecked returns a flush of w that reports the write error. The proxy's own wrappers
// (statusWriter, messagesWriter) implement http.Flusher, which cannot return one, so it looks
// through them (Unwrap) for net/http's FlushError; a writer with neither is not flushed.
func flushChecked(w http.ResponseWriter) func() error {
	for {
		switch t := w.(type) {
		case interface{ FlushError() error }:
			return t.FlushError
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		case http.Flusher:
			return func() error { t.Flush(); return nil }
		default:
			return func() error { return nil }
		}
	}
}

func flushIf(f http.Flusher) {
	if f != nil {
		f.Flush()
	}
}

// writeStreamError ends a committed stream with an in-band error event (and no [DONE]), so no
// client can mistake it for a complete answer.
func writeStreamError(w io.Writer, f http.Flusher, detail string) {
	b, _ := json.Marshal(map[string]any{"error": apiError{
		Message: "the upstream stream was interrupted before completion: " + detail,
		Type:    "upstream_error", Code: strPtr("stream_interrupted"),
	}})
	_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
	flushIf(f)
}

func strPtr(s string) *string { return &s }

// finishAttempt reports the outcome to the health engine, the metrics and the access log.
func (s *Server) finishAttempt(a *attempt, r *result) {
	now := s.clock.Now()
	key := health.Key{Channel: a.channel.ID(), Model: a.model}
	switch {
	case a.probe && r.outcome == health.OutcomeClientError && !r.canceled:
		// A probe the provider refuses (wrong shape, missing model) proves nothing: it fails, so
		// the channel is journaled as ProbeFailed instead of waiting in Probing forever.
		r.outcome = health.OutcomeServerError
		r.detail = "probe refused: " + r.detail
	case !a.probe && r.outcome == health.OutcomeSuccess:
		// Probes copy the API real traffic uses for this channel×model.
		if p, ok := s.apiPaths.Load(key); !ok || p.(string) != a.path {
			s.apiPaths.Store(key, a.path)
		}
	}
	counted := !r.canceled
	if r.outcome == health.OutcomeSuccess {
		a.answered.Add(1)
	} else if r.outcome == health.OutcomeTimeout && !a.stream && !a.probe {
		// A non-streamed answer arrives whole, so one that outlives the request timeout may be
		// a hung channel or just a long answer. A channel that completed other answers meanwhile
		// is alive: the timeout is the request's length (a large max_tokens), not the channel's
		// fault, and counting it would let any client eject healthy channels with long requests.
		if n := a.answered.Load() - a.answeredBefore; n > 0 {
			counted = false
			r.detail += fmt.Sprintf(" (not counted against the channel: it completed %d other answer(s) meanwhile; for answers this long raise spec.timeouts.request or stream)", n)
		}
	}
	if counted {
		s.engine.Observe(key,
			health.Observation{At: now, Outcome: r.outcome, Latency: healthLatency(a.stream, r), RetryAfter: r.retryAfter, Probe: a.probe})
	}
	outcome := r.outcome.String()
	if r.canceled {
		outcome = "canceled"
	}
	if !a.probe {
		s.metrics.Attempts.WithLabelValues(a.channel.Namespace, a.channel.Name, a.channel.Provider, a.model, outcome).Inc()
		s.metrics.Duration.WithLabelValues(a.channel.Namespace, a.channel.Name, a.model).Observe(r.latency.Seconds())
		if r.ttft > 0 {
			s.metrics.TTFT.WithLabelValues(a.channel.Namespace, a.channel.Name, a.model).Observe(r.ttft.Seconds())
		}
	}
	a.call.attempt(a, r)
	var estimated *accessTokens
	if r.canceled {
		if p, c := abandonedTokens(a); p+c > 0 {
			a.call.add(int64(p), int64(c), true)
			estimated = &accessTokens{Prompt: p, Completion: c}
		}
	}
	if s.accessLog == nil {
		return
	}
	line := &accessLogLine{TS: now.UTC(), RequestID: a.requestID, Channel: a.channel.ID(), Model: a.model, Attempt: a.number,
		Status: r.status, Outcome: r.outcome.String(), LatencyMs: r.latency.Milliseconds(), TTFTMs: ttftMs(r.ttft),
		Stream: a.stream, Probe: a.probe, PII: a.piiMasked, Continuation: a.continuation}
	if estimated != nil {
		line.Estimated, line.Tokens = true, estimated
	}
	if !a.probe && a.requested != a.model {
		line.RequestedModel = a.requested
	}
	if !a.probe {
		line.CohortKey = cohortHeader(a.header)
	}
	if r.outcome != health.OutcomeSuccess {
		line.Error = r.detail
		line.ErrorCode = r.errCode
		line.RetryAfterMs = r.retryAfter.Milliseconds()
	}
	s.accessLog.write(line)
}

// abandonedTokens are the tokens of a stream the client abandoned (canceled) that no usage event
// counted: the provider bills the prompt it was sent and the text it wrote all the same, so they
// count against the client's token limits, as estimates. The prompt is message_start's input
// (Messages API) when the stream got that far, else estimated from the request's text; the
// completion is estimated from the text relayed to the client, as stream recovery estimates a
// broken part's (estTokens). An attempt never sent counts nothing.
func abandonedTokens(a *attempt) (prompt, completion int) {
	if !a.sent || a.meter == nil {
		return 0, 0
	}
	if a.counted.prompt == 0 {
		if cur := &a.meter.cur; cur.promptKnown {
			prompt = cur.prompt
		} else {
			prompt = a.promptEstimate()
		}
	}
	if a.counted.completion == 0 {
		completion = estTokens(a.meter.sent - a.meterStart)
	}
	return prompt, completion
}

// promptEstimate is the attempt's prompt tokens estimated from its text where the proxy reads it
// (chat/completions and the Messages API), else from the whole body: at least one. The body is
// the client's API's (a continuation's with its prefill). It reads the body again: for the
// rare abandoned stream only.
func (a *attempt) promptEstimate() int {
	n := 0
	if a.path == "/chat/completions" || isMessagesPath(a.path) {
		n = anthropic.Inspect(a.body).TextBytes
	}
	if n == 0 {
		n = len(a.body)
	}
	return max(1, estTokens(n))
}

// ttftMs is the access log's ttftMs: 0 only when no first event arrived, so a sub-millisecond
// first event still tells replay that the answer had started (a stream cut after it was not
// failed over).
func ttftMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Milliseconds(), 1)
}

// answeredCounter counts the channel×model's completed answers (probes included), for telling a
// long answer from a hung channel.
func (s *Server) answeredCounter(k health.Key) *atomic.Uint64 {
	if c, ok := s.answered.Load(k); ok {
		return c.(*atomic.Uint64)
	}
	c, _ := s.answered.LoadOrStore(k, new(atomic.Uint64))
	return c.(*atomic.Uint64)
}

// latencyTokens is the answer size the latency rules judge a non-streamed answer at: a longer
// answer's latency is scaled down to the time this many tokens took at its own pace.
const latencyTokens = 256

// healthLatency is the latency the health engine judges, which must say how fast the channel is,
// not how much the client asked for:
//   - a stream: its time to first event (its length is the answer's, not the channel's);
//   - a non-streamed answer of more than latencyTokens completion tokens: its latency scaled to
//     latencyTokens at the same pace (total × latencyTokens / tokens). The headers of such an
//     answer arrive only when it is complete, so its latency grows with max_tokens; per token, it
//     does not. Answers of latencyTokens or fewer, and answers without usage, count as they are,
//     so a channel that turns slow still shows it on ordinary traffic.
//
// The scaled figure slightly overstates the pace of a long answer (its fixed time to first token
// is spread over latencyTokens instead of all of them), which errs on the side of seeing slowness.
func healthLatency(stream bool, r *result) time.Duration {
	switch {
	case stream && r.ttft > 0:
		return r.ttft
	case !stream && r.outputTokens > latencyTokens:
		return time.Duration(float64(r.latency) * latencyTokens / float64(r.outputTokens))
	}
	return r.latency
}

// forwardedHeaders are the client headers that go upstream: content negotiation, the request
// headers the providers document (OpenAI's beta opt-ins and idempotency key, Anthropic's version
// and betas), the SDKs' own metadata (X-Stainless-*, below) and trace context. Everything else
// stays at the gateway: the client's credentials and cookies, the provider account it must not
// choose (OpenAI-Organization, OpenAI-Project), hop-by-hop headers, and whatever internal
// headers a client or a front proxy adds.
var forwardedHeaders = map[string]bool{
	"Accept": true, "User-Agent": true,
	"Openai-Beta": true, "Idempotency-Key": true,
	"Anthropic-Version": true, "Anthropic-Beta": true,
	"Traceparent": true, "Tracestate": true, "Baggage": true,
	"B3": true, "X-B3-Traceid": true, "X-B3-Spanid": true, "X-B3-Parentspanid": true, "X-B3-Sampled": true, "X-B3-Flags": true,
}

// copyRequestHeaders copies the forwarded client headers; a header named in Connection is
// hop-by-hop (RFC 9110, 7.6.1) whatever its name.
func copyRequestHeaders(dst, src http.Header) {
	conn := src["Connection"]
	for k, vv := range src {
		if !forwardedHeaders[k] && !strings.HasPrefix(k, "X-Stainless-") || (conn != nil && namedIn(conn, k)) {
			continue
		}
		dst[k] = append([]string(nil), vv...)
	}
}

// namedIn reports whether a comma-separated header value lists name.
func namedIn(values []string, name string) bool {
	for _, v := range values {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), name) {
				return true
			}
		}
	}
	return false
}

// answerHeaders are the upstream answer's headers a client sees, with the X-Ratelimit-* family
// (the provider's limits, which clients pace themselves by). The provider account's headers
// (Openai-Organization, Openai-Project) and everything else stay at the gateway.
var answerHeaders = map[string]bool{"Content-Type": true, "Openai-Processing-Ms": true, "Openai-Version": true}

// writeAnswerHeaders sets the client's response headers: a few from upstream and Switchyard's own.
func writeAnswerHeaders(w http.ResponseWriter, a *attempt, up http.Header) {
	h := w.Header()
	for k, vv := range up {
		if answerHeaders[k] || strings.HasPrefix(k, "X-Ratelimit-") {
			h[k] = append([]string(nil), vv...)
		}
	}
	h.Set("X-Switchyard-Channel", a.channel.ID())
	h.Set("X-Switchyard-Model", a.model)
	h.Set("X-Switchyard-Attempts", strconv.Itoa(a.number))
}

// parseRetryAfter reads delta-seconds or an HTTP date; 0 when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs > 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// summarize shortens an upstream error body for the client's 503 message and the access log.
func summarize(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		b = []byte(e.Error.Message)
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// redactURL keeps transport errors free of URLs (with user info or query strings): a *url.Error
// from a RoundTripper that adds one is reduced to its cause.
func redactURL(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err.Error()
	}
	return err.Error()
}

// sseReader splits an event stream into events. It reuses its buffers: an event's raw bytes are
// valid until the next call to next.
type sseReader struct {
	r       *bufio.Reader
	sawDone bool
	raw     []byte // the current event
	data    []byte // its data lines joined
	long    []byte // a line longer than r's buffer
}

type sseEvent struct {
	raw           []byte // the event as received, terminated by a blank line; valid until the next event is read
	data          []byte // its data lines joined; valid until the next event is read
	done          bool   // data: [DONE]
	finished      bool   // carries a finish_reason (chat/completions) or response.completed
	malformed     bool
	upstreamError bool
	noData        bool // a comment or keep-alive (": ping"): no proof that an answer has started
	usage         *usage
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	InputTokens      int `json:"input_tokens"`
	OutputTokens     int `json:"output_tokens"`
	// The Messages API counts cached input apart from input_tokens; prompt counts all of it, as
	// OpenAI's prompt_tokens does (and the translations to it).
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// prompt is every input token of u, cached or not; completion every output token.
func (u *usage) prompt() int {
	return u.PromptTokens + u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}
func (u *usage) completion() int { return u.CompletionTokens + u.OutputTokens }

func newSSEReader(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 16<<10)} }

// readLine is bufio.Reader.ReadBytes('\n') without an allocation per line: the line is valid until
// the next read.
func (s *sseReader) readLine() ([]byte, error) {
	line, err := s.r.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return line, err
	}
	s.long = append(s.long[:0], line...)
	for err == bufio.ErrBufferFull {
		line, err = s.r.ReadSlice('\n')
		s.long = append(s.long, line...)
	}
	return s.long, err
}

// eventBuffered reports whether a whole event has been read from the network already, so that
// the next call to next returns without waiting. The reader is at an event boundary: blank lines
// there are skipped by next, and the first blank line after a non-blank one ends the event. It
// scans no further than that end.
func (s *sseReader) eventBuffered() bool {
	b, _ := s.r.Peek(s.r.Buffered())
	b = bytes.TrimLeft(b, "\r\n")
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return false
		}
		b = b[i+1:]
		if len(b) > 0 && b[0] == '\r' {
			b = b[1:]
		}
		if len(b) > 0 && b[0] == '\n' {
			return true
		}
	}
}

// next returns the next event. Comment-only events (keep-alives) are passed on as they are.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	ev.raw, s.raw = s.raw[:0], nil
	defer func() { s.raw = ev.raw }() // keep the grown buffer for the next event
	data := s.data[:0]
	defer func() { s.data = data }()
	var typ string
	for {
		line, err := s.readLine()
		if len(line) > 0 && line[len(line)-1] != '\n' {
			// A partial last line: the stream ended mid-event.
			return ev, io.ErrUnexpectedEOF
		}
		if err != nil {
			if len(ev.raw) > 0 {
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		if len(trimmed) == 0 {
			if len(ev.raw) == 0 {
				continue // stray blank line
			}
			ev.raw = append(ev.raw, '\n')
			break
		}
		ev.raw = append(ev.raw, trimmed...)
		ev.raw = append(ev.raw, '\n')
		switch {
		case bytes.HasPrefix(trimmed, []byte("data:")):
			d := bytes.TrimPrefix(bytes.TrimPrefix(trimmed, []byte("data:")), []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, d...)
		case bytes.HasPrefix(trimmed, []byte("event:")):
			typ = strings.TrimSpace(string(trimmed[len("event:"):]))
		}
	}
	ev.data = data
	switch {
	case len(data) == 0:
		ev.noData = true
	case bytes.Equal(data, []byte("[DONE]")):
		ev.done, s.sawDone = true, true
	default:
		body, finished, ok := decodeEvent(data)
		if !ok {
			ev.malformed = true
			return ev, nil
		}
		ev.finished = finished
		if body.Error != nil && string(*body.Error) != "null" || body.Type == "error" || body.Type == "response.failed" || typ == "error" {
			ev.upstreamError = true
		}
		if body.Type == "response.completed" || typ == "response.completed" {
			ev.finished = true
			if body.Resp != nil {
				ev.usage = body.Resp.Usage
			}
		}
		if body.Usage != nil {
			ev.usage = body.Usage
		}
	}
	return ev, nil
}

// addTokens counts an answer's usage figures: what they add to the attempt's figures so far (a
// stream's are cumulative; a non-streamed answer has one).
func (s *Server) addTokens(a *attempt, u *usage) {
	p := max(0, u.prompt()-a.counted.prompt)
	c := max(0, u.completion()-a.counted.completion)
	a.counted.prompt += p
	a.counted.completion += c
	if p == 0 && c == 0 {
		return
	}
	a.call.add(int64(p), int64(c), false)
	if p > 0 {
		s.metrics.Tokens.WithLabelValues(a.channel.Namespace, a.channel.Name, a.model, "prompt").Add(float64(p))
	}
	if c > 0 {
		s.metrics.Tokens.WithLabelValues(a.channel.Namespace, a.channel.Name, a.model, "completion").Add(float64(c))
	}
}

// holdAny puts no budget on a buffer: upstream answers are bounded by maxUpstreamBody alone.
func holdAny(int64) bool { return true }
