package provider

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/switchyard-io/switchyard/internal/anthropic"
	"github.com/switchyard-io/switchyard/internal/health"
)

// StreamState follows one Anthropic event stream to tell a complete answer from a cut one: a
// stream is complete when message_stop came and the upstream then closed cleanly.
type StreamState struct {
	events  int
	stopped bool
}

// Observe takes the next event. For an "error" event it returns the *Failure it means: before
// any other event it is classified like an error answer (an overloaded channel can still be
// failed over), after one it is a cut stream.
func (s *StreamState) Observe(ev Event) error {
	if ev.Type == "error" {
		e, ok := anthropic.ParseError(ev.Data)
		if !ok {
			e = anthropic.UpstreamError{Type: "api_error", Message: "malformed error event"}
		}
		return s.Fail(ClassifyAnthropicError(0, e))
	}
	s.events++
	if ev.Type == "message_stop" {
		s.stopped = true
	}
	return nil
}

// Fail turns a failure classified as if it were an error answer into the stream's failure: the
// same before the first event, a cut stream after it.
func (s *StreamState) Fail(f Failure) *Failure {
	if s.events > 0 {
		f.AfterFirstEvent = true
		f.Outcome = health.OutcomeStreamCut
		f.ClientType = ClientTypeFor(f.Outcome)
		f.ClientMessage = GenericMessage(f.Outcome)
		f.Detail = fmt.Sprintf("stream cut after %d events: %s", s.events, f.Detail)
	}
	return &f
}

// Started reports whether an event other than an error was observed.
func (s *StreamState) Started() bool { return s.events > 0 }

// End is what a clean close of the upstream means: io.EOF after message_stop, a cut stream
// before it.
func (s *StreamState) End() error {
	if s.stopped {
		return io.EOF
	}
	f := Failure{Outcome: health.OutcomeStreamCut, Code: "incomplete_stream",
		Detail:          fmt.Sprintf("the stream closed after %d events without message_stop", s.events),
		AfterFirstEvent: s.events > 0}
	if s.events == 0 {
		// Headers and then nothing: the channel failed before answering.
		f.Outcome = health.OutcomeServerError
	}
	f.ClientType, f.ClientMessage = ClientTypeFor(f.Outcome), GenericMessage(f.Outcome)
	return &f
}

// MaxEventBytes bounds one SSE line, and so one event's data.
const MaxEventBytes = 16 << 20

// sseReader reads an Anthropic SSE stream (Vertex's streamRawPredict, Anthropic's own API).
type sseReader struct {
	body   io.ReadCloser
	r      *bufio.Reader
	state  StreamState
	err    error // sticky: once the stream ended, Next keeps returning it
	closer sync.Once
}

// NewSSEReader reads body as Anthropic's SSE stream. An event whose data is not JSON is passed
// over (one malformed event is not fatal); "ping" events are yielded like any other.
func NewSSEReader(body io.ReadCloser) EventReader {
	return &sseReader{body: body, r: bufio.NewReaderSize(body, 32<<10)}
}

func (s *sseReader) Close() error {
	var err error
	s.closer.Do(func() { err = s.body.Close() })
	return err
}

func (s *sseReader) Next() (Event, error) {
	if s.err != nil {
		return Event{}, s.err
	}
	ev, err := s.next()
	if err != nil {
		s.err = err
	}
	return ev, err
}

func (s *sseReader) next() (Event, error) {
	for {
		ev, ok, err := s.readEvent()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return Event{}, s.state.End()
			}
			return Event{}, err
		}
		if !ok {
			continue
		}
		if ferr := s.state.Observe(ev); ferr != nil {
			return Event{}, ferr
		}
		return ev, nil
	}
}

// readEvent reads up to the next blank line. ok is false for a block with no usable event
// (comments, a malformed data field).
func (s *sseReader) readEvent() (ev Event, ok bool, err error) {
	var name string
	var data []byte
	seen := false
	for {
		line, err := s.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && seen && len(data) > 0 {
				// The last event lacks its blank line: the stream still ended right after it.
				break
			}
			return Event{}, false, err
		}
		if len(line) == 0 {
			if !seen {
				continue
			}
			break
		}
		seen = true
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, value...)
		}
	}
	if len(data) == 0 {
		return Event{}, false, nil
	}
	typ := eventType(data)
	if typ == "" {
		return Event{}, false, nil // not an Anthropic event's JSON: passed over
	}
	if name == "" {
		name = typ
	}
	return Event{Type: name, Data: data}, true, nil
}

func (s *sseReader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := s.r.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				return line, nil
			}
			return nil, err
		}
		line = append(line, chunk...)
		if len(line) > MaxEventBytes {
			return nil, &Failure{Outcome: health.OutcomeStreamCut, Code: "event_too_large",
				Detail:     fmt.Sprintf("a stream line exceeds %d MiB", MaxEventBytes>>20),
				ClientType: ClientTypeFor(health.OutcomeStreamCut), ClientMessage: GenericMessage(health.OutcomeStreamCut)}
		}
		if !isPrefix {
			return line, nil
		}
	}
}
