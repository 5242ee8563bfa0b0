package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
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
// The relay drives it, not the failover planner: the planner's walk has ended once bytes went to
// the client (its attempts and budget are about finding a first answer), while a continuation is
// bounded by maxContinuations and its own deadline. It reuses the planner's order of resort
// through failover.Continuation, a pure function over the engine's routable channels.

// Recovery results (switchyard_stream_continuations_total's result label).
const (
	recoveryContinued = "continued"
	recoverySpliced   = "spliced"
	recoveryGaveUp    = "gave_up"
)

// streamTap records what a stream sent to the client, in the client's API: the exact text
// bytes, and what a continuation must know to extend the same stream.
type streamTap struct {
	messages bool // the client speaks the Messages API
	text     []byte
	// sent counts the text bytes the client's stream got; countOnly keeps no text (a meter for
	// the tokens of an abandoned stream, where no recovery needs it).
	sent      int
	countOnly bool
	tool      bool // a tool call began: its arguments cannot be continued as text
	multi     bool // a choice other than the first (n > 1)
	// chat: the chunks' id, model and created, which a continuation's chunks take over.
	id      string
	model   string
	created json.RawMessage
	// messages: the last content block begun, and whether it is a text block still open.
	block   int
	open    bool
	started bool
	// parts are the parts of the answer that broke, cur the one streaming now: what a finishing
	// part's usage must be summed with (partusage.go).
	parts []streamPart
	cur   streamPart
}

// addText records text the client's stream got.
func (t *streamTap) addText(s []byte) {
	t.sent += len(s)
	if !t.countOnly {
		t.text = append(t.text, s...)
	}
}

// sawUsage records a usage figure the current part's upstream reported.
func (t *streamTap) sawUsage(u *usage) { t.cur.reported(u) }

// endPart closes the current part when it broke; it is a part of the answer if it added text.
func (t *streamTap) endPart() {
	if t.cur.text = len(t.text) - t.cur.start; t.cur.text > 0 {
		t.parts = append(t.parts, t.cur)
	}
	t.cur = streamPart{start: len(t.text)}
}

// beginPart starts a continuation's part, which carries prefill bytes of the text sent as its
// final assistant turn (0 for a regeneration).
func (t *streamTap) beginPart(prefill int) { t.cur = streamPart{start: len(t.text), prefill: prefill} }

// messageStartPrompt records the input tokens a message_start announces for its part.
func (t *streamTap) messageStartPrompt(e *messagesEventView) {
	if e.Message != nil {
		t.cur.started(e.Message.Usage)
	}
}

// priorUsage is what the parts that broke add to the finishing part's usage.
func (t *streamTap) priorUsage() usageSum { return priorUsage(t.parts, &t.cur) }

// observe reads one write to the client (one or more events).
func (t *streamTap) observe(out []byte) {
	forEachData(out, func(_ string, data []byte) {
		if t.messages {
			t.observeMessages(data)
		} else {
			t.observeChat(data)
		}
	})
}

