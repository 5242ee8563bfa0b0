package mockprovider

import "fmt"

// The Responses API, as OpenAI serves it and its official SDKs parse it (openai-node's
// ResponseStream and response accumulator, the AI SDK's chunk schema): an answer is a response
// object whose output holds a message item (one output_text part) and, when a tool is called
// (toolToCall), a function_call item after it. A stream is named events, each with its
// sequence_number, no [DONE]:
//
//	response.created, response.in_progress
//	response.output_item.added (message), response.content_part.added (output_text)
//	response.output_text.delta ...
//	response.output_text.done, response.content_part.done, response.output_item.done
//	response.output_item.added (function_call), response.function_call_arguments.delta ...
//	response.function_call_arguments.done, response.output_item.done
//	response.completed (the whole response)
//
// The SDKs refuse an event for an item that was never added ("missing output at index 0"),
// and an item_id that is not the item's. An in-band error (ModeErrorEvent) is OpenAI's: an
// "error" event with the next sequence_number, which the SDKs throw as an APIError.

func (x *exchange) messageItemID() string { return fmt.Sprintf("msg_mock%d", x.id) }
func (x *exchange) callItemID() string    { return fmt.Sprintf("fc_mock%d", x.id) }
func (x *exchange) callID() string        { return fmt.Sprintf("call_mock%d", x.id) }

func outputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

// messageItem is the answer's message item; in progress, it has no content yet.
func (x *exchange) messageItem(done bool) map[string]any {
	item := map[string]any{"type": "message", "id": x.messageItemID(), "status": "in_progress", "role": "assistant", "content": []any{}}
	if done {
		item["status"], item["content"] = "completed", []any{outputText(x.text())}
	}
	return item
}

// callItem is the answer's function_call item; in progress, its arguments are empty.
func (x *exchange) callItem(name string, done bool) map[string]any {
	item := map[string]any{"type": "function_call", "id": x.callItemID(), "call_id": x.callID(), "name": name,
		"arguments": "", "status": "in_progress"}
	if done {
		item["status"], item["arguments"] = "completed", x.toolInput()
	}
	return item
}

// outputItems is the output of the complete answer.
func (x *exchange) outputItems() []any {
	out := []any{}
	if x.hasText() {
		out = append(out, x.messageItem(true))
	}
	if name, ok := x.toolToCall(); ok {
		out = append(out, x.callItem(name, true))
	}
	return out
}

// response is the response object with status and output; usage once it is complete.
func (x *exchange) response(status string, output []any) map[string]any {
	r := map[string]any{
		"id": fmt.Sprintf("resp_mock%d", x.id), "object": "response", "created_at": x.created(),
		"status": status, "model": x.req.Model, "output": output, "error": nil, "incomplete_details": nil,
		"instructions": nil, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
		"previous_response_id": nil, "metadata": map[string]any{}, "temperature": 1, "top_p": 1,
		"text": map[string]any{"format": map[string]any{"type": "text"}}, "usage": nil,
	}
	if status == "completed" {
		p, c := x.promptTokens(), x.completionTokens()
		r["usage"] = map[string]any{"input_tokens": p, "output_tokens": c, "total_tokens": p + c,
			"input_tokens_details":  map[string]any{"cached_tokens": 0},
			"output_tokens_details": map[string]any{"reasoning_tokens": 0}}
	}
	return r
}

// responsesPlan is a Responses stream of the text pieces, then the function_call when a tool is
// called. As in a Messages stream, the call's events are content chunks (After counts them): the
// message item's end with the call item's start, then each arguments delta.
func (x *exchange) responsesPlan(pieces []string) streamPlan {
	var p streamPlan
	seq := 0
	ev := func(typ string, fields map[string]any) string {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		return sseEvent(typ, fields)
	}
	p.head = []string{
		ev("response.created", map[string]any{"response": x.response("in_progress", []any{})}),
		ev("response.in_progress", map[string]any{"response": x.response("in_progress", []any{})}),
	}
	index := 0 // the output index of the open item
	text := x.hasText()
	msgID := x.messageItemID()
	if text {
		p.head = append(p.head,
			ev("response.output_item.added", map[string]any{"output_index": 0, "item": x.messageItem(false)}),
			ev("response.content_part.added", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0, "part": outputText("")}))
	}
	// bounds[i] is the sequence_number of the event after content[i-1]: an error's there.
	bounds := []int{seq}
	add := func(chunk string) {
		p.content = append(p.content, chunk)
		bounds = append(bounds, seq)
	}
	for _, piece := range pieces {
		add(ev("response.output_text.delta", map[string]any{"item_id": msgID, "output_index": 0,
			"content_index": 0, "delta": x.streamText(piece), "logprobs": []any{}}))
	}
	// endMessage is the message item's last three events.
	endMessage := func() string {
		return ev("response.output_text.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0,
			"text": x.text(), "logprobs": []any{}}) +
			ev("response.content_part.done", map[string]any{"item_id": msgID, "output_index": 0, "content_index": 0,
				"part": outputText(x.text())}) +
			ev("response.output_item.done", map[string]any{"output_index": 0, "item": x.messageItem(true)})
	}
	if name, ok := x.toolToCall(); ok {
		begin := ""
		if text {
			begin = endMessage()
			index = 1
		}
		begin += ev("response.output_item.added", map[string]any{"output_index": index, "item": x.callItem(name, false)})
		add(begin)
		for _, args := range x.toolArgPieces() {
			add(ev("response.function_call_arguments.delta", map[string]any{"item_id": x.callItemID(),
				"output_index": index, "delta": args}))
		}
		p.final = []string{
			ev("response.function_call_arguments.done", map[string]any{"item_id": x.callItemID(), "output_index": index,
				"name": name, "arguments": x.toolInput()}),
			ev("response.output_item.done", map[string]any{"output_index": index, "item": x.callItem(name, true)}),
		}
	} else if text {
		p.final = []string{endMessage()}
	}
	p.final = append(p.final, ev("response.completed", map[string]any{"response": x.response("completed", x.outputItems())}))
	for _, n := range bounds {
		p.errors = append(p.errors, sseEvent("error", map[string]any{"type": "error", "code": "server_error",
			"message": x.message("The server had an error while processing your request."), "param": nil, "sequence_number": n}))
	}
	return p
}
