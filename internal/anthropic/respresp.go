package anthropic

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// The Responses API's answer, as OpenAI serves it and the SDKs parse it (openai-node's
// ResponseStream and accumulator, the AI SDK's chunk schemas; the mock provider's
// responses.go speaks the same): a response object whose output holds one item per Anthropic
// content block, a message item (one output_text part) for a text block and a function_call
// item for a tool_use block; thinking blocks are left out. The function_call's call_id is the
// tool_use id, so that a function_call_output names the tool_use its tool_result answers.

// responseIDs are the ids of a response and its items, from the Messages answer's id.
type responseIDs struct{ base string }

func newResponseIDs(messageID string) responseIDs {
	return responseIDs{base: strings.TrimPrefix(messageID, "msg_")}
}

func (r responseIDs) response() string { return "resp_" + r.base }

// messageItem is the id of the message item at output index i.
func (r responseIDs) messageItem(i int) string { return fmt.Sprintf("msg_%s_%d", r.base, i) }

// callItem is the function_call item's id of a tool_use block.
func callItem(toolUseID string) string { return "fc_" + strings.TrimPrefix(toolUseID, "toolu_") }

// responseStatus is a response's status and incomplete_details for an Anthropic stop_reason:
// cut at max_tokens or refused, the answer is incomplete.
func responseStatus(stop string) (string, any) {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "incomplete", map[string]any{"reason": "max_output_tokens"}
	case "refusal":
		return "incomplete", map[string]any{"reason": "content_filter"}
	}
	return "completed", nil
}

func responsesOutputText(text any) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

// responsesMessage is a message item; text nil: in progress, no content yet.
func responsesMessage(id string, text any) map[string]any {
	item := map[string]any{"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []any{}}
	if text != nil {
		item["status"], item["content"] = "completed", []any{responsesOutputText(text)}
	}
	return item
}

// responsesCall is a function_call item; done false: in progress, arguments empty.
func responsesCall(toolUseID, name, args string, done bool) map[string]any {
	item := map[string]any{"type": "function_call", "id": callItem(toolUseID), "call_id": toolUseID, "name": name,
		"arguments": "", "status": "in_progress"}
	if done {
		item["status"], item["arguments"] = "completed", args
	}
	return item
}

// responseObject is the response with status and output, stamped created; u nil while in progress.
func responseObject(echo ResponsesEcho, id, model string, created int64, status string, incomplete any, output []any, u *messageUsage) map[string]any {
	r := map[string]any{
		"id": id, "object": "response", "created_at": created, "status": status, "model": model,
		"output": output, "error": nil, "incomplete_details": incomplete, "previous_response_id": nil, "usage": nil,
	}
	for k, v := range echo {
		r[k] = v
	}
	if u != nil {
		p := u.prompt()
		r["usage"] = map[string]any{"input_tokens": p, "output_tokens": u.OutputTokens, "total_tokens": p + u.OutputTokens,
			"input_tokens_details":  map[string]any{"cached_tokens": u.CacheReadInputTokens},
			"output_tokens_details": map[string]any{"reasoning_tokens": 0}}
	}
	return r
}

// ResponsesFromMessage translates a Messages answer to an OpenAI response object stamped
// created, repeating echo (the request's members, see ResponsesRequest). With out (the request's
// text.format), the format tool's input is a message item's text, and a strict answer that is
// not valid against the schema is a *SchemaViolation.
func ResponsesFromMessage(body []byte, echo ResponsesEcho, created int64, out *Output) ([]byte, *Usage, error) {
	var m message
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, nil, fmt.Errorf("the upstream answer is not a Messages object: %w", err)
	}
	ids := newResponseIDs(m.ID)
	output := []any{}
	var text strings.Builder
	formatted := out.answeredByTool(m.Content)
	for _, b := range m.Content {
		switch {
		case b.Type == "text" && formatted:
		case b.Type == "text":
			output = append(output, responsesMessage(ids.messageItem(len(output)), b.Text))
			text.WriteString(b.Text)
		case out.formatTool(&b):
			args := string(toolArgs(b.Input))
			output = append(output, responsesMessage(ids.messageItem(len(output)), args))
			text.WriteString(args)
		case b.Type == "tool_use":
			output = append(output, responsesCall(b.ID, b.Name, string(toolArgs(b.Input)), true))
		}
	}
	status, incomplete := responseStatus(m.StopReason)
	if status == "completed" { // a cut or refused answer is not validated: its status says so
		if v := out.validate([]byte(text.String())); v != nil {
			return nil, nil, v
		}
	}
	u := &Usage{Prompt: m.Usage.prompt(), Completion: m.Usage.OutputTokens}
	return mustJSON(responseObject(echo, ids.response(), m.Model, created, status, incomplete, output, &m.Usage)), u, nil
}

