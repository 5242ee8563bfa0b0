// Package sse reads the server-sent event streams of every provider's wire format: it splits a
// stream into events without an allocation per line and marks what each event's JSON says
// (the end of the answer, its usage, an in-band error), which is all the proxy's stream stages
// and the health engine need to judge a stream.
package sse

import (
	"bufio"
	"bytes"
	"io"
	"strings"
)

// Reader splits an event stream into events. It reuses its buffers: an event's raw bytes are
// valid until the next call to Next.
type Reader struct {
	r       *bufio.Reader
	SawDone bool   // the stream carried data: [DONE]
	raw     []byte // the current event
	data    []byte // its data lines joined
	long    []byte // a line longer than r's buffer
}

// Event is one event of a stream, classified.
type Event struct {
	Raw           []byte // the event as received, terminated by a blank line; valid until the next event is read
	Data          []byte // its data lines joined; valid until the next event is read
	Done          bool   // data: [DONE]
	Finished      bool   // carries a finish_reason (chat/completions) or response.completed
	Malformed     bool
	UpstreamError bool
	NoData        bool // a comment or keep-alive (": ping"): no proof that an answer has started
	Usage         *Usage
}

// Usage is the token usage an answer or a stream event reports, in any provider's names.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	InputTokens      int `json:"input_tokens"`
	OutputTokens     int `json:"output_tokens"`
	// The Messages API counts cached input apart from input_tokens; prompt counts all of it, as
	// OpenAI's prompt_tokens does (and the translations to it).
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// Prompt is every input token of u, cached or not; Completion every output token.
func (u *Usage) Prompt() int {
	return u.PromptTokens + u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

func (u *Usage) Completion() int { return u.CompletionTokens + u.OutputTokens }

// NewReader reads events from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 16<<10)} }

// readLine is bufio.Reader.ReadBytes('\n') without an allocation per line: the line is valid until
// the next read.
func (s *Reader) readLine() ([]byte, error) {
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
// the next call to Next returns without waiting. The reader is at an event boundary: blank lines
// there are skipped by Next, and the first blank line after a non-blank one ends the event. It
// scans no further than that end.
func (s *Reader) EventBuffered() bool {
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

// Next returns the next event. Comment-only events (keep-alives) are passed on as they are.
func (s *Reader) Next() (Event, error) {
	var ev Event
	ev.Raw, s.raw = s.raw[:0], nil
	defer func() { s.raw = ev.Raw }() // keep the grown buffer for the next event
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
			if len(ev.Raw) > 0 {
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		if len(trimmed) == 0 {
			if len(ev.Raw) == 0 {
				continue // stray blank line
			}
			ev.Raw = append(ev.Raw, '\n')
			break
		}
		ev.Raw = append(ev.Raw, trimmed...)
		ev.Raw = append(ev.Raw, '\n')
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
	ev.Data = data
	s.classify(&ev, typ)
	return ev, nil
}

// classify marks what the event's data is: nothing (a keep-alive), [DONE], or an event to
// decode for its end, usage and error.
func (s *Reader) classify(ev *Event, typ string) {
	switch {
	case len(ev.Data) == 0:
		ev.NoData = true
	case bytes.Equal(ev.Data, []byte("[DONE]")):
		ev.Done, s.SawDone = true, true
	default:
		classifyDecoded(ev, typ)
	}
}

// classifyDecoded marks the end, usage and in-band error the event's JSON data carries; typ is
// its event: line (the Responses API names its events there too).
func classifyDecoded(ev *Event, typ string) {
	body, finished, ok := decodeEvent(ev.Data)
	if !ok {
		ev.Malformed = true
		return
	}
	ev.Finished = finished
	if body.Error != nil && string(*body.Error) != "null" || body.Type == "error" || body.Type == "response.failed" || typ == "error" {
		ev.UpstreamError = true
	}
	if body.Type == "response.completed" || typ == "response.completed" {
		ev.Finished = true
		if body.Resp != nil {
			ev.Usage = body.Resp.Usage
		}
	}
	if body.Usage != nil {
		ev.Usage = body.Usage
	}
}
