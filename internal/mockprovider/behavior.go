package mockprovider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Mode names what a mock provider does with a request.
type Mode string

// The modes a Behavior can take. The zero Mode is ModeOK.
const (
	// ModeOK answers normally (streamed or not, as the request asks).
	ModeOK Mode = "ok"
	// ModeFailOnce is shorthand for ModeOK with FailFirst = 1 (at least).
	ModeFailOnce Mode = "fail_once"
	// ModeStatus always answers Status (default 500) with an OpenAI error body.
	ModeStatus Mode = "status"
	// ModeRateLimit always answers 429 (or Status), with Retry-After when RetryAfter > 0.
	ModeRateLimit Mode = "rate_limit"
	// ModeReset closes the TCP connection with a reset before sending headers.
	ModeReset Mode = "reset"
	// ModeHang accepts the request and never answers, until the client goes away or the Server is closed.
	ModeHang Mode = "hang"
	// ModeSlowFirstToken answers normally but waits FirstTokenDelay (default 500ms) before the first event.
	ModeSlowFirstToken Mode = "slow_first_token"
	// ModeCut streams After content chunks then closes the connection abruptly.
	ModeCut Mode = "cut"
	// ModeStall streams After content chunks then goes silent until the client goes away or Close.
	ModeStall Mode = "stall"
	// ModeGarbage puts one malformed event before content chunk number After, then finishes normally.
	ModeGarbage Mode = "garbage"
	// ModeNoDone ends the stream after the finish_reason chunk, without "data: [DONE]".
	ModeNoDone Mode = "no_done"
	// ModeContextLength answers 400 with code context_length_exceeded.
	ModeContextLength Mode = "context_length_exceeded"
	// ModeContentPolicy answers 400 with code content_policy_violation.
	ModeContentPolicy Mode = "content_policy_violation"
	// ModeEcho answers normally with the text of the last user message (chat), the prompt
	// (completions) or the input (responses) as the answer: a test sees what the provider got.
	// Streamed, the text is one content chunk unless ChunkBytes or Splits cut it.
	ModeEcho Mode = "echo"
	// ModeErrorEvent streams After content chunks, then an in-band error event (Anthropic's
	// overloaded_error on /v1/messages, an OpenAI error object elsewhere) and closes; a
	// non-streamed request gets Status (default 500).
	ModeErrorEvent Mode = "error_event"
	// ModeContinue continues a trailing assistant message (a prefill), as a model with prefill
	// does: when the request ends with one whose text begins the answer (Text, or the mock's own
	// text), it answers the rest of the answer after it; otherwise the whole answer. With
	// ReemitSpace, a prefill ending in whitespace gets that whitespace again at the start of the
	// rest (as some servers do). On /v1/messages a prefill ending in whitespace is refused with
	// Anthropic's 400, and NoPrefill refuses every prefill with the 400 of a model without it.
	ModeContinue Mode = "continue"
)

// DefaultFirstTokenDelay is the FirstTokenDelay of ModeSlowFirstToken when none is set.
const DefaultFirstTokenDelay = 500 * time.Millisecond

// DefaultChunks is the number of content chunks of a streamed answer when Behavior.Chunks is 0.
const DefaultChunks = 3

const (
	maxChunks   = 10000
	maxDuration = 10 * time.Minute
)

var knownModes = map[Mode]bool{
	ModeOK: true, ModeFailOnce: true, ModeStatus: true, ModeRateLimit: true, ModeReset: true,
	ModeHang: true, ModeSlowFirstToken: true, ModeCut: true, ModeStall: true, ModeGarbage: true,
	ModeNoDone: true, ModeContextLength: true, ModeContentPolicy: true, ModeEcho: true,
	ModeErrorEvent: true, ModeContinue: true,
}

// behaviorExamples are BehaviorHelp's examples (each one parses: TestBehaviorHelp).
var behaviorExamples = []string{
	"503", "fail_once", "slow_first_token;first_token_delay=2s", "cut;after=2", "stall;after=1",
	"error_event;after=1", "cut;prefill;break_first=1;splits=5;text=Hello world",
	"continue;text=Hello world", "ok;raw_bytes;chunk_bytes=1;text=中文", "cut;tool_call=lookup;after=2",
}

