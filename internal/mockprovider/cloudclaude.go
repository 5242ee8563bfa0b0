package mockprovider

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// This file is the Claude answer the cloud mocks (Bedrock, Vertex) share: the Anthropic Messages
// answer and its stream events, played with a Behavior's timing and faults through the framing of
// each cloud. Only the framing, the authentication and the error bodies differ between them.

// StreamErrorParam is the X-Mock-Behavior parameter of the cloud mocks that ends a stream with
// the cloud's own error event after After content events: a Bedrock exception type
// ("modelStreamErrorException", "throttlingException", ...) or an Anthropic error type on Vertex
// ("overloaded_error", "api_error", ...). With After = 0 it is the stream's first event.
const StreamErrorParam = "stream_error"

// CloudBehavior is a Behavior plus the cloud mocks' in-stream error.
type CloudBehavior struct {
	Behavior
	// StreamError, when set, ends a streamed answer with this error event (see StreamErrorParam).
	StreamError string
}

// ParseCloudBehavior parses an X-Mock-Behavior value for a cloud mock: ParseBehavior's syntax
// plus stream_error=<name>.
func ParseCloudBehavior(s string) (CloudBehavior, error) {
	var cb CloudBehavior
	var rest []string
	for _, item := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if ok && strings.TrimSpace(k) == StreamErrorParam {
			if cb.StreamError = strings.TrimSpace(v); cb.StreamError == "" {
				return CloudBehavior{}, errors.New("param stream_error: want an error name")
			}
			continue
		}
		if strings.TrimSpace(item) != "" {
			rest = append(rest, item)
		}
	}
	if len(rest) > 0 {
		b, err := ParseBehavior(strings.Join(rest, ";"))
		if err != nil {
			return CloudBehavior{}, err
		}
		cb.Behavior = b
	}
	return cb, nil
}

// claudeRequest is what the cloud mocks read of an Anthropic Messages body.
type claudeRequest struct {
	AnthropicVersion string          `json:"anthropic_version"`
	MaxTokens        int             `json:"max_tokens"`
	Messages         json.RawMessage `json:"messages"`
	Tools            []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Stream *bool `json:"stream"`
}

// claudeFraming is what differs between the clouds' streams.
type claudeFraming interface {
	streamContentType() string
	// event frames one Anthropic stream event.
	event(typ string, data []byte) []byte
	// streamError frames the cloud's in-stream error.
	streamError(name, message string) []byte
	// garbage is one malformed event that a reader can pass over.
	garbage() []byte
}

// cloudModels keeps a cloud mock's behaviours and counts, by model.
type cloudModels struct {
	mu       sync.Mutex
	def      CloudBehavior
	perModel map[string]CloudBehavior
	failed   map[string]int
	counts   map[string]int
	lastBody []byte
	lastHdr  http.Header
	closed   chan struct{}
	once     sync.Once
}

func newCloudModels() cloudModels {
	return cloudModels{perModel: map[string]CloudBehavior{}, failed: map[string]int{}, counts: map[string]int{}, closed: make(chan struct{})}
}

// SetBehavior sets the behaviour of one model id ("" for the default).
func (c *cloudModels) SetBehavior(model string, b CloudBehavior) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if model == "" {
		c.def = b
	} else {
		c.perModel[model] = b
	}
	c.failed = map[string]int{}
}

// Requests returns how many API requests named model (signature failures included).
func (c *cloudModels) Requests(model string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[model]
}

// Counts returns the API requests so far, by model id.
func (c *cloudModels) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// LastBody is the body of the last API request: what a test asserts went upstream.
func (c *cloudModels) LastBody() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.lastBody...)
}

// LastHeaders is the headers of the last API request.
func (c *cloudModels) LastHeaders() http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastHdr.Clone()
}

// Close releases hung and stalled handlers; call it before the httptest server's Close.
func (c *cloudModels) Close() { c.once.Do(func() { close(c.closed) }) }

