package mockprovider

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchyard-io/switchyard/internal/jsonraw"
)

// GarbageEvent is the malformed event ModeGarbage puts in a stream.
const GarbageEvent = "data: {not json\n\n"

// DoneEvent ends chat and completions streams.
const DoneEvent = "data: [DONE]\n\n"

// answer plays a successful answer, with the stream faults of the mode.
func (x *exchange) answer() {
	streamable := x.ep == epChat || x.ep == epCompletions || x.ep == epResponses || x.ep == epMessages
	if x.req.Stream && streamable {
		x.stream(x.plan())
		return
	}
	if !x.wait(x.b.Latency) {
		x.abort(false)
		return
	}
	data, err := json.Marshal(x.fullBody())
	if err != nil {
		x.statusError(http.StatusInternalServerError)
		return
	}
	x.writeBody(append(data, '\n'))
}

// writeBody writes a non-streamed 200 answer; cut and stall send half of it,
// garbage sends a body that is not JSON.
func (x *exchange) writeBody(data []byte) {
	h := x.w.Header()
	h.Set("Content-Type", "application/json")
	switch x.b.Mode {
	case ModeGarbage:
		data = []byte("{not json\n")
	case ModeCut, ModeStall:
		h.Set("Content-Length", fmt.Sprint(len(data)))
		x.w.WriteHeader(http.StatusOK)
		_, _ = x.w.Write(data[:len(data)/2])
		_ = x.rc.Flush()
		if x.b.Mode == ModeStall {
			x.block()
		}
		x.abort(false)
		return
	}
	h.Set("Content-Length", fmt.Sprint(len(data)))
	x.w.WriteHeader(http.StatusOK)
	_, _ = x.w.Write(data)
}

// streamPlan is the events of a complete stream.
type streamPlan struct {
	head    []string // before the content (responses: response.created)
	content []string // one per content chunk
	final   []string // finish_reason chunk, usage chunk, response.completed
	done    bool     // end with data: [DONE]
	// errors, when set, is ModeErrorEvent's event before content[i] (and at the end, i ==
	// len(content)), for streams whose events are numbered; else errorEvent().
	errors []string
}

// stream plays a plan, with the timing and faults of the behaviour.
func (x *exchange) stream(p streamPlan) {
	h := x.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	started := false
	start := func() bool {
		if !started {
			started = true
			x.w.WriteHeader(http.StatusOK)
		}
		return x.rc.Flush() == nil
	}
	if x.b.HeadersFirst && !start() {
		return
	}
	if !x.wait(x.b.FirstTokenDelay) {
		x.abort(false)
		return
	}
	first := true
	// send writes one event and flushes; false means stop (client gone or aborted).
	send := func(ev string) bool {
		if !first && !x.wait(x.b.ChunkDelay) {
			x.abort(false)
			return false
		}
		first = false
		started = true
		if _, err := io.WriteString(x.w, ev); err != nil {
			return false
		}
		return x.rc.Flush() == nil
	}
	for _, ev := range p.head {
		if !send(ev) {
			return
		}
	}
	after := min(x.b.After, len(p.content)) // custom pieces: a cut or stall still comes before the finish
	for i := 0; i <= len(p.content); i++ {
		if i == after {
			switch x.b.Mode {
			case ModeCut:
				start()
				x.abort(false)
				return
			case ModeStall:
				if start() {
					x.block()
				}
				x.abort(false)
				return
			case ModeGarbage:
				if !send(GarbageEvent) {
					return
				}
			case ModeErrorEvent:
				ev := x.errorEvent()
				if i < len(p.errors) {
					ev = p.errors[i]
				}
				send(ev)
				x.abort(false)
				return
			}
		}
		if i < len(p.content) && !send(p.content[i]) {
			return
		}
	}
	for _, ev := range p.final {
		if !send(ev) {
			return
		}
	}
	if p.done && x.b.Mode != ModeNoDone {
		send(DoneEvent)
	}
}

func sseData(v any) string {
	data, _ := json.Marshal(v)
	return "data: " + string(data) + "\n\n"
}

