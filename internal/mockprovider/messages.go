package mockprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Anthropic's Messages API, as the mock speaks it: POST /v1/messages (JSON, or SSE with
// message_start, content blocks, message_delta and message_stop, no [DONE]) and
// /v1/messages/count_tokens; errors in Anthropic's shape ({"type":"error","error":{"type",
// "message"}}), the key in x-api-key. A request with tools whose last message carries no
// tool_result is answered with a tool_use of the first tool (toolToCall, tools.go).

// messagesErrorType is Anthropic's error type for a status.
func messagesErrorType(status int, code string) string {
	switch {
	case status == http.StatusBadRequest:
		return "invalid_request_error"
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusPaymentRequired:
		return "billing_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == 529 || status == http.StatusServiceUnavailable:
		return "overloaded_error"
	case status >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

// errorEvent is the in-band error of ModeErrorEvent.
func (x *exchange) errorEvent() string {
	if x.ep == epMessages {
		return sseEvent("error", map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": x.message("Overloaded")}})
	}
	return sseData(map[string]any{"error": map[string]any{"message": x.message("The server had an error while processing your request."), "type": "server_error", "param": nil, "code": nil}})
}

func (x *exchange) messagesUsage() map[string]any {
	return map[string]any{"input_tokens": x.promptTokens(), "output_tokens": x.completionTokens()}
}

// messageBody is the non-streamed Messages answer.
func (x *exchange) messageBody() map[string]any {
	content := []any{}
	if x.hasText() {
		content = append(content, map[string]any{"type": "text", "text": x.text()})
	}
	stop := "end_turn"
	if name, ok := x.toolToCall(); ok {
		content = append(content, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_mock%d", x.id), "name": name, "input": json.RawMessage(x.toolInput())})
		stop = "tool_use"
	}
	return map[string]any{
		"id": fmt.Sprintf("msg_mock%d", x.id), "type": "message", "role": "assistant", "model": x.req.Model,
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": x.messagesUsage(),
	}
}

// messagesPlan is a Messages stream: a text block of the pieces (none for a ToolCall alone), then
// a tool_use block when the behaviour or the request calls for one. The tool's events are content
// chunks (After counts them): the text block's end with the tool_use block's start, then each
// input_json_delta.
func (x *exchange) messagesPlan(pieces []string) streamPlan {
	var p streamPlan
	start := map[string]any{
		"id": fmt.Sprintf("msg_mock%d", x.id), "type": "message", "role": "assistant", "model": x.req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": x.promptTokens(), "output_tokens": 1},
	}
	p.head = []string{sseEvent("message_start", map[string]any{"type": "message_start", "message": start})}
	block := -1 // the open block
	if x.hasText() {
		block = 0
		p.head = append(p.head, sseEvent("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}))
	}
	p.head = append(p.head, sseEvent("ping", map[string]any{"type": "ping"}))
	for _, piece := range pieces {
		p.content = append(p.content, sseEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": x.streamText(piece)}}))
	}
	stop := "end_turn"
	if name, ok := x.toolToCall(); ok {
		stop = "tool_use"
		var begin string
		if block >= 0 {
			begin = sseEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": block})
		}
		block++
		begin += sseEvent("content_block_start", map[string]any{"type": "content_block_start", "index": block,
			"content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_mock%d", x.id), "name": name, "input": map[string]any{}}})
		p.content = append(p.content, begin)
		for _, args := range x.toolArgPieces() {
			p.content = append(p.content, sseEvent("content_block_delta", map[string]any{"type": "content_block_delta", "index": block,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": args}}))
		}
	}
	if block >= 0 {
		p.final = []string{sseEvent("content_block_stop", map[string]any{"type": "content_block_stop", "index": block})}
	}
	// message_delta's usage is cumulative, the input included, as the API sends it now.
	p.final = append(p.final,
		sseEvent("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": map[string]any{"input_tokens": x.promptTokens(), "output_tokens": x.completionTokens()}}),
		sseEvent("message_stop", map[string]any{"type": "message_stop"}),
	)
	return p
}