// BehaviorHelp lists the modes and params of a behaviour, for `switchyard mock-provider --help`.
func BehaviorHelp() string {
	return `Behaviours: the X-Mock-Behavior header, <mode>[;param=value...]; the same names in the JSON of /_mock/behavior.
  modes:  ok, fail_once, status, rate_limit, reset, hang, slow_first_token, cut, stall, garbage, no_done,
          context_length_exceeded, content_policy_violation, echo, error_event, continue, or a bare HTTP status
  params: status, retry_after, fail_first, break_first, delay, latency, first_token_delay, chunk_delay,
          headers_first, chunks, after, separate_usage, message, chunk_bytes, splits, text,
          reemit_space, no_prefill, prefill, raw_bytes, tool_call
  e.g.    ` + strings.Join(behaviorExamples, "\n          ") + "\n"
}

// Behavior says how the mock answers. The zero value answers normally at once.
//
// Timing, in order: Delay (before anything, whatever the mode), then the FailFirst
// failures, then the mode. Latency is added before a non-streamed successful answer;
// FirstTokenDelay before the first event of a stream (with the headers held back too,
// unless HeadersFirst); ChunkDelay between later events.
type Behavior struct {
	Mode Mode `json:"mode,omitempty"`
	// Status is the HTTP status of ModeStatus (default 500), ModeRateLimit (default 429)
	// and of the FailFirst failures (default 500).
	Status int `json:"status,omitempty"`
	// RetryAfter, when > 0, adds "Retry-After: <seconds>" to the status answers
	// of ModeStatus, ModeRateLimit and FailFirst (429 or any other). 0 means no
	// Retry-After header.
	RetryAfter int `json:"retry_after,omitempty"`
	// FailFirst makes the first FailFirst requests for a model fail with Status
	// before the mode applies. Progress is counted per model and per source
	// (configured behaviour vs. each distinct X-Mock-Behavior value) and restarts
	// on SetBehavior/SetDefault/Reset.
	FailFirst int `json:"fail_first,omitempty"`
	// Delay is waited before anything is sent, in every mode.
	Delay time.Duration `json:"delay,omitempty"`
	// Latency is added before a non-streamed successful answer.
	Latency time.Duration `json:"latency,omitempty"`
	// FirstTokenDelay is waited before the first event of a stream.
	FirstTokenDelay time.Duration `json:"first_token_delay,omitempty"`
	// HeadersFirst sends (and flushes) the stream's headers before FirstTokenDelay.
	HeadersFirst bool `json:"headers_first,omitempty"`
	// Chunks is the number of content chunks of a stream (default 3). A
	// non-streamed answer carries the same text.
	Chunks int `json:"chunks,omitempty"`
	// ChunkDelay is waited between stream events after the first.
	ChunkDelay time.Duration `json:"chunk_delay,omitempty"`
	// After is the number of content chunks sent before the cut, stall or garbage
	// event (0 = before the first content chunk, just after the headers). It is
	// capped at Chunks: a cut or stall then comes before the finish_reason chunk.
	After int `json:"after,omitempty"`
	// SeparateUsage sends the usage (stream_options.include_usage) in its own final
	// chunk with empty choices, as OpenAI does, instead of in the finish_reason chunk.
	SeparateUsage bool `json:"separate_usage,omitempty"`
	// Message replaces the message of error answers.
	Message string `json:"message,omitempty"`
	// ChunkBytes, when > 0, cuts the answer text into content chunks of this many bytes (the
	// last may be shorter), instead of Chunks pieces of the mock's own text.
	ChunkBytes int `json:"chunk_bytes,omitempty"`
	// Splits, when set, cuts the answer text at these byte offsets, written "3,7,12"
	// (increasing; offsets past the end are ignored), instead of Chunks pieces or ChunkBytes.
	// A string, so that a Behavior stays comparable.
	Splits string `json:"splits,omitempty"`
	// Text, when set, is the answer text instead of the mock's own ("Hello from <name>").
	Text string `json:"text,omitempty"`
	// ReemitSpace and NoPrefill shape ModeContinue (see there).
	ReemitSpace bool `json:"reemit_space,omitempty"`
	NoPrefill   bool `json:"no_prefill,omitempty"`
	// Prefill makes the other modes (cut, stall, error_event) continue a prefill as ModeContinue
	// does: a continuation that breaks again.
	Prefill bool `json:"prefill,omitempty"`
	// BreakFirst, when > 0, limits the break of ModeCut, ModeStall, ModeGarbage and
	// ModeErrorEvent to the first BreakFirst requests for a model (counted as FailFirst is, after
	// it); later ones are answered in full (with Prefill, the rest after their prefill): a
	// channel that breaks a stream, then continues it.
	BreakFirst int `json:"break_first,omitempty"`
	// RawBytes writes a stream's text pieces that are not valid UTF-8 (a character whose bytes
	// Splits or ChunkBytes cut across two events) raw into the JSON string, escaping only what
	// JSON requires, as servers with byte-level tokenizers (llama.cpp) do; without it the JSON
	// encoder would turn them into U+FFFD. Chat and Messages streams.
	RawBytes bool `json:"raw_bytes,omitempty"`
	// ToolCall, when set, makes the answer call the tool of this name with the arguments
	// {"query": <the last user text>} streamed in two pieces: chat tool_calls deltas (the first
	// naming the tool) and finish_reason "tool_calls"; Messages a tool_use content block with two
	// input_json_delta events and stop_reason "tool_use"; Responses a function_call item with two
	// function_call_arguments.delta events. Without it, a request that offers tools calls its
	// first one (tools.go). It comes after the text when Text is
	// set (or the mode echoes or continues), alone otherwise. After counts the call's events as
	// content chunks (its start, then each piece), so a cut can fall inside the arguments.
	ToolCall string `json:"tool_call,omitempty"`
}

