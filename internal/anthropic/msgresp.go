package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

type chatToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatCompletion struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   *string        `json:"content"`
			ToolCalls []chatToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

// messageID makes an OpenAI id look like a Messages id, as SDKs and logs expect.
func messageID(id string) string {
	if strings.HasPrefix(id, "msg_") {
		return id
	}
	return "msg_" + id
}

// MessageFromChat translates an OpenAI chat.completion to a Messages answer.
func MessageFromChat(body []byte) ([]byte, *Usage, error) {
	var c chatCompletion
	if err := json.Unmarshal(body, &c); err != nil || len(c.Choices) == 0 {
		return nil, nil, fmt.Errorf("the upstream answer is not a chat completion")
	}
	ch := c.Choices[0]
	content := []any{}
	if t := ch.Message.Content; t != nil && *t != "" {
		content = append(content, block{"type": "text", "text": *t})
	}
	for _, tc := range ch.Message.ToolCalls {
		content = append(content, block{"type": "tool_use", "id": tc.ID, "name": tc.Function.Name, "input": toolInput(tc.Function.Arguments)})
	}
	u := &Usage{}
	if c.Usage != nil {
		u.Prompt, u.Completion = c.Usage.PromptTokens, c.Usage.CompletionTokens
	}
	return mustJSON(map[string]any{
		"id": messageID(c.ID), "type": "message", "role": "assistant", "model": c.Model, "content": content,
		"stop_reason": StopReason(ch.FinishReason), "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u.Prompt, "output_tokens": u.Completion},
	}), u, nil
}

// toolInput is a tool call's arguments as the JSON object a tool_use block's input must be.
func toolInput(args string) json.RawMessage {
	b := bytes.TrimSpace([]byte(args))
	if len(b) > 0 && b[0] == '{' && json.Valid(b) {
		return b
	}
	return json.RawMessage(`{}`)
}

// MessageStream turns an OpenAI chat completions stream into Messages events: message_start, a
// content block per text run or tool call (content_block_start, deltas, content_block_stop),
// message_delta with the stop_reason and usage, message_stop. The usage comes in the chunk after
// the finish_reason (the request asks for stream_options.include_usage), so message_delta waits
// for it, for [DONE] or for the end of the stream (End).
type MessageStream struct {
	started, stopped bool
	block            int // the open content block's index, -1 for none
	blockType        string
	next             int
	tools            map[int]int // tool call index → block index
	stop             string
	usage            *Usage
}

// NewMessageStream starts a translated stream.
func NewMessageStream() *MessageStream { return &MessageStream{block: -1, tools: map[int]int{}} }

type chatChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Content   json.RawMessage `json:"content"`
			ToolCalls []chatToolCall  `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

func (s *MessageStream) closeBlock(out []byte) []byte {
	if s.block >= 0 {
		out = append(out, event("content_block_stop", map[string]any{"type": "content_block_stop", "index": s.block})...)
		s.block = -1
	}
	return out
}

func (s *MessageStream) open(out []byte, typ string, cb block) []byte {
	out = s.closeBlock(out)
	s.block, s.blockType = s.next, typ
	s.next++
	return append(out, event("content_block_start", map[string]any{"type": "content_block_start", "index": s.block, "content_block": cb})...)
}

// Event translates one upstream chunk (its data; [DONE] included).
func (s *MessageStream) Event(data []byte) (StreamOut, error) {
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		return StreamOut{Data: s.End(), Finished: true, Usage: s.usage}, nil
	}
	var c chatChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return StreamOut{}, err
	}
	var out []byte
	if !s.started {
		s.started = true
		out = event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": messageID(c.ID), "type": "message", "role": "assistant", "model": c.Model, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 0, "output_tokens": 0},
		}})
	}
	for _, ch := range c.Choices {
		if t := ch.Delta.Content; len(t) > 2 && t[0] == '"' {
			if s.block < 0 || s.blockType != "text" {
				out = s.open(out, "text", block{"type": "text", "text": ""})
			}
			out = append(out, event("content_block_delta", map[string]any{"type": "content_block_delta", "index": s.block,
				"delta": map[string]any{"type": "text_delta", "text": t}})...)
		}
		for _, tc := range ch.Delta.ToolCalls {
			idx, known := s.tools[tc.Index]
			if !known {
				out = s.open(out, "tool_use", block{"type": "tool_use", "id": tc.ID, "name": tc.Function.Name, "input": map[string]any{}})
				s.tools[tc.Index] = s.block
				idx = s.block
			}
			if tc.Function.Arguments != "" {
				out = append(out, event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": tc.Function.Arguments}})...)
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.stop = StopReason(*ch.FinishReason)
			out = s.closeBlock(out)
		}
	}
	if c.Usage != nil {
		s.usage = &Usage{Prompt: c.Usage.PromptTokens, Completion: c.Usage.CompletionTokens}
	}
	r := StreamOut{Data: out, Finished: s.stop != ""}
	if s.stop != "" && c.Usage != nil {
		r.Data = append(r.Data, s.End()...)
		r.Usage = s.usage
	}
	return r, nil
}

// End is the stream's last events (message_delta, message_stop) when the upstream did not bring
// them about already: after [DONE] or a clean close. It returns nothing the second time.
func (s *MessageStream) End() []byte {
	if s.stopped || !s.started {
		return nil
	}
	s.stopped = true
	out := s.closeBlock(nil)
	u := s.usage
	if u == nil {
		u = &Usage{}
	}
	stop := s.stop
	if stop == "" {
		stop = "end_turn"
	}
	out = append(out, event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"input_tokens": u.Prompt, "output_tokens": u.Completion}})...)
	return append(out, event("message_stop", map[string]any{"type": "message_stop"})...)
}
