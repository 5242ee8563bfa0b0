package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
)

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
