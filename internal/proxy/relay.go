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

	"github.com/switchyard-io/switchyard/internal/anthropic"
	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/proxy/clientapi"
	"github.com/switchyard-io/switchyard/internal/proxy/sse"
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
// What happens to each event on its way is the attempt's stages' (stages.go).
func (s *Server) relayStream(ctx context.Context, cancel context.CancelCauseFunc, w http.ResponseWriter, a *attempt, resp *http.Response, firstByte, whole *time.Timer, start time.Time) result {
	r := streamRelay{s: s, w: w, cancel: cancel, idleAfter: a.channel.Timeouts.StreamIdle, sr: *sse.NewReader(resp.Body), flusher: flushChecked(w),
		stages: new(streamStages)}
	r.stages.rc = *http.NewResponseController(w)
	r.wd = writeDeadline{rc: &r.stages.rc, d: s.opts.ClientWriteTimeout}
	r.httpFlusher, _ = w.(http.Flusher)
	r.res.status = resp.StatusCode
	r.stages.build(s, a)
	defer r.close(a)
	ev := &r.stages.ev
	var complete bool
	for {
		if err := r.flushBurst(); err != nil {
			return s.clientWriteFailure(err, &r.res)
		}
		if err := r.next(); err != nil {
			if errors.Is(err, io.EOF) && complete {
				return r.ended(a)
			}
			return r.broken(ctx, a, err)
		}
		if ev.Malformed {
			continue // a single malformed event is passed over, not fatal
		}
		if ev.UpstreamError {
			return r.failed(a, result{outcome: health.OutcomeStreamCut, detail: "upstream sent an error event mid-stream"})
		}
		if run(r.stages.read, ev) != pass {
			continue // malformed for the translation, or held back by it
		}
		if !r.res.committed {
			if ev.NoData {
				continue // a keep-alive before the first event commits nothing: failover stays possible
			}
			if r.commit(a, resp, firstByte, whole, start) {
				return r.res // a probe only needs proof of life: the first event
			}
		}
		complete = complete || ev.Finished || ev.Done
		switch run(r.stages.answer, ev) {
		case drop:
			continue
		case depart:
			// The model wrote another answer, which says nothing against the channel: the
			// continuation fails without touching its health.
			return result{outcome: health.OutcomeClientError, status: r.res.status, committed: true, ttft: r.res.ttft,
				detail: "the continuation does not go on from the text already sent"}
		}
		r.wd.extend()
		if _, err := w.Write(ev.Raw); err != nil {
			return s.clientWriteFailure(err, &r.res)
		}
		r.pending = true
	}
}

// streamRelay is one stream on its way to the client: what relayStream's loop and its ends share.
// The attempt is not in it but passed along: escape analysis sees a struct as one, and a stream's
// stages (on the heap) would take every attempt, streamed or not, with them.
type streamRelay struct {
	s *Server
	w http.ResponseWriter
	// flusher flushes with the write error; httpFlusher is w's own, for writeStreamErrorFor.
	flusher     errFlusher
	httpFlusher http.Flusher
	wd          writeDeadline
	cancel      context.CancelCauseFunc
	sr          sse.Reader
	pending     bool // events written to the client but not flushed yet
	// idle is armed only while the relay waits on the upstream (next): a client that reads
	// slowly blocks the writes and flushes between, and that time is the client's, never the
	// provider's silence (its limit is ClientWriteTimeout). nil until the answer has begun.
	idle      *time.Timer
	idleAfter time.Duration // the channel's streamIdle
	stages    *streamStages
	res       result
}

// flushBurst flushes what was written, but only when no complete event is waiting behind it:
// events that arrived together go out in one write, so a burst costs one syscall and nothing waits.
func (r *streamRelay) flushBurst() error {
	if !r.pending || r.sr.EventBuffered() {
		return nil
	}
	r.pending = false
	return r.flusher.FlushError()
}

// next reads the upstream's next event into r.ev, with the idle timer armed while it waits.
func (r *streamRelay) next() (err error) {
	if r.idle != nil {
		r.idle.Reset(r.idleAfter)
	}
	r.stages.ev, err = r.sr.Next()
	if r.idle != nil {
		r.idle.Stop()
	}
	return err
}

// close stops the idle timer and hands the usage stage's count back to the attempt.
func (r *streamRelay) close(a *attempt) {
	if r.idle != nil {
		r.idle.Stop()
	}
	a.counted = r.stages.usage.counted
}