func sseEvent(typ string, v any) string {
	data, _ := json.Marshal(v)
	return "event: " + typ + "\n" + "data: " + string(data) + "\n\n"
}

// pieces is the answer text, one piece per content chunk (none for a tool call alone).
func (x *exchange) pieces() []string {
	if !x.hasText() {
		return nil
	}
	if x.b.customPieces() {
		splits, _ := x.b.splitOffsets() // validated
		return cut(x.answerText(), x.b.ChunkBytes, splits)
	}
	out := make([]string, x.b.Chunks)
	for i := range out {
		switch i {
		case 0:
			out[i] = "Hello"
		case 1:
			out[i] = " from"
		case 2:
			out[i] = " " + x.s.opts.Name
		default:
			out[i] = fmt.Sprintf(" #%d", i+1)
		}
	}
	return out
}

func (x *exchange) text() string {
	s := ""
	for _, p := range x.pieces() {
		s += p
	}
	return s
}

// answerText is the whole answer of a behaviour whose pieces are cut from it: the echo, or the
// mock's own text.
func (x *exchange) answerText() string {
	if x.b.Mode == ModeEcho {
		return x.echo()
	}
	if x.b.Mode == ModeContinue || x.b.Prefill {
		return x.continuation()
	}
	if x.b.Text != "" {
		return x.b.Text
	}
	b := x.b
	b.ChunkBytes, b.Splits = 0, ""
	y := *x
	y.b = b
	return y.text()
}

// cut splits s at the offsets of splits, or every size bytes, or not at all. An empty s is one
// empty piece, so a stream still has a content chunk.
func cut(s string, size int, splits []int) []string {
	var out []string
	prev := 0
	switch {
	case len(splits) > 0:
		for _, at := range splits {
			if at >= len(s) {
				break
			}
			out = append(out, s[prev:at])
			prev = at
		}
	case size > 0:
		for prev+size < len(s) {
			out = append(out, s[prev:prev+size])
			prev += size
		}
	}
	return append(out, s[prev:])
}

// echo is the text the request asked about: the last user message's (its content, or the text of
// its parts), the prompt, or the input.
func (x *exchange) echo() string {
	var str string
	if x.ep == epCompletions {
		if json.Unmarshal(x.req.Prompt, &str) == nil {
			return str
		}
		var all []string
		_ = json.Unmarshal(x.req.Prompt, &all)
		return strings.Join(all, "")
	}
	raw := x.req.Messages
	if x.ep == epResponses {
		if json.Unmarshal(x.req.Input, &str) == nil {
			return str
		}
		raw = x.req.Input
	}
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(raw, &msgs)
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		if json.Unmarshal(msgs[i].Content, &str) == nil {
			return str
		}
		var parts []struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(msgs[i].Content, &parts)
		for _, p := range parts {
			str += p.Text
		}
		return str
	}
	return ""
}

// promptTokens counts a token per 4 bytes of the request's text (its messages' contents, a
// final assistant prefill included, the system prompt, the prompt or the input), plus one: a
// continuation's prompt grows by its prefill, as a provider's does.
func (x *exchange) promptTokens() int {
	n := textLen(x.req.Messages) + textLen(x.req.System) + textLen(x.req.Prompt) + textLen(x.req.Input)
	return 1 + n/4
}

// textLen is the length in bytes of the text in a request field: a string, the strings of an
// array, and the "content" and "text" of the objects in it (messages and their parts). Token
// arrays and other values count nothing.
func textLen(raw json.RawMessage) int {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return len(s)
		}
	case '[':
		var arr []json.RawMessage
		_ = json.Unmarshal(raw, &arr)
		n := 0
		for _, e := range arr {
			n += textLen(e)
		}
		return n
	case '{':
		var obj struct {
			Content json.RawMessage `json:"content"`
			Text    json.RawMessage `json:"text"`
		}
		_ = json.Unmarshal(raw, &obj)
		return textLen(obj.Content) + textLen(obj.Text)
	}
	return 0
}