// normalized resolves aliases and defaults: the behaviour actually played.
func (b Behavior) normalized() Behavior {
	m := Mode(strings.ToLower(strings.TrimSpace(string(b.Mode))))
	if n, err := strconv.Atoi(string(m)); err == nil {
		// A bare status code as the mode: "503", "429".
		b.Status = n
		if n == 429 {
			m = ModeRateLimit
		} else {
			m = ModeStatus
		}
	}
	switch m {
	case "":
		m = ModeOK
	case ModeFailOnce:
		m = ModeOK
		if b.FailFirst < 1 {
			b.FailFirst = 1
		}
	case ModeRateLimit:
		if b.Status == 0 {
			b.Status = 429
		}
	case ModeSlowFirstToken:
		if b.FirstTokenDelay == 0 {
			b.FirstTokenDelay = DefaultFirstTokenDelay
		}
	}
	b.Mode = m
	if b.Status == 0 {
		b.Status = 500
	}
	if b.Chunks == 0 {
		b.Chunks = DefaultChunks
	}
	if b.After > b.Chunks && !b.customPieces() && b.ToolCall == "" {
		b.After = b.Chunks
	}
	return b
}

// customPieces: the answer text is cut by ChunkBytes or Splits, or echoed, not Chunks pieces.
func (b Behavior) customPieces() bool {
	return b.Mode == ModeEcho || b.Mode == ModeContinue || b.Prefill || b.ChunkBytes > 0 || b.Splits != "" || b.Text != ""
}

// splitOffsets parses Splits.
func (b Behavior) splitOffsets() ([]int, error) {
	if strings.TrimSpace(b.Splits) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(b.Splits, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("splits %q: want increasing positive byte offsets such as 3,7", b.Splits)
		}
		out = append(out, n)
	}
	if len(out) > maxChunks {
		return nil, fmt.Errorf("%d splits over %d", len(out), maxChunks)
	}
	return out, nil
}

// Validate reports whether b can be played.
func (b Behavior) Validate() error {
	n := b.normalized()
	if !knownModes[n.Mode] {
		return fmt.Errorf("unknown mode %q", b.Mode)
	}
	if n.Status < 400 || n.Status > 599 {
		return fmt.Errorf("status %d out of range 400-599", n.Status)
	}
	if b.RetryAfter < 0 || b.FailFirst < 0 || b.BreakFirst < 0 || b.Chunks < 0 || b.After < 0 {
		return errors.New("retry_after, fail_first, break_first, chunks and after must not be negative")
	}
	if b.Chunks > maxChunks {
		return fmt.Errorf("chunks %d over %d", b.Chunks, maxChunks)
	}
	if b.ChunkBytes < 0 {
		return errors.New("chunk_bytes must not be negative")
	}
	if _, err := b.splitOffsets(); err != nil {
		return err
	}
	for _, d := range []time.Duration{b.Delay, b.Latency, b.FirstTokenDelay, b.ChunkDelay} {
		if d < 0 || d > maxDuration {
			return fmt.Errorf("duration %v out of range 0-%v", d, maxDuration)
		}
	}
	return nil
}