// commit stops the attempt's timeouts at the first event and sends the client's headers; it
// reports whether the attempt is done (a probe's success).
func (r *streamRelay) commit(a *attempt, resp *http.Response, firstByte, whole *time.Timer, start time.Time) bool {
	firstByte.Stop()
	whole.Stop() // from the first event on, streamIdle governs: a long answer is not a slow one
	r.res.ttft = time.Since(start)
	if a.probe {
		r.res.outcome = health.OutcomeSuccess
		return true
	}
	if !r.stages.continues { // a continuation's stream has its headers already
		writeAnswerHeaders(r.w, a, resp.Header)
		r.w.Header().Set("Cache-Control", "no-cache")
		r.w.WriteHeader(resp.StatusCode)
	}
	r.res.committed = true
	cancel := r.cancel // not r: the relay stays on the stack
	r.idle = time.AfterFunc(r.idleAfter, func() { cancel(failover.ErrStreamIdle) })
	r.idle.Stop() // armed by the next wait on the upstream
	return false
}

// writeHeld writes what the stages still hold back (before the stream's last event).
func (r *streamRelay) writeHeld() {
	if held := r.stages.end(); len(held) > 0 {
		_, _ = r.w.Write(held)
	}
}

// ended is the result of a stream that closed after its answer was complete.
func (r *streamRelay) ended(a *attempt) result {
	r.res.outcome = health.OutcomeSuccess
	if v := a.streamViolation(); v != nil {
		// The channel answered and the model missed the schema: the client's failure, as the
		// non-streamed 502 is (answerFailure), with nothing against the channel's health.
		r.res.outcome, r.res.errCode, r.res.detail = health.OutcomeClientError, anthropic.SchemaViolationCode, v.Error()
	}
	if !r.sr.SawDone && r.res.committed {
		// A clean close after finish_reason is a complete answer: end it now for the client,
		// with the terminator clients wait for.
		r.wd.extend() // the upstream's silence before its close may have outlasted the last deadline
		r.writeHeld()
		_, _ = r.w.Write(a.streamEnd())
		r.pending = true
	}
	if r.pending {
		// The answer is whole only once the client has it: a client that stopped reading its
		// end is the client's failure, not a success of the stream's.
		if err := r.flusher.FlushError(); err != nil {
			return r.s.clientWriteFailure(err, &r.res)
		}
	}
	return r.res
}

// broken is the result of a stream whose read failed before its answer was complete.
func (r *streamRelay) broken(ctx context.Context, a *attempt, err error) result {
	f := transportFailure(ctx, err, "reading the stream")
	if af, ok := streamFailure(a, err); ok && !f.canceled && f.outcome == health.OutcomeConnectionError {
		f = af // an adapter's classified failure: an error event, an exception, a stream cut short
	}
	if f.canceled {
		f.committed, f.ttft = r.res.committed, r.res.ttft
		return f
	}
	if f.outcome == health.OutcomeConnectionError || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		f.outcome = health.OutcomeStreamCut
		f.detail = "upstream closed the stream before it completed"
	}
	if r.res.committed {
		// Bytes already went to the client: a cut, stall or broken stream counts as stream_cut.
		f.timedOut = f.outcome == health.OutcomeTimeout
		f.outcome = health.OutcomeStreamCut
	}
	return r.failed(a, f)
}

// failed ends a committed stream with the in-band error event (unless the recovery takes the
// break over), and returns f with what the relay knows of the attempt.
func (r *streamRelay) failed(a *attempt, f result) result {
	if r.res.committed && !r.stages.recovered {
		r.wd.extend() // the in-band error reaches a client that reads, however long the upstream was silent
		r.writeHeld()
		writeStreamErrorFor(a, r.w, r.httpFlusher, f.shown(), &r.stages.seq)
	}
	f.status, f.committed, f.ttft = r.res.status, r.res.committed, r.res.ttft
	return f
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
// through them (Unwrap) for net/http's FlushError; a writer with neither is not flushed. It is
// the writer itself where it can be (net/http's), not a method value, which would cost a stream
// an allocation.
func flushChecked(w http.ResponseWriter) errFlusher {
	for {
		switch t := w.(type) {
		case errFlusher:
			return t
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		case http.Flusher:
			return plainFlusher{t}
		default:
			return noFlusher{}
		}
	}
}

// errFlusher is a writer whose flush reports its error (net/http's response).
type errFlusher interface{ FlushError() error }

// plainFlusher flushes a writer that cannot report a flush's error.
type plainFlusher struct{ f http.Flusher }

func (p plainFlusher) FlushError() error { p.f.Flush(); return nil }

// noFlusher stands for a writer that cannot flush.
type noFlusher struct{}

func (noFlusher) FlushError() error { return nil }

func flushIf(f http.Flusher) {
	if f != nil {
		f.Flush()
	}
}

// writeStreamError ends a committed stream with an in-band error event (and no [DONE]), so no
// client can mistake it for a complete answer.
func writeStreamError(w io.Writer, f http.Flusher, detail string) {
	b, _ := json.Marshal(map[string]any{"error": clientapi.APIError{
		Message: "the upstream stream was interrupted before completion: " + detail,
		Type:    "upstream_error", Code: strPtr("stream_interrupted"),
	}})
	_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
	flushIf(f)
}

func strPtr(s string) *string { return &s }