func (x *exchange) usage() map[string]any {
	p, c := x.promptTokens(), x.completionTokens()
	return map[string]any{"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
}

// completionTokens counts one token per content chunk (a ToolCall's argument pieces included).
func (x *exchange) completionTokens() int {
	n := x.b.Chunks
	if x.b.customPieces() || !x.hasText() {
		n = len(x.pieces())
	}
	if _, ok := x.toolToCall(); ok {
		n += len(x.toolArgPieces())
	}
	return n
}

// hasText reports whether the answer has text: always, except a ToolCall without Text (nor an
// echo or continuation), which is the call alone.
func (x *exchange) hasText() bool {
	return x.b.ToolCall == "" || x.b.Text != "" || x.b.Mode == ModeEcho || x.b.Mode == ModeContinue || x.b.Prefill
}

// toolArgPieces is a streamed tool call's arguments in two pieces, cut at a character boundary.
func (x *exchange) toolArgPieces() []string {
	args := x.toolInput()
	half := len(args) / 2
	for half > 0 && !utf8.RuneStart(args[half]) {
		half--
	}
	return []string{args[:half], args[half:]}
}

// streamText is a text piece as a stream event carries it: with RawBytes, a piece that is not
// valid UTF-8 goes into the JSON raw (encoding/json would write U+FFFD for its bytes).
func (x *exchange) streamText(piece string) any {
	if x.b.RawBytes && !utf8.ValidString(piece) {
		return json.RawMessage(jsonraw.AppendString(nil, []byte(piece)))
	}
	return piece
}

func (x *exchange) includeUsage() bool {
	return x.req.StreamOptions != nil && x.req.StreamOptions.IncludeUsage
}

func (x *exchange) created() int64 { return time.Now().Unix() }

func (x *exchange) fullBody() any {
	switch x.ep {
	case epChat:
		msg := map[string]any{"role": "assistant", "content": x.text(), "refusal": nil}
		finish := "stop"
		if name, ok := x.toolToCall(); ok {
			if !x.hasText() {
				msg["content"] = nil
			}
			msg["tool_calls"] = []any{map[string]any{"id": fmt.Sprintf("call_mock%d", x.id), "type": "function",
				"function": map[string]any{"name": name, "arguments": x.toolInput()}}}
			finish = "tool_calls"
		}
		return map[string]any{
			"id": fmt.Sprintf("chatcmpl-mock%d", x.id), "object": "chat.completion", "created": x.created(),
			"model": x.req.Model, "system_fingerprint": "fp_mock",
			"choices": []any{map[string]any{
				"index":         0,
				"message":       msg,
				"logprobs":      nil,
				"finish_reason": finish,
			}},
			"usage": x.usage(),
		}
	case epCompletions:
		return map[string]any{
			"id": fmt.Sprintf("cmpl-mock%d", x.id), "object": "text_completion", "created": x.created(),
			"model": x.req.Model,
			"choices": []any{map[string]any{
				"text": x.text(), "index": 0, "logprobs": nil, "finish_reason": "stop",
			}},
			"usage": x.usage(),
		}
	case epEmbeddings:
		return x.embeddings()
	case epResponses:
		return x.response("completed", x.outputItems())
	case epMessages:
		return x.messageBody()
	case epCountTokens:
		return map[string]any{"input_tokens": x.promptTokens()}
	case epModels:
		var data []any
		for _, m := range x.s.modelList() {
			data = append(data, map[string]any{"id": m, "object": "model", "created": 1700000000, "owned_by": x.s.opts.Name})
		}
		return map[string]any{"object": "list", "data": data}
	}
	return map[string]any{}
}

func (x *exchange) embeddings() any {
	n := 1
	var arr []json.RawMessage
	if json.Unmarshal(x.req.Input, &arr) == nil && len(arr) > 0 {
		// An array of strings or of token arrays is a batch; an array of numbers is one input.
		if c := firstByte(arr[0]); c == '"' || c == '[' {
			n = len(arr)
		}
	}
	dims := 8
	if x.req.Dimensions > 0 && x.req.Dimensions <= 4096 {
		dims = x.req.Dimensions
	}
	vec := make([]float32, dims)
	for j := range vec {
		v := float32(j%10+1) / 100
		if j%2 == 1 {
			v = -v
		}
		vec[j] = v
	}
	var embedding any = vec
	if x.req.EncodingFormat == "base64" {
		embedding = base64Floats(vec)
	}
	var data []any
	for i := 0; i < n; i++ {
		data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": embedding})
	}
	p := x.promptTokens()
	return map[string]any{
		"object": "list", "data": data, "model": x.req.Model,
		"usage": map[string]any{"prompt_tokens": p, "total_tokens": p},
	}
}

// base64Floats is a vector as OpenAI sends it for encoding_format "base64": its float32s,
// little-endian, in standard base64 (the SDKs decode it with Buffer.from(s, "base64") into a
// Float32Array, or numpy.frombuffer(..., dtype="float32")).
func base64Floats(vec []float32) string {
	buf := make([]byte, 0, 4*len(vec))
	for _, v := range vec {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
	}
	return base64.StdEncoding.EncodeToString(buf)
}

func firstByte(b []byte) byte {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c
		}
	}
	return 0
}