// ResponsesStream turns a Messages stream into Responses API events, each with its
// sequence_number and no [DONE]:
//
//	response.created, response.in_progress                      (message_start)
//	response.output_item.added, response.content_part.added     (a text block's start)
//	response.output_text.delta ...                              (its text deltas)
//	response.output_text.done, response.content_part.done,
//	response.output_item.done                                   (its content_block_stop)
//	response.output_item.added                                  (a tool_use block's start)
//	response.function_call_arguments.delta ...                  (its input_json deltas)
//	response.function_call_arguments.done, response.output_item.done
//	response.completed, or response.incomplete                  (the message_delta with the stop_reason)
//
// As ChatStream does, it holds back the head (message_start's events and a text block's start)
// until the first content, so that an upstream that fails right after message_start has
// committed nothing and can still be failed over.
//
// With a response format (Output), the format tool's block streams as a message item, its
// input_json deltas as output_text deltas; a strict answer is validated when it ends, and a
// violation takes the place of response.completed as an error event (code schema_violation).
type ResponsesStream struct {
	out  *Output
	text textBuffer
	// held is the text a forced format tool's answer holds back (escaped JSON string content),
	// its block indexes in heldBlocks; formatted: the format tool's block came.
	held       []byte
	heldBlocks map[int]bool
	formatted  bool
	echo       ResponsesEcho
	created    int64
	ids        responseIDs
	id         string
	model      string
	seq        int
	head       []byte
	open       map[int]*streamItem // content block index → its open item
	output     []doneItem          // the items done, in the order they finished
	next       int                 // the output index of the next item
	usage      messageUsage
	// completed: the response's last event went out (a message_delta's stop_reason); a
	// message_stop without one completes the answer itself.
	completed bool
	violation *SchemaViolation // the strict answer ended invalid
}

// Violation is the schema violation a strict stream ended with, nil for none.
func (s *ResponsesStream) Violation() *SchemaViolation { return s.violation }

// streamItem is an output item being streamed.
type streamItem struct {
	index       int
	call        bool
	format      bool   // the format tool's block, streamed as a message
	id          string // the message item's id, or the tool_use id
	name        string
	text        []byte // a message's text as escaped JSON string content, as it came
	args        strings.Builder
	sawArgDelta bool
}

// NewResponsesStream starts a translated stream stamped created, repeating echo; out is the
// request's text.format (nil for none).
func NewResponsesStream(echo ResponsesEcho, created int64, out *Output) *ResponsesStream {
	return &ResponsesStream{echo: echo, created: created, open: map[int]*streamItem{}, out: out}
}

// Seq is the sequence_number the next event gets (an in-band error's, say).
func (s *ResponsesStream) Seq() int { return s.seq }

func (s *ResponsesStream) ev(typ string, fields map[string]any) []byte {
	fields["type"], fields["sequence_number"] = typ, s.seq
	s.seq++
	return event(typ, fields)
}

func (s *ResponsesStream) content(out []byte) []byte {
	if s.head != nil {
		out = append(s.head, out...)
		s.head = nil
	}
	return out
}

func (s *ResponsesStream) response(status string, incomplete any, output []any, u *messageUsage) map[string]any {
	return responseObject(s.echo, s.id, s.model, s.created, status, incomplete, output, u)
}