// ParseBehavior parses the value of an X-Mock-Behavior header:
//
//	<mode>[;param=value...]
//
// The mode is one of the Mode names, or a bare HTTP status ("503", "429"); it
// may be left out when the first item is a param ("delay=50ms" means ok with a
// delay). Params (names as in Behavior's JSON): status (alias code), retry_after,
// fail_first (alias n), delay, latency, first_token_delay, chunk_delay (Go
// durations such as "150ms", or a bare integer of milliseconds), headers_first,
// separate_usage, reemit_space, no_prefill, prefill, raw_bytes (booleans; a bare name means
// true), chunks, after, chunk_bytes, break_first, splits (byte offsets separated by commas),
// text, tool_call, message.
// Whitespace around items is ignored. The result is validated.
func ParseBehavior(s string) (Behavior, error) {
	var b Behavior
	s = strings.TrimSpace(s)
	if s == "" {
		return b, errors.New("empty behavior")
	}
	for i, item := range strings.Split(s, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, val, hasVal := strings.Cut(item, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		val = strings.TrimSpace(val)
		if i == 0 && !hasVal {
			b.Mode = Mode(key)
			continue
		}
		if err := b.setParam(key, val, hasVal); err != nil {
			return Behavior{}, err
		}
	}
	if err := b.Validate(); err != nil {
		return Behavior{}, err
	}
	return b, nil
}

func (b *Behavior) setParam(key, val string, hasVal bool) error {
	intVal := func(dst *int) error {
		n, err := strconv.Atoi(val)
		if err != nil || !hasVal {
			return fmt.Errorf("param %s: want an integer, got %q", key, val)
		}
		*dst = n
		return nil
	}
	durVal := func(dst *time.Duration) error {
		d, err := parseDuration(val)
		if err != nil || !hasVal {
			return fmt.Errorf("param %s: want a duration such as 150ms, got %q", key, val)
		}
		*dst = d
		return nil
	}
	boolVal := func(dst *bool) error {
		if !hasVal {
			*dst = true
			return nil
		}
		v, err := strconv.ParseBool(val)
		if err != nil {
			return fmt.Errorf("param %s: want a boolean, got %q", key, val)
		}
		*dst = v
		return nil
	}
	switch key {
	case "status", "code":
		return intVal(&b.Status)
	case "retry_after":
		return intVal(&b.RetryAfter)
	case "fail_first", "n":
		return intVal(&b.FailFirst)
	case "break_first":
		return intVal(&b.BreakFirst)
	case "chunks":
		return intVal(&b.Chunks)
	case "after":
		return intVal(&b.After)
	case "chunk_bytes":
		return intVal(&b.ChunkBytes)
	case "splits":
		if !hasVal {
			return errors.New("param splits: want byte offsets such as 3,7")
		}
		b.Splits = val
		return nil
	case "delay":
		return durVal(&b.Delay)
	case "latency":
		return durVal(&b.Latency)
	case "first_token_delay":
		return durVal(&b.FirstTokenDelay)
	case "chunk_delay":
		return durVal(&b.ChunkDelay)
	case "headers_first":
		return boolVal(&b.HeadersFirst)
	case "separate_usage":
		return boolVal(&b.SeparateUsage)
	case "text":
		b.Text = val
		return nil
	case "reemit_space":
		return boolVal(&b.ReemitSpace)
	case "no_prefill":
		return boolVal(&b.NoPrefill)
	case "prefill":
		return boolVal(&b.Prefill)
	case "raw_bytes":
		return boolVal(&b.RawBytes)
	case "tool_call":
		if !hasVal {
			return errors.New("param tool_call: want a tool name")
		}
		b.ToolCall = val
		return nil
	case "message":
		if !hasVal {
			return errors.New("param message: want a value")
		}
		b.Message = val
		return nil
	case "mode":
		if !hasVal {
			return errors.New("param mode: want a value")
		}
		b.Mode = Mode(val)
		return nil
	}
	return fmt.Errorf("unknown param %q", key)
}

// parseDuration accepts a Go duration ("150ms", "2s") or a bare integer of milliseconds.
func parseDuration(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > int64(maxDuration/time.Millisecond) {
			return 0, fmt.Errorf("duration %dms out of range", n)
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	return time.ParseDuration(s)
}

// jsonDuration reads a Go duration string or a number of milliseconds, and
// writes a Go duration string.
type jsonDuration time.Duration

func (d jsonDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

func (d *jsonDuration) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, []byte("null")) {
		*d = 0
		return nil
	}
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		v, err := parseDuration(s)
		if err != nil {
			return err
		}
		*d = jsonDuration(v)
		return nil
	}
	var ms float64
	if err := json.Unmarshal(data, &ms); err != nil {
		return fmt.Errorf("duration: want a string such as \"150ms\" or a number of milliseconds: %w", err)
	}
	*d = jsonDuration(time.Duration(ms * float64(time.Millisecond)))
	return nil
}