// plan builds the events of a full stream for the request's endpoint.
func (x *exchange) plan() streamPlan {
	var p streamPlan
	pieces := x.pieces()
	created := x.created()
	switch x.ep {
	case epChat:
		id := fmt.Sprintf("chatcmpl-mock%d", x.id)
		chunk := func(choices []any) map[string]any {
			return map[string]any{
				"id": id, "object": "chat.completion.chunk", "created": created,
				"model": x.req.Model, "system_fingerprint": "fp_mock", "choices": choices,
			}
		}
		deltaChunk := func(delta map[string]any) string {
			return sseData(chunk([]any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": nil}}))
		}
		for i, piece := range pieces {
			delta := map[string]any{"content": x.streamText(piece)}
			if i == 0 {
				delta["role"] = "assistant"
			}
			p.content = append(p.content, deltaChunk(delta))
		}
		finish := "stop"
		if name, ok := x.toolToCall(); ok {
			// As OpenAI streams a call: the first delta names it (id, type, name, empty
			// arguments), the next ones carry pieces of its arguments.
			finish = "tool_calls"
			delta := map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": fmt.Sprintf("call_mock%d", x.id), "type": "function",
				"function": map[string]any{"name": name, "arguments": ""}}}}
			if len(pieces) == 0 {
				delta["role"], delta["content"] = "assistant", nil
			}
			p.content = append(p.content, deltaChunk(delta))
			for _, args := range x.toolArgPieces() {
				p.content = append(p.content, deltaChunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0,
					"function": map[string]any{"arguments": args}}}}))
			}
		}
		last := chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "logprobs": nil, "finish_reason": finish}})
		p.final = x.finalChunks(last, chunk([]any{}))
		p.done = true
	case epCompletions:
		id := fmt.Sprintf("cmpl-mock%d", x.id)
		chunk := func(choices []any) map[string]any {
			return map[string]any{"id": id, "object": "text_completion", "created": created, "model": x.req.Model, "choices": choices}
		}
		for _, piece := range pieces {
			p.content = append(p.content, sseData(chunk([]any{map[string]any{
				"text": piece, "index": 0, "logprobs": nil, "finish_reason": nil,
			}})))
		}
		last := chunk([]any{map[string]any{"text": "", "index": 0, "logprobs": nil, "finish_reason": "stop"}})
		p.final = x.finalChunks(last, chunk([]any{}))
		p.done = true
	case epMessages:
		p = x.messagesPlan(pieces)
	case epResponses:
		p = x.responsesPlan(pieces)
	}
	return p
}

// finalChunks is the finish_reason chunk, with the usage in it or after it.
func (x *exchange) finalChunks(last, usageChunk map[string]any) []string {
	if !x.includeUsage() {
		return []string{sseData(last)}
	}
	if x.b.SeparateUsage {
		usageChunk["usage"] = x.usage()
		return []string{sseData(last), sseData(usageChunk)}
	}
	last["usage"] = x.usage()
	return []string{sseData(last)}
}
