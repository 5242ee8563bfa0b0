package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/pii"
	"github.com/switchyard-io/switchyard/internal/provider"
	"github.com/switchyard-io/switchyard/internal/proxy/piimask"
	"github.com/switchyard-io/switchyard/internal/proxy/recovery"
	"github.com/switchyard-io/switchyard/internal/proxy/sse"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// attempt is one call to one channel.
type attempt struct {
	channel   *routing.Channel
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
	// target is the channel×model the health engine judges the attempt on (set by do).
	target health.Key
	// restore, when set, puts the originals of the request's masked values back into the answer:
	// a non-streamed one in do, a stream through its restore stage (streamStages.build).
	restore *pii.Session
	// piiMasked counts the values masked in the request, per detector (access log).
	piiMasked map[string]int
	// call is the client layer's record of the request (clientauth.go); nil for probes.
	call *clientCall
	// adapter is the channel's in the config that routed the attempt (adapters.go).
	adapter *channelAdapter
	// caps are the model's capabilities on this channel (the max_tokens a translation adds).
	caps routing.Capabilities
	// wire is the request as the channel's provider speaks it (wire.go); set by do.
	wire *upstream
	// translated is the body in the channel's API when routing made it already (nil: do makes it).
	translated *translated
	// Stream recovery (recover.go, package recovery), which reads these after the attempt: tap records what the
	// client's stream got (a break of a stream with a tap is the recovery's to end); cont, on a
	// continuation attempt (the continuation-th of the request), is the stage that rewrites its
	// events into the rest of the client's stream, and tells the recovery whether it departed.
	tap          *recovery.Tap
	cont         *recovery.ContRelay
	continuation int
	// counted are the prompt and completion tokens addTokens has counted for this attempt: a
	// stream's usage figures are cumulative (vLLM's continuous usage stats repeat them on every
	// chunk, growing), so each event counts only what it adds.
	counted tokensCounted
	// meter is the stream's tap as its last stage (stages.go), kept here because finishAttempt
	// reads it when the client abandons the stream (abandonedTokens); its tap is nil when no
	// client layer counts tokens. sent tells that the request went to the provider.
	meter streamMeter
	sent  bool
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
	// estimated are the tokens of an abandoned stream the client layer counted as estimates
	// (clientObserver), for the access log.
	estimated accessTokens
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

// maxUpstreamBody bounds a non-streamed upstream answer held in memory before it is sent on.
var maxUpstreamBody int64 = 64 << 20 // a variable so tests can lower it

// do runs one attempt: build the request, round-trip it, classify the answer, relay it. On
// success (and for a stream, from its first event on) it writes to w.
func (s *Server) do(ctx context.Context, w http.ResponseWriter, a *attempt) (res result) {
	start := time.Now()
	a.target = health.Key{Channel: a.channel.ID(), Model: a.model}
	a.answered = s.answeredCounter(a.target)
	a.answeredBefore = a.answered.Load()
	defer func() {
		if res.latency == 0 {
			res.latency = time.Since(start)
		}
		s.finishAttempt(a, &res)
	}()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	whole := time.AfterFunc(a.timeout, func() { cancel(failover.ErrAttempt) })
	defer whole.Stop()
	firstByte := armFirstByte(a, cancel)
	defer firstByte.Stop()

	if f := s.activeFault(a); f != nil {
		if r, done := s.injectFault(ctx, f); done {
			return r
		}
	}
	req, ad, r, ok := s.buildRequest(ctx, a)
	if !ok {
		return r
	}
	a.sent = true                                         // from here the provider may bill the prompt
	resp, err := s.transportFor(a.channel).RoundTrip(req) // no redirects to follow: a 3xx is a failure (classify)
	if err != nil {
		return transportFailure(ctx, err, "waiting for response headers")
	}
	defer func() { resp.Body.Close() }() // resp becomes the decoded stream's below
	if r, failed := classify(a, ad, resp); failed {
		return r
	}
	if d, decodes := ad.(provider.StreamDecoder); decodes && a.stream {
		events, err := d.DecodeStream(resp)
		if err != nil {
			r, _ := streamFailure(a, err)
			r.status = resp.StatusCode
			return r
		}
		resp = sseResponse(resp, events)
	}
	if a.stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return s.relayStream(ctx, cancel, w, a, resp, firstByte, whole, start)
	}
	firstByte.Stop()
	return s.relayAnswer(ctx, w, a, resp, start)
}