// record counts the request and picks its behaviour: the header's, the model's or the default.
func (c *cloudModels) record(r *http.Request, model string, body []byte) (CloudBehavior, string, error) {
	c.mu.Lock()
	c.counts[model]++
	c.lastBody = append([]byte(nil), body...)
	c.lastHdr = r.Header.Clone()
	b, own := c.perModel[model]
	if !own {
		b = c.def
	}
	c.mu.Unlock()
	source := ""
	if h := r.Header.Get(BehaviorHeader); h != "" {
		var err error
		if b, err = ParseCloudBehavior(h); err != nil {
			return CloudBehavior{}, "", err
		}
		source = "hdr:" + h
	}
	b.Behavior = b.Behavior.normalized()
	return b, source, nil
}

// failFirst reports whether this request is one of the behaviour's FailFirst failures.
func (c *cloudModels) failFirst(b CloudBehavior, source, model string) bool {
	if b.FailFirst <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := failKey(source, model)
	if c.failed[k] < b.FailFirst {
		c.failed[k]++
		return true
	}
	return false
}

// claudeExchange is one answer being played.
type claudeExchange struct {
	w      http.ResponseWriter
	r      *http.Request
	rc     *http.ResponseController
	b      CloudBehavior
	req    claudeRequest
	model  string
	name   string
	id     string
	closed <-chan struct{}
	frame  claudeFraming
	// headers are the cloud's own response headers for a 200.
	headers http.Header
}

func (x *claudeExchange) wait(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-x.r.Context().Done():
	case <-x.closed:
	}
	return false
}

func (x *claudeExchange) block() {
	select {
	case <-x.r.Context().Done():
	case <-x.closed:
	}
}

func (x *claudeExchange) abort(reset bool) {
	conn, _, err := x.rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// lastUser is the text of the last user message and whether that message carries tool results.
func (x *claudeExchange) lastUser() (text string, toolResult bool) {
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(x.req.Messages, &msgs)
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(msgs[i].Content, &s) == nil {
			return s, false
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(msgs[i].Content, &parts)
		for _, p := range parts {
			text += p.Text
			toolResult = toolResult || p.Type == "tool_result"
		}
		return text, toolResult
	}
	return "", false
}

// useTool: a request with tools whose last user turn is no tool result gets a tool_use answer.
func (x *claudeExchange) useTool() bool {
	_, res := x.lastUser()
	return len(x.req.Tools) > 0 && !res
}

// prefill is the request's final assistant message, when it has one.
func (x *claudeExchange) prefill() (string, bool) { return prefillText(x.req.Messages) }

// prefillRefusal is the 400 message of a ModeContinue (or Prefill) model that will not continue
// the request's prefill ("" when it does): the clouds serve Anthropic's models, which refuse a
// prefill ending in whitespace.
func (x *claudeExchange) prefillRefusal() string {
	if x.b.Mode != ModeContinue && !x.b.Prefill {
		return ""
	}
	p, ok := x.prefill()
	return prefillRefusal(p, ok, x.b.NoPrefill, true)
}

func (x *claudeExchange) pieces() []string {
	text := ""
	if x.b.customPieces() {
		text = "Hello from " + x.name
		if x.b.Text != "" {
			text = x.b.Text
		}
		switch {
		case x.b.Mode == ModeEcho:
			text, _ = x.lastUser()
		case x.b.Mode == ModeContinue || x.b.Prefill:
			p, ok := x.prefill()
			text = continueText(text, p, ok, x.b.ReemitSpace)
		}
		splits, _ := x.b.splitOffsets()
		return cut(text, x.b.ChunkBytes, splits)
	}
	out := make([]string, x.b.Chunks)
	for i := range out {
		switch i {
		case 0:
			out[i] = "Hello"
		case 1:
			out[i] = " from"
		case 2:
			out[i] = " " + x.name
		default:
			out[i] = fmt.Sprintf(" #%d", i+1)
		}
	}
	return out
}

func (x *claudeExchange) toolInput() string {
	text, _ := x.lastUser()
	b, _ := json.Marshal(map[string]string{"query": text})
	return string(b)
}

func (x *claudeExchange) inputTokens() int {
	n := len(x.req.Messages)/4 + 1
	return n
}

func (x *claudeExchange) message() map[string]any {
	var content []any
	stop := "end_turn"
	out := 0
	if x.useTool() {
		content = []any{map[string]any{"type": "tool_use", "id": "toolu_" + x.id, "name": x.req.Tools[0].Name, "input": json.RawMessage(x.toolInput())}}
		stop, out = "tool_use", 12
	} else {
		text := strings.Join(x.pieces(), "")
		content = []any{map[string]any{"type": "text", "text": text}}
		out = len(x.pieces())
	}
	return map[string]any{
		"id": "msg_" + x.id, "type": "message", "role": "assistant", "model": x.model, "content": content,
		"stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": x.inputTokens(), "output_tokens": out},
	}
}

