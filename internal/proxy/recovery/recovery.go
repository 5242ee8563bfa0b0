// Package recovery is the state of a stream that may be finished after it broke
// (RoutingPolicy streamRecovery: Continue): the Tap that records what the client was sent, the
// seam where a continuation's or a regeneration's text joins it, the ContRelay that rewrites a
// continuation's events into the client's stream, and the usage of a stream told in parts. It
// does no I/O: the proxy's recovery walk (recover.go) asks the failover planner where to
// continue and drives the attempts.
package recovery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/switchyard-io/switchyard/internal/jsonraw"
	"github.com/switchyard-io/switchyard/internal/proxy/sse"
)

// Stream recovery (RoutingPolicy streamRecovery: Continue). A stream that breaks after text
// reached the client (a cut, a stall past streamIdle, an error event) is finished instead of
// ended with an in-band error:
//
//   - continue: the original request plus one trailing assistant message holding the text
//     already sent goes to a channel whose model continues it (capabilities.prefill), and only
//     the remainder is relayed, as more chunks of the same stream (the seam: seam.go);
//   - splice: when nothing can continue (no prefill-capable channel, or each refused the
//     prefill), a deterministic request (temperature 0, or a seed) is asked again whole, and
//     what follows the text already sent is relayed only if the new answer begins with exactly
//     that text;
//   - otherwise, and for a tool call begun, n > 1, a JSON-schema response_format, a PII-restored
//     stream, or an API other than chat/completions and messages, the stream ends with the
//     in-band error event as without recovery.
//
// The proxy's relay drives it: the planner's walk has ended once bytes went to the client (its
// attempts and budget are about finding a first answer), while a continuation is bounded by
// maxContinuations and its own deadline; where a continuation goes is the failover plan's
// Continue, a pure decision over the engine's routable channels on the injected clock.

// Recovery results (switchyard_stream_continuations_total's result label).
const (
	Continued = "continued"
	Spliced   = "spliced"
	GaveUp    = "gave_up"
)

// Tap records what a stream sent to the client, in the client's API: the exact text
// bytes, and what a continuation must know to extend the same stream.
type Tap struct {
	Messages bool // the client speaks the Messages API
	Text     []byte
	// Sent counts the text bytes the client's stream got; countOnly keeps no text (a meter for
	// the tokens of an abandoned stream, where no recovery needs it).
	Sent      int
	CountOnly bool
	Tool      bool // a tool call began: its arguments cannot be continued as text
	Multi     bool // a choice other than the first (n > 1)
	// chat: the chunks' id, model and created, which a continuation's chunks take over.
	id      string
	model   string
	created json.RawMessage
	// Messages: the last content block begun, and whether it is a text block still open.
	block   int
	open    bool
	started bool
	// Parts are the parts of the answer that broke, cur the one streaming now: what a finishing
	// part's usage must be summed with (partusage.go).
	Parts []Part
	Cur   Part
}

// addText records text the client's stream got.
func (t *Tap) addText(s []byte) {
	t.Sent += len(s)
	if !t.CountOnly {
		t.Text = append(t.Text, s...)
	}
}

// SawUsage records a usage figure the current part's upstream reported.
func (t *Tap) SawUsage(u *sse.Usage) { t.Cur.reported(u) }

// EndPart closes the current part when it broke; it is a part of the answer if it added text.
func (t *Tap) EndPart() {
	if t.Cur.text = len(t.Text) - t.Cur.start; t.Cur.text > 0 {
		t.Parts = append(t.Parts, t.Cur)
	}
	t.Cur = Part{start: len(t.Text)}
}

// BeginPart starts a continuation's part, which carries prefill bytes of the text sent as its
// final assistant turn (0 for a regeneration).
func (t *Tap) BeginPart(prefill int) { t.Cur = Part{start: len(t.Text), Prefill: prefill} }

// messageStartPrompt records the input tokens a message_start announces for its part.
func (t *Tap) messageStartPrompt(e *messagesEventView) {
	if e.Message != nil {
		t.Cur.started(e.Message.Usage)
	}
}

// PriorUsage is what the parts that broke add to the finishing part's usage.
func (t *Tap) PriorUsage() UsageSum { return priorUsage(t.Parts, &t.Cur) }

// Observe reads one write to the client (one or more events).
func (t *Tap) Observe(out []byte) {
	ForEachData(out, func(_ string, data []byte) {
		if t.Messages {
			t.observeMessages(data)
		} else {
			t.observeChat(data)
		}
	})
}