// armFirstByte starts the timer that bounds a stream until its first event, and a probe (a
// one-token answer). A non-streamed answer's headers come only once the whole answer is
// generated, so a first-byte timer would fail every long answer and count it against a healthy
// channel: the request timeout alone bounds it.
func armFirstByte(a *attempt, cancel context.CancelCauseFunc) *time.Timer {
	if a.stream || a.probe {
		return time.AfterFunc(a.channel.Timeouts.FirstByte, func() { cancel(failover.ErrFirstByte) })
	}
	return stoppedTimer
}

// buildRequest makes the attempt's upstream request for its channel: the body in the channel's
// API (a.wire), then the request built and authenticated by the channel's adapter (adapters.go).
// When ok is false, r is the attempt's result.
func (s *Server) buildRequest(ctx context.Context, a *attempt) (req *http.Request, ad provider.Adapter, r result, ok bool) {
	up, err := upstreamFor(a, a.caps, time.Now())
	if err != nil {
		return nil, nil, translationFailure(err), false
	}
	a.wire = up
	if ad, err = a.adapter.get(a.channel); err != nil {
		return nil, nil, result{outcome: health.OutcomeServerError, detail: "the channel's adapter does not load: " + err.Error()}, false
	}
	if req, err = adapterRequest(ctx, ad, a, up); err != nil {
		return nil, nil, adapterRequestFailure(ctx, a, err), false
	}
	return req, ad, r, true
}

// classify reads an answer that failed (any status from 300 on) into the attempt's result;
// failed is false for an answer to relay. The channel's adapter classifies the error.
func classify(a *attempt, ad provider.Adapter, resp *http.Response) (r result, failed bool) {
	if resp.StatusCode < 300 {
		return r, false
	}
	return adapterError(a, ad, resp), true
}

// relayAnswer reads a non-streamed answer whole, translates it into the client's API, counts its
// usage and writes it to w. A probe's answer is read and not written.
func (s *Server) relayAnswer(ctx context.Context, w http.ResponseWriter, a *attempt, resp *http.Response, start time.Time) result {
	res := result{status: resp.StatusCode, header: resp.Header, ttft: time.Since(start)}
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
	if a.wire.answer != nil {
		if body, err = a.wire.answer(body); err != nil {
			return answerFailure(resp.StatusCode, err)
		}
	}
	if u, ok := sse.AnswerUsage(body); ok {
		s.addTokens(a, &u)
		res.outputTokens = u.Completion()
	}
	if a.restore != nil {
		body = piimask.RestoreAll(body, a.restore)
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

// transportFailure classifies an error from the transport or body read.
func transportFailure(ctx context.Context, err error, during string) result {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, failover.ErrFirstByte), errors.Is(cause, failover.ErrAttempt), errors.Is(cause, failover.ErrStreamIdle):
		return result{outcome: health.OutcomeTimeout, detail: cause.Error()}
	case cause != nil:
		return result{outcome: health.OutcomeClientError, canceled: true, detail: "client went away"}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return result{outcome: health.OutcomeTimeout, detail: failover.DeadlineExceeded + during}
	}
	return result{outcome: health.OutcomeConnectionError, detail: fmt.Sprintf("connection error %s: %s", during, redactURL(err))}
}