// plan is the stream's events: head (message_start, content_block_start, ping), one per content
// piece, and the end (content_block_stop, message_delta, message_stop).
func (x *claudeExchange) plan() (head, content, end [][2]string) {
	j := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	msg := x.message()
	msg["content"] = []any{}
	msg["stop_reason"] = nil
	msg["usage"] = map[string]any{"input_tokens": x.inputTokens(), "output_tokens": 1}
	head = append(head, [2]string{"message_start", j(map[string]any{"type": "message_start", "message": msg})})
	stop, out := "end_turn", 0
	if x.useTool() {
		head = append(head, [2]string{"content_block_start", j(map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": "toolu_" + x.id, "name": x.req.Tools[0].Name, "input": map[string]any{}}})})
		in := x.toolInput()
		for _, p := range cut(in, (len(in)+2)/3, nil) {
			content = append(content, [2]string{"content_block_delta", j(map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": p}})})
		}
		stop, out = "tool_use", 12
	} else {
		head = append(head, [2]string{"content_block_start", j(map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})})
		for _, p := range x.pieces() {
			content = append(content, [2]string{"content_block_delta", j(map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "text_delta", "text": p}})})
		}
		out = len(content)
	}
	head = append(head, [2]string{"ping", `{"type":"ping"}`})
	end = append(end,
		[2]string{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		[2]string{"message_delta", j(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": out}})})
	if x.b.Mode != ModeNoDone {
		end = append(end, [2]string{"message_stop", `{"type":"message_stop"}`})
	}
	return head, content, end
}

// play answers with the behaviour's mode; status errors are the caller's (errorAnswer).
func (x *claudeExchange) play(stream bool) {
	if !stream {
		if !x.wait(x.b.Latency) {
			x.abort(false)
			return
		}
		data, _ := json.Marshal(x.message())
		h := x.w.Header()
		for k, v := range x.headers {
			h[k] = v
		}
		h.Set("Content-Type", "application/json")
		switch x.b.Mode {
		case ModeGarbage:
			data = []byte("{not json")
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
		return
	}
	h := x.w.Header()
	for k, v := range x.headers {
		h[k] = v
	}
	h.Set("Content-Type", x.frame.streamContentType())
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
	send := func(frame []byte) bool {
		if !first && !x.wait(x.b.ChunkDelay) {
			x.abort(false)
			return false
		}
		first, started = false, true
		if _, err := x.w.Write(frame); err != nil {
			return false
		}
		return x.rc.Flush() == nil
	}
	head, content, end := x.plan()
	if x.b.StreamError != "" && x.b.After == 0 {
		// The error as the stream's first event, as Bedrock sends a throttlingException.
		send(x.frame.streamError(x.b.StreamError, x.b.message("The model stream ended with an error.")))
		return
	}
	for _, ev := range head {
		if !send(x.frame.event(ev[0], []byte(ev[1]))) {
			return
		}
	}
	after := min(x.b.After, len(content))
	for i := 0; i <= len(content); i++ {
		if i == after {
			if x.b.StreamError != "" {
				send(x.frame.streamError(x.b.StreamError, x.b.message("The model stream ended with an error.")))
				return
			}
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
				if !send(x.frame.garbage()) {
					return
				}
			}
		}
		if i < len(content) && !send(x.frame.event(content[i][0], []byte(content[i][1]))) {
			return
		}
	}
	for _, ev := range end {
		if !send(x.frame.event(ev[0], []byte(ev[1]))) {
			return
		}
	}
}

func (b Behavior) message(def string) string {
	if b.Message != "" {
		return b.Message
	}
	return def
}