// Event translates one upstream event (its data). An event that is not JSON is an error; the
// caller passes it over as a malformed event.
func (s *ResponsesStream) Event(data []byte) (StreamOut, error) {
	var ev streamEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return StreamOut{}, err
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			s.ids = newResponseIDs(ev.Message.ID)
			s.id, s.model, s.usage = s.ids.response(), ev.Message.Model, ev.Message.Usage
		}
		s.head = append(s.head, s.ev("response.created", map[string]any{"response": s.response("in_progress", nil, []any{}, nil)})...)
		s.head = append(s.head, s.ev("response.in_progress", map[string]any{"response": s.response("in_progress", nil, []any{}, nil)})...)
	case "content_block_start":
		b := ev.ContentBlock
		if b == nil || s.open[ev.Index] != nil {
			break
		}
		if s.out.formatTool(b) {
			s.formatted, s.held = true, nil
		}
		if b.Type == "text" && s.out != nil && s.out.Tool && !s.formatted {
			// Held: the format tool's input is the answer; this text only if none comes.
			if s.heldBlocks == nil {
				s.heldBlocks = map[int]bool{}
			}
			s.heldBlocks[ev.Index] = true
			text := mustJSON(b.Text)
			s.held = append(s.held, text[1:len(text)-1]...)
			break
		}
		switch {
		case b.Type == "text" || s.out.formatTool(b):
			it := &streamItem{index: s.next, id: s.ids.messageItem(s.next), format: b.Type == "tool_use"}
			s.next++
			s.open[ev.Index] = it
			start := s.ev("response.output_item.added", map[string]any{"output_index": it.index, "item": responsesMessage(it.id, nil)})
			start = append(start, s.ev("response.content_part.added", map[string]any{"item_id": it.id, "output_index": it.index,
				"content_index": 0, "part": responsesOutputText("")})...)
			if b.Text == "" || it.format {
				if s.head != nil {
					s.head = append(s.head, start...)
					return StreamOut{}, nil
				}
				return StreamOut{Data: start}, nil
			}
			return StreamOut{Data: s.content(append(start, s.textDelta(it, mustJSON(b.Text))...))}, nil
		case b.Type == "tool_use":
			it := &streamItem{index: s.next, call: true, id: b.ID, name: b.Name}
			s.next++
			s.open[ev.Index] = it
			return StreamOut{Data: s.content(s.ev("response.output_item.added", map[string]any{"output_index": it.index,
				"item": responsesCall(b.ID, b.Name, "", false)}))}, nil
		}
	case "content_block_delta":
		it, d := s.open[ev.Index], ev.Delta
		if s.heldBlocks[ev.Index] && d != nil && d.Type == "text_delta" && !s.formatted && len(d.Text) >= 2 && d.Text[0] == '"' {
			s.held = append(s.held, d.Text[1:len(d.Text)-1]...)
			break
		}
		if it == nil || d == nil {
			break
		}
		switch {
		case d.Type == "text_delta" && !it.call:
			// The text as it came (raw): a character split across events keeps its bytes.
			text := d.Text
			if len(text) < 2 || text[0] != '"' {
				text = json.RawMessage(`""`)
			}
			return StreamOut{Data: s.content(s.textDelta(it, text))}, nil
		case d.Type == "input_json_delta" && it.format && d.PartialJSON != "":
			return StreamOut{Data: s.content(s.textDelta(it, mustJSON(d.PartialJSON)))}, nil
		case d.Type == "input_json_delta" && it.call && d.PartialJSON != "":
			it.args.WriteString(d.PartialJSON)
			it.sawArgDelta = true
			return StreamOut{Data: s.content(s.ev("response.function_call_arguments.delta", map[string]any{"item_id": callItem(it.id),
				"output_index": it.index, "delta": d.PartialJSON}))}, nil
		}
	case "content_block_stop":
		if it := s.open[ev.Index]; it != nil {
			delete(s.open, ev.Index)
			return StreamOut{Data: s.content(s.done(it))}, nil
		}
	case "message_delta":
		if ev.Delta == nil || ev.Delta.StopReason == "" {
			break
		}
		if ev.Usage != nil {
			s.usage.OutputTokens = ev.Usage.OutputTokens
			if ev.Usage.prompt() > 0 { // newer API versions count the input here too
				s.usage.InputTokens = ev.Usage.InputTokens
				s.usage.CacheCreationInputTokens = ev.Usage.CacheCreationInputTokens
				s.usage.CacheReadInputTokens = ev.Usage.CacheReadInputTokens
			}
		}
		return s.complete(ev.Delta.StopReason), nil
	case "message_stop":
		if !s.completed {
			// A stream that ends without a message_delta's stop_reason still owes the client
			// its response.completed, which the SDKs wait for.
			return s.complete(""), nil
		}
		return StreamOut{Finished: true}, nil
	}
	// ping, thinking blocks and their deltas: nothing for a Responses client.
	return StreamOut{}, nil
}