type behaviorJSON struct {
	Mode            Mode         `json:"mode,omitempty"`
	Status          int          `json:"status,omitempty"`
	RetryAfter      int          `json:"retry_after,omitempty"`
	FailFirst       int          `json:"fail_first,omitempty"`
	Delay           jsonDuration `json:"delay,omitempty"`
	Latency         jsonDuration `json:"latency,omitempty"`
	FirstTokenDelay jsonDuration `json:"first_token_delay,omitempty"`
	HeadersFirst    bool         `json:"headers_first,omitempty"`
	Chunks          int          `json:"chunks,omitempty"`
	ChunkDelay      jsonDuration `json:"chunk_delay,omitempty"`
	After           int          `json:"after,omitempty"`
	SeparateUsage   bool         `json:"separate_usage,omitempty"`
	Message         string       `json:"message,omitempty"`
	ChunkBytes      int          `json:"chunk_bytes,omitempty"`
	Splits          string       `json:"splits,omitempty"`
	Text            string       `json:"text,omitempty"`
	ReemitSpace     bool         `json:"reemit_space,omitempty"`
	NoPrefill       bool         `json:"no_prefill,omitempty"`
	Prefill         bool         `json:"prefill,omitempty"`
	BreakFirst      int          `json:"break_first,omitempty"`
	RawBytes        bool         `json:"raw_bytes,omitempty"`
	ToolCall        string       `json:"tool_call,omitempty"`
}

// MarshalJSON writes durations as Go duration strings ("150ms").
func (b Behavior) MarshalJSON() ([]byte, error) {
	return json.Marshal(behaviorJSON{
		Mode: b.Mode, Status: b.Status, RetryAfter: b.RetryAfter, FailFirst: b.FailFirst,
		Delay: jsonDuration(b.Delay), Latency: jsonDuration(b.Latency),
		FirstTokenDelay: jsonDuration(b.FirstTokenDelay), HeadersFirst: b.HeadersFirst,
		Chunks: b.Chunks, ChunkDelay: jsonDuration(b.ChunkDelay), After: b.After,
		SeparateUsage: b.SeparateUsage, Message: b.Message, ChunkBytes: b.ChunkBytes, Splits: b.Splits,
		Text: b.Text, ReemitSpace: b.ReemitSpace, NoPrefill: b.NoPrefill, Prefill: b.Prefill,
		BreakFirst: b.BreakFirst, RawBytes: b.RawBytes, ToolCall: b.ToolCall,
	})
}

// UnmarshalJSON reads durations as Go duration strings or numbers of milliseconds.
func (b *Behavior) UnmarshalJSON(data []byte) error {
	var j behaviorJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*b = Behavior{
		Mode: j.Mode, Status: j.Status, RetryAfter: j.RetryAfter, FailFirst: j.FailFirst,
		Delay: time.Duration(j.Delay), Latency: time.Duration(j.Latency),
		FirstTokenDelay: time.Duration(j.FirstTokenDelay), HeadersFirst: j.HeadersFirst,
		Chunks: j.Chunks, ChunkDelay: time.Duration(j.ChunkDelay), After: j.After,
		SeparateUsage: j.SeparateUsage, Message: j.Message, ChunkBytes: j.ChunkBytes, Splits: j.Splits,
		Text: j.Text, ReemitSpace: j.ReemitSpace, NoPrefill: j.NoPrefill, Prefill: j.Prefill,
		BreakFirst: j.BreakFirst, RawBytes: j.RawBytes, ToolCall: j.ToolCall,
	}
	return nil
}