// forEachData calls fn with the event type and the data of each event in b ("[DONE]" and
// comments included; fn decides).
func forEachData(b []byte, fn func(typ string, data []byte)) {
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

type chatChunkView struct {
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

// observeChat reads a chat chunk with the allocation-free scanner (jsonscan.go): the tap watches
// every event of every recoverable stream, and decoding each with encoding/json cost a quarter of
// the relay's time (BenchmarkStreamRecoveryTap).
func (t *streamTap) observeChat(data []byte) {
	if len(data) == 0 || data[0] != '{' {
		return
	}
	eachMember(data, 0, func(key []byte, start, end int) bool {
		v := data[start:end]
		switch {
		case t.id == "" && keyIs(key, "id"):
			if s, ok := rawJSONString(v); ok {
				t.id = string(s)
			}
		case t.model == "" && keyIs(key, "model"):
			if s, ok := rawJSONString(v); ok {
				t.model = string(s)
			}
		case t.created == nil && keyIs(key, "created"):
			t.created = slices.Clone(v)
		case keyIs(key, "choices"):
			eachElement(data, start, func(cs, ce int) bool {
				t.observeChoice(data, cs)
				return true
			})
		}
		return true
	})
}

// observeChoice reads one choice of a chat chunk, whose '{' is at data[i].
func (t *streamTap) observeChoice(data []byte, i int) {
	index := []byte("0")
	var content, tools []byte
	eachMember(data, i, func(key []byte, start, end int) bool {
		switch {
		case keyIs(key, "index"):
			index = data[start:end]
		case keyIs(key, "delta"):
			eachMember(data, start, func(k []byte, s, e int) bool {
				switch {
				case keyIs(k, "content"):
					content = data[s:e]
				case keyIs(k, "tool_calls"), keyIs(k, "function_call"):
					if isJSONValue(data[s:e]) {
						tools = data[s:e]
					}
				}
				return true
			})
		}
		return true
	})
	if string(index) != "0" {
		t.multi = true
		return
	}
	if tools != nil {
		t.tool = true
	}
	if s, ok := rawJSONString(content); ok {
		t.addText(s)
	}
}

func isJSONValue(r json.RawMessage) bool { return len(r) > 0 && !bytes.Equal(r, []byte("null")) }

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

func (t *streamTap) observeMessages(data []byte) {
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
			t.tool = true
		}
	case "content_block_delta":
		if e.Delta == nil {
			return
		}
		switch e.Delta.Type {
		case "text_delta":
			if s, ok := rawJSONString(e.Delta.Text); ok {
				t.addText(s)
			}
		case "input_json_delta":
			t.tool = true
		}
	case "content_block_stop":
		if e.Index == t.block {
			t.open = false
		}
	}
}

// contRelay rewrites a continuation's (or a regeneration's) events, in the client's API, into
// the rest of the client's stream: its text through the seam, its chunks under the stream's id,
// model and created, its content blocks under the client's block indexes; what the client has
// already (the role, message_start, the open text block's start) is dropped.
type contRelay struct {
	tap    *streamTap
	seam   seam
	offset int  // messages: the continuation's block index + offset = the client's
	mapped bool // messages: offset is known
	failed bool // the continuation departed from the text sent
}

// rewrite returns what the client is to get of out; ok is false when the continuation departs
// from the text already sent (nothing of it may go out).
func (c *contRelay) rewrite(out []byte) (res []byte, ok bool) {
	forEachData(out, func(typ string, data []byte) {
		if c.failed {
			return
		}
		var b []byte
		if c.tap.messages {
			b = c.messagesEvent(typ, data)
		} else {
			b = c.chatChunk(data)
		}
		res = append(res, b...)
	})
	return res, !c.failed
}