// complete closes the items still open and ends the answer with response.completed (or
// response.incomplete, by the stop reason).
func (s *ResponsesStream) complete(stop string) StreamOut {
	s.completed = true
	var out []byte
	if len(s.held) > 0 && !s.formatted { // no format tool came: the text is the answer after all
		it := &streamItem{index: s.next, id: s.ids.messageItem(s.next)}
		s.next++
		out = append(out, s.ev("response.output_item.added", map[string]any{"output_index": it.index, "item": responsesMessage(it.id, nil)})...)
		out = append(out, s.ev("response.content_part.added", map[string]any{"item_id": it.id, "output_index": it.index,
			"content_index": 0, "part": responsesOutputText("")})...)
		out = append(out, s.textDelta(it, json.RawMessage(append(append([]byte{'"'}, s.held...), '"')))...)
		out = append(out, s.done(it)...)
		s.held = nil
	}
	// Items whose block never stopped are done with the answer.
	blocks := make([]int, 0, len(s.open))
	for i := range s.open {
		blocks = append(blocks, i)
	}
	sort.Ints(blocks)
	for _, i := range blocks {
		out = append(out, s.done(s.open[i])...)
		delete(s.open, i)
	}
	status, incomplete := responseStatus(stop)
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	u := &Usage{Prompt: s.usage.prompt(), Completion: s.usage.OutputTokens}
	if status == "completed" { // a cut or refused answer is not validated: its status says so
		if v := s.text.validate(s.out); v != nil {
			e := v.errorObject()
			out = append(out, s.ev("error", map[string]any{"code": e["code"], "message": e["message"], "param": nil})...)
			s.violation = v
			return StreamOut{Data: s.content(out), Finished: true, Usage: u}
		}
	}
	sort.SliceStable(s.output, func(a, b int) bool { return s.output[a].index < s.output[b].index })
	output := make([]any, len(s.output))
	for i, d := range s.output {
		output[i] = d.item
	}
	out = append(out, s.ev(typ, map[string]any{"response": s.response(status, incomplete, output, &s.usage)})...)
	return StreamOut{Data: s.content(out), Finished: true, Usage: u}
}

// doneItem is an output item done, at its output index.
type doneItem struct {
	index int
	item  map[string]any
}

// textDelta is an output_text.delta of raw, a JSON string as it came.
func (s *ResponsesStream) textDelta(it *streamItem, raw json.RawMessage) []byte {
	it.text = append(it.text, raw[1:len(raw)-1]...)
	s.text.add(s.out, raw)
	return s.ev("response.output_text.delta", map[string]any{"item_id": it.id, "output_index": it.index,
		"content_index": 0, "delta": raw, "logprobs": []any{}})
}

// done is an item's closing events; the item joins the output.
func (s *ResponsesStream) done(it *streamItem) []byte {
	var out []byte
	var item map[string]any
	if it.call {
		if !it.sawArgDelta {
			// A tool without input streams none: its arguments are "{}", delta and all, so
			// that the deltas add up to the arguments done.
			it.args.WriteString("{}")
			out = append(out, s.ev("response.function_call_arguments.delta", map[string]any{"item_id": callItem(it.id),
				"output_index": it.index, "delta": "{}"})...)
		}
		args := it.args.String()
		out = append(out, s.ev("response.function_call_arguments.done", map[string]any{"item_id": callItem(it.id),
			"output_index": it.index, "name": it.name, "arguments": args})...)
		item = responsesCall(it.id, it.name, args, true)
	} else {
		text := json.RawMessage(append(append([]byte{'"'}, it.text...), '"'))
		out = append(out, s.ev("response.output_text.done", map[string]any{"item_id": it.id, "output_index": it.index,
			"content_index": 0, "text": text, "logprobs": []any{}})...)
		out = append(out, s.ev("response.content_part.done", map[string]any{"item_id": it.id, "output_index": it.index,
			"content_index": 0, "part": responsesOutputText(text)})...)
		item = responsesMessage(it.id, text)
	}
	out = append(out, s.ev("response.output_item.done", map[string]any{"output_index": it.index, "item": item})...)
	s.output = append(s.output, doneItem{it.index, item})
	return out
}