// finishAttempt settles what the result says of the channel and hands the attempt to the
// server's observers (observer.go): the health engine, the metrics, the client layer, the access
// log.
func (s *Server) finishAttempt(a *attempt, r *result) {
	now := s.clock.Now()
	if a.probe && r.outcome == health.OutcomeClientError && !r.canceled {
		// A probe the provider refuses (wrong shape, missing model) proves nothing: it fails, so
		// the channel is journaled as ProbeFailed instead of waiting in Probing forever.
		r.outcome = health.OutcomeServerError
		r.detail = "probe refused: " + r.detail
	}
	// The observers see pooled copies of the attempt and its result: a pointer to do's, passed
	// through the interface, would move every attempt and its result to the heap.
	e := endedAttempts.Get().(*endedAttempt)
	e.a, e.r = *a, *r
	for _, o := range s.observers {
		o.finished(now, &e.a, &e.r)
	}
	*r = e.r
	*e = endedAttempt{}
	endedAttempts.Put(e)
}

// endedAttempt is the copy of a finished attempt its observers see (finishAttempt).
type endedAttempt struct {
	a attempt
	r result
}

var endedAttempts = sync.Pool{New: func() any { return new(endedAttempt) }}

// abandonedTokens are the tokens of a stream the client abandoned (canceled) that no usage event
// counted: the provider bills the prompt it was sent and the text it wrote all the same, so they
// count against the client's token limits, as estimates. The prompt is message_start's input
// (Messages API) when the stream got that far, else estimated from the request's text; the
// completion is estimated from the text relayed to the client, as stream recovery estimates a
// broken part's (recovery.EstTokens). An attempt never sent counts nothing.
func abandonedTokens(a *attempt) (prompt, completion int) {
	if !a.sent || a.meter.tap == nil {
		return 0, 0
	}
	if a.counted.prompt == 0 {
		if cur := &a.meter.tap.Cur; cur.PromptKnown {
			prompt = cur.Prompt
		} else {
			prompt = a.promptEstimate()
		}
	}
	if a.counted.completion == 0 {
		completion = recovery.EstTokens(a.meter.tap.Sent - a.meter.start)
	}
	return prompt, completion
}

// promptEstimate is the attempt's prompt tokens estimated from its text where the proxy reads it
// (inspected), else from the whole body: at least one. The body is the client's API's (a
// continuation's with its prefill). It reads the body again: for the rare abandoned stream only.
func (a *attempt) promptEstimate() int {
	n := 0
	if inspected(a.path) {
		n = inspect(a.path, a.body).TextBytes
	}
	if n == 0 {
		n = len(a.body)
	}
	return max(1, recovery.EstTokens(n))
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

// redactURL keeps transport errors free of URLs (with user info or query strings): a *url.Error
// from a RoundTripper that adds one is reduced to its cause.
func redactURL(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err.Error()
	}
	return err.Error()
}

// addTokens counts an answer's usage figures: what they add to the attempt's figures so far (a
// stream's are cumulative; a non-streamed answer has one).
func (s *Server) addTokens(a *attempt, u *sse.Usage) {
	s.countTokens(a.call, a.channel, a.model, &a.counted, u)
}

// tokensCounted are the prompt and completion tokens counted for an attempt so far.
type tokensCounted struct{ prompt, completion int }

// countTokens is addTokens on the figures counted so far (a stream's usage stage counts on its own
// copy, so that it holds no pointer into the attempt).
func (s *Server) countTokens(call *clientCall, ch *routing.Channel, model string, counted *tokensCounted, u *sse.Usage) {
	p := max(0, u.Prompt()-counted.prompt)
	c := max(0, u.Completion()-counted.completion)
	counted.prompt += p
	counted.completion += c
	if p == 0 && c == 0 {
		return
	}
	call.add(int64(p), int64(c), false)
	if p > 0 {
		s.metrics.Tokens.WithLabelValues(ch.Namespace, ch.Name, model, "prompt").Add(float64(p))
	}
	if c > 0 {
		s.metrics.Tokens.WithLabelValues(ch.Namespace, ch.Name, model, "completion").Add(float64(c))
	}
}

// holdAny puts no budget on a buffer: upstream answers are bounded by maxUpstreamBody alone.
func holdAny(int64) bool { return true }