func (c *contRelay) chatChunk(data []byte) []byte {
	if len(data) == 0 || data[0] != '{' {
		return append(append([]byte("data: "), data...), '\n', '\n') // [DONE]
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	var choices []map[string]json.RawMessage
	_ = json.Unmarshal(m["choices"], &choices)
	keep := len(choices) == 0 && isJSONValue(m["usage"]) // a usage-only chunk
	for _, ch := range choices {
		if ch == nil {
			continue // a null choice: nothing to relay in it
		}
		var delta map[string]json.RawMessage
		_ = json.Unmarshal(ch["delta"], &delta)
		if delta == nil {
			delta = map[string]json.RawMessage{} // none, or null: held text may still go into it
		}
		delete(delta, "role") // the client has it
		if raw, ok := delta["content"]; ok {
			text, _ := rawJSONString(raw)
			rest, ok := c.seam.feed(text)
			if !ok {
				c.failed = true
				return nil
			}
			if len(rest) == 0 {
				delete(delta, "content")
			} else {
				delta["content"] = appendRawJSONString(nil, rest)
			}
		}
		finished := isJSONValue(ch["finish_reason"])
		if finished {
			rest, ok := c.seam.end()
			if !ok {
				c.failed = true // the answer ends inside bytes the client has: it is not this answer
				return nil
			}
			if len(rest) > 0 {
				prev, _ := rawJSONString(delta["content"])
				delta["content"] = appendRawJSONString(nil, append(slices.Clone(prev), rest...))
			}
		}
		if len(delta) > 0 || finished {
			keep = true
		}
		ch["delta"], _ = json.Marshal(delta)
	}
	if !keep {
		return nil
	}
	if isJSONValue(m["usage"]) {
		m["usage"] = addToUsage(m["usage"], false, c.tap.priorUsage(), &c.tap.cur)
	}
	m["choices"], _ = json.Marshal(choices)
	m["id"], _ = json.Marshal(c.tap.id)
	m["model"], _ = json.Marshal(c.tap.model)
	if len(c.tap.created) > 0 {
		m["created"] = c.tap.created
	}
	b, _ := json.Marshal(m)
	return append(append([]byte("data: "), b...), '\n', '\n')
}

func (c *contRelay) messagesEvent(typ string, data []byte) []byte {
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
		c.tap.messageStartPrompt(&e) // the continuation's prompt, for the sum at its message_delta
		return nil                   // the client's stream has begun already
	case "ping":
		return nil
	case "content_block_start":
		if !c.mapped {
			c.mapped = true
			if e.ContentBlock != nil && e.ContentBlock.Type == "text" && c.tap.open {
				c.offset = c.tap.block - e.Index // the client's open text block goes on
				return nil
			}
			c.offset = c.tap.block + 1 - e.Index
			if !c.tap.started {
				c.offset = -e.Index
			}
		}
		m["index"] = json.RawMessage(strconv.Itoa(e.Index + c.offset))
	case "content_block_delta":
		m["index"] = json.RawMessage(strconv.Itoa(e.Index + c.offset))
		if e.Delta != nil && e.Delta.Type == "text_delta" {
			text, _ := rawJSONString(e.Delta.Text)
			rest, ok := c.seam.feed(text)
			if !ok {
				c.failed = true
				return nil
			}
			if len(rest) == 0 {
				return nil
			}
			var d map[string]json.RawMessage
			_ = json.Unmarshal(m["delta"], &d)
			d["text"] = appendRawJSONString(nil, rest)
			m["delta"], _ = json.Marshal(d)
		}
	case "content_block_stop":
		m["index"] = json.RawMessage(strconv.Itoa(e.Index + c.offset))
		if rest, ok := c.seam.end(); !ok {
			c.failed = true
			return nil
		} else if len(rest) > 0 {
			// held text that was no restart after all goes out before its block ends
			d := append(append([]byte(`{"type":"text_delta","text":`), appendRawJSONString(nil, rest)...), '}')
			delta := fmt.Appendf(nil, `{"type":"content_block_delta","index":%d,"delta":%s}`, e.Index+c.offset, d)
			b, _ := json.Marshal(m)
			return slices.Concat([]byte("event: content_block_delta\ndata: "), delta, []byte("\n\nevent: "+typ+"\ndata: "), b, []byte("\n\n"))
		}
	case "message_delta", "message_stop":
		if rest, ok := c.seam.end(); !ok || len(rest) > 0 {
			c.failed = true // the answer ends inside bytes the client has, or text came outside a block
			return nil
		}
		if isJSONValue(e.Usage) {
			m["usage"] = addToUsage(e.Usage, true, c.tap.priorUsage(), &c.tap.cur)
		}
	}
	b, _ := json.Marshal(m)
	return append(append([]byte("event: "+typ+"\ndata: "), b...), '\n', '\n')
}

