package proxy

import (
	"bufio"
	"bytes"
	"io"
	"strings"
)

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
	s.classify(&ev, typ)
	return ev, nil
}

// classify marks what the event's data is: nothing (a keep-alive), [DONE], or an event to
// decode for its end, usage and error.
func (s *sseReader) classify(ev *sseEvent, typ string) {
	switch {
	case len(ev.data) == 0:
		ev.noData = true
	case bytes.Equal(ev.data, []byte("[DONE]")):
		ev.done, s.sawDone = true, true
	default:
		classifyDecoded(ev, typ)
	}
}

// classifyDecoded marks the end, usage and in-band error the event's JSON data carries; typ is
// its event: line (the Responses API names its events there too).
func classifyDecoded(ev *sseEvent, typ string) {
	body, finished, ok := decodeEvent(ev.data)
	if !ok {
		ev.malformed = true
		return
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