// ForEachData calls fn with the event type and the data of each event in b ("[DONE]" and
// comments included; fn decides).
func ForEachData(b []byte, fn func(typ string, data []byte)) {
	for len(b) > 0 {
		ev := b
		if i := bytes.Index(b, []byte("\n\n")); i >= 0 {
			ev, b = b[:i], b[i+2:]
		} else {
			b = nil
		}
		var typ string
		var data []byte
		own := false // data is a copy (several data lines), not a slice of b
		for line := range bytes.SplitSeq(ev, []byte("\n")) {
			line = bytes.TrimRight(line, "\r")
			switch {
			case bytes.HasPrefix(line, []byte("data:")):
				d := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
				switch {
				case data == nil && len(d) == 0: // as append would leave it: nil
				case data == nil:
					data = d[:len(d):len(d)] // one data line, the usual event: no copy
				case !own:
					data, own = append(append(append([]byte(nil), data...), '\n'), d...), true
				default:
					data = append(append(data, '\n'), d...)
				}
			case bytes.HasPrefix(line, []byte("event:")):
				typ = string(bytes.TrimSpace(line[len("event:"):]))
			}
		}
		if data != nil || typ != "" {
			fn(typ, data)
		}
	}
}

// ChatChunkView is what stream recovery reads of a chat completion chunk: its identity and choices.
type ChatChunkView struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Created json.RawMessage `json:"created"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content      json.RawMessage `json:"content"`
			ToolCalls    json.RawMessage `json:"tool_calls"`
			FunctionCall json.RawMessage `json:"function_call"`
		} `json:"delta"`
	} `json:"choices"`
}

// observeChat reads a chat chunk with the allocation-free scanner (internal/jsonraw): the tap watches
// every event of every recoverable stream, and decoding each with encoding/json cost a quarter of
// the relay's time (BenchmarkStreamRecoveryTap).
func (t *Tap) observeChat(data []byte) {
	if len(data) == 0 || data[0] != '{' {
		return
	}
	jsonraw.EachMember(data, 0, func(key []byte, start, end int) bool {
		v := data[start:end]
		switch {
		case t.id == "" && jsonraw.KeyIs(key, "id"):
			if s, ok := RawJSONString(v); ok {
				t.id = string(s)
			}
		case t.model == "" && jsonraw.KeyIs(key, "model"):
			if s, ok := RawJSONString(v); ok {
				t.model = string(s)
			}
		case t.created == nil && jsonraw.KeyIs(key, "created"):
			t.created = slices.Clone(v)
		case jsonraw.KeyIs(key, "choices"):
			jsonraw.EachElement(data, start, func(cs, ce int) bool {
				t.observeChoice(data, cs)
				return true
			})
		}
		return true
	})
}

// observeChoice reads one choice of a chat chunk, whose '{' is at data[i].
func (t *Tap) observeChoice(data []byte, i int) {
	index := []byte("0")
	var content, tools []byte
	jsonraw.EachMember(data, i, func(key []byte, start, end int) bool {
		switch {
		case jsonraw.KeyIs(key, "index"):
			index = data[start:end]
		case jsonraw.KeyIs(key, "delta"):
			jsonraw.EachMember(data, start, func(k []byte, s, e int) bool {
				switch {
				case jsonraw.KeyIs(k, "content"):
					content = data[s:e]
				case jsonraw.KeyIs(k, "tool_calls"), jsonraw.KeyIs(k, "function_call"):
					if IsJSONValue(data[s:e]) {
						tools = data[s:e]
					}
				}
				return true
			})
		}
		return true
	})
	if string(index) != "0" {
		t.Multi = true
		return
	}
	if tools != nil {
		t.Tool = true
	}
	if s, ok := RawJSONString(content); ok {
		t.addText(s)
	}
}

// IsJSONValue reports whether a JSON member is present and not null.
func IsJSONValue(r json.RawMessage) bool { return len(r) > 0 && !bytes.Equal(r, []byte("null")) }

type messagesEventView struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock *struct {
		Type string `json:"type"`
	} `json:"content_block"`
	Delta *struct {
		Type string          `json:"type"`
		Text json.RawMessage `json:"text"`
	} `json:"delta"`
	Message *struct {
		Usage messageUsage `json:"usage"`
	} `json:"message"`
	Usage json.RawMessage `json:"usage"`
}

func (t *Tap) observeMessages(data []byte) {
	var e messagesEventView
	if json.Unmarshal(data, &e) != nil {
		return
	}
	switch e.Type {
	case "message_start":
		t.messageStartPrompt(&e)
	case "content_block_start":
		t.block, t.started = e.Index, true
		t.open = e.ContentBlock != nil && e.ContentBlock.Type == "text"
		if e.ContentBlock != nil && (e.ContentBlock.Type == "tool_use" || e.ContentBlock.Type == "server_tool_use") {
			t.Tool = true
		}
	case "content_block_delta":
		if e.Delta == nil {
			return
		}
		switch e.Delta.Type {
		case "text_delta":
			if s, ok := RawJSONString(e.Delta.Text); ok {
				t.addText(s)
			}
		case "input_json_delta":
			t.Tool = true
		}
	case "content_block_stop":
		if e.Index == t.block {
			t.open = false
		}
	}
}

// ContRelay rewrites a continuation's (or a regeneration's) events, in the client's API, into
// the rest of the client's stream: its text through the seam, its chunks under the stream's id,
// model and created, its content blocks under the client's block indexes; what the client has
// already (the role, message_start, the open text block's start) is dropped.
type ContRelay struct {
	Tap    *Tap
	Seam   seam
	offset int  // messages: the continuation's block index + offset = the client's
	mapped bool // messages: offset is known
	Failed bool // the continuation departed from the text sent
}

// Rewrite returns what the client is to get of out; ok is false when the continuation departs
// from the text already sent (nothing of it may go out).
func (c *ContRelay) Rewrite(out []byte) (res []byte, ok bool) {
	ForEachData(out, func(typ string, data []byte) {
		if c.Failed {
			return
		}
		var b []byte
		if c.Tap.Messages {
			b = c.messagesEvent(typ, data)
		} else {
			b = c.chatChunk(data)
		}
		res = append(res, b...)
	})
	return res, !c.Failed
}

func (c *ContRelay) chatChunk(data []byte) []byte {
	if len(data) == 0 || data[0] != '{' {
		return append(append([]byte("data: "), data...), '\n', '\n') // [DONE]
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	var choices []map[string]json.RawMessage
	_ = json.Unmarshal(m["choices"], &choices)
	keep := len(choices) == 0 && IsJSONValue(m["usage"]) // a usage-only chunk
	for _, ch := range choices {
		if ch == nil {
			continue // a null choice: nothing to relay in it
		}
		kept, ok := c.chatChoice(ch)
		if !ok {
			c.Failed = true
			return nil
		}
		keep = keep || kept
	}
	if !keep {
		return nil
	}
	return c.chatChunkOut(m, choices)
}

// chatChoice puts one choice's delta through the seam. It reports whether the choice has
// anything left for the client, and ok false when the continuation departs from the text sent.
func (c *ContRelay) chatChoice(ch map[string]json.RawMessage) (keep, ok bool) {
	var delta map[string]json.RawMessage
	_ = json.Unmarshal(ch["delta"], &delta)
	if delta == nil {
		delta = map[string]json.RawMessage{} // none, or null: held text may still go into it
	}
	delete(delta, "role") // the client has it
	if raw, ok := delta["content"]; ok {
		text, _ := RawJSONString(raw)
		rest, ok := c.Seam.feed(text)
		if !ok {
			return false, false
		}
		if len(rest) == 0 {
			delete(delta, "content")
		} else {
			delta["content"] = AppendRawJSONString(nil, rest)
		}
	}
	finished := IsJSONValue(ch["finish_reason"])
	if finished {
		rest, ok := c.Seam.end()
		if !ok {
			return false, false // the answer ends inside bytes the client has: it is not this answer
		}
		if len(rest) > 0 {
			prev, _ := RawJSONString(delta["content"])
			delta["content"] = AppendRawJSONString(nil, append(slices.Clone(prev), rest...))
		}
	}
	ch["delta"], _ = json.Marshal(delta)
	return len(delta) > 0 || finished, true
}

// chatChunkOut is the chunk m with choices, under the client's stream's id, model and created,
// its usage the sum of every part of the answer.
func (c *ContRelay) chatChunkOut(m map[string]json.RawMessage, choices []map[string]json.RawMessage) []byte {
	if IsJSONValue(m["usage"]) {
		m["usage"] = addToUsage(m["usage"], false, c.Tap.PriorUsage(), &c.Tap.Cur)
	}
	m["choices"], _ = json.Marshal(choices)
	m["id"], _ = json.Marshal(c.Tap.id)
	m["model"], _ = json.Marshal(c.Tap.model)
	if len(c.Tap.created) > 0 {
		m["created"] = c.Tap.created
	}
	b, _ := json.Marshal(m)
	return append(append([]byte("data: "), b...), '\n', '\n')
}

func (c *ContRelay) messagesEvent(typ string, data []byte) []byte {
	var e messagesEventView
	if json.Unmarshal(data, &e) != nil {
		return nil
	}
	if typ == "" {
		typ = e.Type
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(data, &m)
	switch e.Type {
	case "message_start":
		c.Tap.messageStartPrompt(&e) // the continuation's prompt, for the sum at its message_delta
		return nil                   // the client's stream has begun already
	case "ping":
		return nil
	case "content_block_start":
		if c.mapBlocks(&e) {
			return nil // the client's open text block goes on
		}
		m["index"] = json.RawMessage(strconv.Itoa(e.Index + c.offset))
	case "content_block_delta":
		m["index"] = json.RawMessage(strconv.Itoa(e.Index + c.offset))
		if e.Delta != nil && e.Delta.Type == "text_delta" && !c.textDelta(e.Delta.Text, m) {
			return nil
		}
	case "content_block_stop":
		m["index"] = json.RawMessage(strconv.Itoa(e.Index + c.offset))
		return c.blockStop(typ, e.Index+c.offset, m)
	case "message_delta", "message_stop":
		if rest, ok := c.Seam.end(); !ok || len(rest) > 0 {
			c.Failed = true // the answer ends inside bytes the client has, or text came outside a block
			return nil
		}
		if IsJSONValue(e.Usage) {
			m["usage"] = addToUsage(e.Usage, true, c.Tap.PriorUsage(), &c.Tap.Cur)
		}
	}
	return messagesEventOut(typ, m)
}

// mapBlocks learns, at the continuation's first content_block_start, the offset from its block
// indexes to the client's. It reports whether that block is the text block the client has open
// (its start is then dropped: the client's block goes on).
func (c *ContRelay) mapBlocks(e *messagesEventView) (continues bool) {
	if c.mapped {
		return false
	}
	c.mapped = true
	if e.ContentBlock != nil && e.ContentBlock.Type == "text" && c.Tap.open {
		c.offset = c.Tap.block - e.Index
		return true
	}
	c.offset = c.Tap.block + 1 - e.Index
	if !c.Tap.started {
		c.offset = -e.Index
	}
	return false
}

// textDelta puts the text of the text_delta event m through the seam, into m; it reports
// whether anything of it goes to the client.
func (c *ContRelay) textDelta(text json.RawMessage, m map[string]json.RawMessage) bool {
	s, _ := RawJSONString(text)
	rest, ok := c.Seam.feed(s)
	if !ok {
		c.Failed = true
		return false
	}
	if len(rest) == 0 {
		return false
	}
	var d map[string]json.RawMessage
	_ = json.Unmarshal(m["delta"], &d)
	d["text"] = AppendRawJSONString(nil, rest)
	m["delta"], _ = json.Marshal(d)
	return true
}

// blockStop is the content_block_stop event m for the client's block index, after the text
// the seam still holds.
func (c *ContRelay) blockStop(typ string, index int, m map[string]json.RawMessage) []byte {
	rest, ok := c.Seam.end()
	if !ok {
		c.Failed = true
		return nil
	}
	if len(rest) == 0 {
		return messagesEventOut(typ, m)
	}
	// held text that was no restart after all goes out before its block ends
	d := append(append([]byte(`{"type":"text_delta","text":`), AppendRawJSONString(nil, rest)...), '}')
	delta := fmt.Appendf(nil, `{"type":"content_block_delta","index":%d,"delta":%s}`, index, d)
	b, _ := json.Marshal(m)
	return slices.Concat([]byte("event: content_block_delta\ndata: "), delta, []byte("\n\nevent: "+typ+"\ndata: "), b, []byte("\n\n"))
}

// messagesEventOut frames m as the client gets it: one SSE event named typ.
func messagesEventOut(typ string, m map[string]json.RawMessage) []byte {
	b, _ := json.Marshal(m)
	return append(append([]byte("event: "+typ+"\ndata: "), b...), '\n', '\n')
}