// recoveryTraits are the request's fields that decide whether and how a stream may be recovered.
type recoveryTraits struct {
	Temperature    *float64 `json:"temperature"`
	Seed           *int64   `json:"seed"`
	N              *int     `json:"n"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

// deterministic: the request asks for the same answer every time, so a regeneration may be
// spliced (and is still checked byte by byte).
func (t recoveryTraits) deterministic() bool {
	return t.Seed != nil || (t.Temperature != nil && *t.Temperature == 0)
}

// unrecoverable says why a broken stream of this request must end with the in-band error ("" if
// it may be recovered).
func unrecoverable(t recoveryTraits, tap *streamTap) string {
	switch {
	case tap.tool:
		return "a tool call was being streamed"
	case tap.multi || t.N != nil && *t.N > 1:
		return "the request asks for more than one choice (n > 1)"
	case t.ResponseFormat != nil && t.ResponseFormat.Type == "json_schema":
		return "the answer follows a JSON schema a continuation cannot be validated against"
	}
	return ""
}

// recoverable reports whether a stream of this attempt is watched for recovery.
func (rt *routeState) recoverable(mr *failover.Model) bool {
	p := rt.plan.First().Policy
	return rt.req.Stream && p.StreamRecovery == "Continue" && p.MaxContinuations > 0 && rt.restore == nil &&
		(rt.path == "/chat/completions" || rt.path == pathMessages) && mr != nil
}

// continuationBody is the client's request (in the client's API) with the text already sent as
// the final assistant message (merged into the client's own final assistant message, if any).
func continuationBody(body, prefill []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(m["messages"], &msgs); err != nil {
		return nil, err
	}
	text := appendRawJSONString(nil, prefill)
	if n := len(msgs); n > 0 && string(msgs[n-1]["role"]) == `"assistant"` {
		last := msgs[n-1]
		var parts []json.RawMessage
		if old, ok := rawJSONString(last["content"]); ok {
			last["content"] = appendRawJSONString(nil, append(slices.Clone(old), prefill...))
		} else if json.Unmarshal(last["content"], &parts) == nil {
			part := append(append([]byte(`{"type":"text","text":`), text...), '}')
			last["content"], _ = json.Marshal(append(parts, part))
		} else {
			last["content"] = text
		}
	} else {
		msgs = append(msgs, map[string]json.RawMessage{"role": json.RawMessage(`"assistant"`), "content": text})
	}
	var err error
	if m["messages"], err = json.Marshal(msgs); err != nil {
		return nil, err
	}
	// The client's output limit is for the whole answer: the continuation may write what is
	// left of it (estimated from the text sent; at least one token).
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		var n int
		if raw, ok := m[k]; ok && json.Unmarshal(raw, &n) == nil && n > 0 {
			m[k] = json.RawMessage(strconv.Itoa(max(1, n-estTokens(len(prefill)))))
		}
	}
	return json.Marshal(m)
}

// withContinueFlags asks an OpenAI-compatible server to continue the final assistant message
// instead of starting a new turn after it (vLLM's and SGLang's chat-template options).
func withContinueFlags(body []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	m["continue_final_message"] = json.RawMessage("true")
	m["add_generation_prompt"] = json.RawMessage("false")
	return json.Marshal(m)
}

// prefillRejected reports whether a continuation's 400 refuses the assistant turn (a model
// without prefill, or whitespace Anthropic will not end on): the channel is passed over for
// prefill, and the request may still be spliced.
func prefillRejected(r *result) bool {
	if r.status != http.StatusBadRequest {
		return false
	}
	b := bytes.ToLower(r.body)
	return bytes.Contains(b, []byte("assistant")) || bytes.Contains(b, []byte("prefill"))
}

// recoverStream finishes a stream that broke after text reached the client, or ends it with the
// in-band error. broken is the attempt that broke, res its result; the answer is the result.
func (rt *routeState) recoverStream(ctx context.Context, broken *attempt, mr *failover.Model, res result) result {
	s := rt.s
	tap := broken.tap
	var traits recoveryTraits
	if body, err := rt.req.bodyFor(rt.req.Model); err == nil {
		_ = json.Unmarshal(body, &traits)
	}
	why := unrecoverable(traits, tap)
	limit := rt.plan.First().Policy.MaxContinuations
	// The continuations of one break share the fallback deadline of the channel that broke: the
	// client waits at most that long for the stream to go on.
	deadline := time.Now().Add(broken.channel.Timeouts.FallbackRequest)
	lastRes := res
	passOver := map[string]bool{} // channels refusing the prefill, or writing another answer
	tap.endPart()
	for i := 1; why == "" && i <= limit; i++ {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			why = "no continuation within the request's deadline"
			break
		}
		ch, splice := rt.continuationTarget(mr, passOver, len(tap.text) == 0 || traits.deterministic())
		if ch == nil {
			why = "no channel can continue the answer (none with capabilities.prefill, and the request is not deterministic)"
			break
		}
		// A continuation is one more request to a provider, as a retry is: in an outage that
		// breaks every stream it must not double the load on the channels left. (Counted only
		// when one is sent: AllowRetry counts the retry it allows.)
		if !mr.Budget.AllowRetry(s.clock.Now(), mr.Policy.Retry.BudgetPercent) {
			s.metrics.BudgetExhausted.WithLabelValues(mr.Policy.Namespace, mr.Name).Inc()
			why = fmt.Sprintf("the retry budget of policy %s is spent (retry.budgetPercent %d)", mr.Policy.Name, mr.Policy.Retry.BudgetPercent)
			break
		}
		a, err := rt.continuationAttempt(broken, ch, mr, splice, i, min(ch.Timeouts.FallbackRequest, remaining))
		if err != nil {
			why = "the continuation request could not be built: " + err.Error()
			break
		}
		r := s.do(ctx, rt.w, a)
		lastRes = r
		if !prefillRejected(&r) && !a.cont.failed {
			rt.failed(ch, &r) // a refusal of the prefill, or another answer, says nothing against the channel
		}
		switch {
		case r.canceled:
			// The client hung up on the continuation, whose own tokens abandonedTokens counted:
			// the parts before it count too, as the provider bills them.
			rt.abandonedParts(broken, tap)
			r.committed = true
			return r
		case r.outcome == health.OutcomeSuccess:
			result := recoveryContinued
			if splice {
				result = recoverySpliced
			}
			s.metrics.Recoveries.WithLabelValues(broken.channel.Namespace, broken.channel.Name, mr.Name, result).Inc()
			// The parts before count what no usage event of theirs counted already.
			if u := tap.priorUsage(); u.uncounted.prompt+u.uncounted.completion > 0 || u.estimated {
				rt.call.priorTokens(int64(u.uncounted.prompt), int64(u.uncounted.completion), u.estimated)
			}
			r.committed = true
			return r
		case !splice && prefillRejected(&r):
			// A refused prefill is a failed continuation, not one of maxContinuations' tries:
			// the channel is passed over, which bounds these retries by the candidates.
			passOver[ch.ID()] = true
			i--
		case a.cont.failed && splice:
			why = "the regenerated answer does not begin with the text already sent"
		case a.cont.failed:
			passOver[ch.ID()] = true // it wrote another answer: not again for this one
		}
		tap.endPart() // a part of the answer if it added text before it broke
	}
	if why == "" {
		why = fmt.Sprintf("%d continuation(s) failed, the last: %s", limit, lastRes.shown())
	}
	s.metrics.Recoveries.WithLabelValues(broken.channel.Namespace, broken.channel.Name, mr.Name, recoveryGaveUp).Inc()
	flusher, _ := rt.w.(http.Flusher)
	s.writeDeadline(rt.w).extend() // the last write's deadline may have passed while the stream was silent
	writeStreamErrorFor(broken, rt.w, flusher, res.shown()+"; not recovered: "+why)
	res.committed = true
	res.outcome = health.OutcomeStreamCut
	return res
}

// continuationTarget picks the channel that goes on: a routable one whose model has prefill (in
// failover.Continuation's order: those that did not fail this request first), else, when splice
// is allowed, any routable one that fits.
func (rt *routeState) continuationTarget(mr *failover.Model, passOver map[string]bool, spliceOK bool) (*routing.Channel, bool) {
	s := rt.s
	var rnd failover.Rand = failover.GlobalRand{}
	if s.rand != nil {
		rnd = s.rand(rt.requestID)
	}
	routes := s.engine.Select(s.clock.Now(), mr.Name, mr.Candidates, mr.Strategy, false, rnd.Float64(), nil)
	want := rt.plan.First().Policy.RequireResidency
	fits := func(id string) (*routing.Channel, *routing.ChannelModel, bool) {
		ch := rt.c.channels[id]
		if ch == nil || len(want) > 0 && !slices.Contains(want, ch.Residency) || rt.unfit(ch, mr.Name) != "" {
			return nil, nil, false
		}
		m, ok := ch.Model(mr.Name)
		return ch, m, ok
	}
	order := failover.Continuation(routes, rt.failedHere, func(id string) bool {
		_, m, ok := fits(id)
		return ok && m.Capabilities.Prefill && !passOver[id]
	})
	if len(order) > 0 {
		return rt.c.channels[order[0]], false
	}
	if !spliceOK {
		return nil, false
	}
	order = failover.Continuation(routes, rt.failedHere, func(id string) bool { _, _, ok := fits(id); return ok })
	if len(order) > 0 {
		return rt.c.channels[order[0]], true
	}
	return nil, false
}

// abandonedParts counts the parts of a recovered stream that broke before the continuation the
// client abandoned: what no usage event of theirs counted, estimated (priorUsage), and a prompt
// none reported from the request's estimate plus the part's prefill.
func (rt *routeState) abandonedParts(broken *attempt, tap *streamTap) {
	u := tap.priorUsage()
	prompt := u.uncounted.prompt
	if !tap.cur.promptKnown {
		for _, p := range tap.parts {
			if !p.promptKnown {
				prompt += broken.promptEstimate() + estTokens(p.prefill)
			}
		}
	}
	if prompt+u.uncounted.completion > 0 {
		rt.call.priorTokens(int64(prompt), int64(u.uncounted.completion), true)
	}
}

// continuationAttempt builds the attempt that finishes broken's stream on ch: a prefilled
// continuation, or (splice) the original request again.
func (rt *routeState) continuationAttempt(broken *attempt, ch *routing.Channel, mr *failover.Model, splice bool, n int, timeout time.Duration) (*attempt, error) {
	upstream, _ := ch.Upstream(mr.Name)
	body, err := rt.req.bodyFor(upstream)
	if err != nil {
		return nil, err
	}
	m, _ := ch.Model(mr.Name)
	a := &attempt{channel: ch, key: rt.key(ch), model: mr.Name, requested: rt.req.Model, upstream: upstream, path: rt.path,
		stream: true, timeout: timeout, header: rt.header, requestID: rt.requestID, number: rt.plan.Attempts() + n, drill: rt.drill,
		redact: rt.c.redact, piiMasked: rt.piiMasked, call: rt.call, caps: m.Capabilities,
		tap: broken.tap, deferError: true, continuation: n, meter: broken.meter}
	seam := spliceSeam(broken.tap.text)
	var prefill []byte
	if !splice && len(broken.tap.text) > 0 {
		prefill, seam = prefillFor(broken.tap.text, speaksMessages(ch.Provider))
		if body, err = continuationBody(body, prefill); err != nil {
			return nil, err
		}
	}
	a.body = body
	a.cont = &contRelay{tap: broken.tap, seam: seam}
	broken.tap.beginPart(len(prefill))
	if !splice && len(broken.tap.text) > 0 && !speaksMessages(ch.Provider) {
		t, err := translate(a, a.caps)
		if err != nil {
			return nil, err
		}
		if t.body, err = withContinueFlags(t.body); err != nil {
			return nil, err
		}
		a.translated = t
	}
	return a, nil
}
