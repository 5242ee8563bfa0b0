package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"
)

// FinishReason is the OpenAI finish_reason of an Anthropic stop_reason.
func FinishReason(stop string) string {
	switch stop {
	case "max_tokens":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	default: // end_turn, stop_sequence, pause_turn
		return "stop"
	}
}

// StopReason is the Anthropic stop_reason of an OpenAI finish_reason.
func StopReason(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	default:
		return "end_turn"
	}
}

type messageUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// prompt counts every input token, cached or not, as OpenAI's prompt_tokens does.
func (u messageUsage) prompt() int {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

type contentBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type message struct {
	ID         string         `json:"id"`
	Model      string         `json:"model"`
	Content    []contentBlock `json:"content"`
	StopReason string         `json:"stop_reason"`
	Usage      messageUsage   `json:"usage"`
}

// ChatFromMessage translates a Messages answer to an OpenAI chat.completion stamped created.
// Text blocks are joined into the message's content, tool_use blocks become tool_calls; thinking
// blocks have no place in a chat completion and are left out. With out (the request's
// response_format), the format tool's input is the content, and a strict answer that is not
// valid against the schema is a *SchemaViolation.
func ChatFromMessage(body []byte, created int64, out *Output) ([]byte, *Usage, error) {
	var m message
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, nil, fmt.Errorf("the upstream answer is not a Messages object: %w", err)
	}
	var text strings.Builder
	var calls []map[string]any
	formatted := out.answeredByTool(m.Content)
	for _, b := range m.Content {
		switch {
		case b.Type == "text" && !formatted:
			text.WriteString(b.Text)
		case out.formatTool(&b):
			text.Write(toolArgs(b.Input))
		case b.Type == "tool_use":
			calls = append(calls, toolCall(b.ID, b.Name, b.Input))
		}
	}
	finish := FinishReason(m.StopReason)
	if formatted && len(calls) == 0 && finish == "tool_calls" {
		finish = "stop" // the format tool's call is the answer, not a call for the client to make
	}
	if finish == "stop" {
		// A cut or refused answer is not validated: its finish_reason tells the client already.
		if v := out.validate([]byte(text.String())); v != nil {
			return nil, nil, v
		}
	}
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if text.Len() > 0 || len(calls) == 0 {
		msg["content"] = text.String()
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	u := &Usage{Prompt: m.Usage.prompt(), Completion: m.Usage.OutputTokens}
	return mustJSON(map[string]any{
		"id": m.ID, "object": "chat.completion", "created": created, "model": m.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
		"usage":   openaiUsage(u),
	}), u, nil
}

// toolArgs is a tool_use block's input as JSON text, {} for none.
func toolArgs(input json.RawMessage) []byte {
	if len(input) == 0 || string(input) == "null" {
		return []byte("{}")
	}
	return input
}

func openaiUsage(u *Usage) map[string]any {
	return map[string]any{"prompt_tokens": u.Prompt, "completion_tokens": u.Completion, "total_tokens": u.Prompt + u.Completion}
}

func toolCall(id, name string, input json.RawMessage) map[string]any {
	return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(toolArgs(input))}}
}

// ChatStream turns a Messages stream into OpenAI chat.completion.chunk events. message_start is
// held back until the first content arrives, so that an upstream that fails right after it (an
// overloaded_error event, as Anthropic sends them) has committed nothing and can still be
// failed over. End is its data: [DONE].
//
// With a response format (Output), the format tool's input streams as the content, and a strict
// answer is validated when it ends: the deltas are out already, so a violation takes the place
// of the finish_reason chunk as an in-band error (code schema_violation), and no [DONE] follows.
type ChatStream struct {
	includeUsage bool
	created      int64
	id, model    string
	head         []byte      // the held role chunk
	tools        map[int]int // content block index → tool call index
	prompt       int
	out          *Output
	format       int  // the format tool's content block index, -1 for none
	calls        bool // a tool call other than the format tool's went out
	text         textBuffer
	violation    *SchemaViolation // the strict answer ended invalid
	// held is the text a forced format tool's answer holds back (as escaped JSON string
	// content): the tool's input is the answer, and the text only if no such tool came.
	held []byte
}

// NewChatStream starts a translated stream; includeUsage adds the usage chunk OpenAI's
// stream_options.include_usage asks for; out is the request's response format (nil for none).
func NewChatStream(includeUsage bool, created int64, out *Output) *ChatStream {
	return &ChatStream{includeUsage: includeUsage, created: created, tools: map[int]int{}, out: out, format: -1}
}

// holdText holds a text delta (a JSON string) back while the format tool is forced and has not
// come; it reports whether it did.
func (s *ChatStream) holdText(text json.RawMessage) bool {
	if s.out == nil || !s.out.Tool || s.format >= 0 {
		return false
	}
	if len(text) >= 2 {
		s.held = append(s.held, text[1:len(text)-1]...)
	}
	return true
}

// Violation is the schema violation a strict stream ended with, nil for none.
func (s *ChatStream) Violation() *SchemaViolation { return s.violation }

// End is what a complete stream still owes the client: data: [DONE], but after a schema
// violation's in-band error, nothing.
func (s *ChatStream) End() []byte {
	if s.violation != nil {
		return nil
	}
	return []byte("data: [DONE]\n\n")
}

func (s *ChatStream) chunk(delta map[string]any, finish any) []byte {
	return chunk(map[string]any{
		"id": s.id, "object": "chat.completion.chunk", "created": s.created, "model": s.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
	})
}

// content returns out with the held head before it.
func (s *ChatStream) content(out []byte) []byte {
	if s.head != nil {
		out = append(s.head, out...)
		s.head = nil
	}
	return out
}

type streamEvent struct {
	Type         string        `json:"type"`
	Index        int           `json:"index"`
	Message      *message      `json:"message"`
	ContentBlock *contentBlock `json:"content_block"`
	Delta        *struct {
		Type        string          `json:"type"`
		Text        json.RawMessage `json:"text"`
		PartialJSON string          `json:"partial_json"`
		StopReason  string          `json:"stop_reason"`
	} `json:"delta"`
	Usage *messageUsage `json:"usage"`
}

// Event translates one upstream event (its data). An event that is not JSON is an error; the
// caller passes it over as a malformed event.
func (s *ChatStream) Event(data []byte) (StreamOut, error) {
	var ev streamEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return StreamOut{}, err
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			s.id, s.model, s.prompt = ev.Message.ID, ev.Message.Model, ev.Message.Usage.prompt()
		}
		s.head = s.chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	case "content_block_start":
		if b := ev.ContentBlock; b != nil {
			switch b.Type {
			case "text":
				if b.Text != "" && s.holdText(mustJSON(b.Text)) {
					return StreamOut{}, nil
				}
				if b.Text != "" {
					s.text.add(s.out, mustJSON(b.Text))
					return StreamOut{Data: s.content(s.chunk(map[string]any{"content": b.Text}, nil))}, nil
				}
			case "tool_use":
				if s.out.formatTool(b) {
					s.format, s.held = ev.Index, nil
					return StreamOut{}, nil // its input is the content, which its deltas bring
				}
				s.calls = true
				n := len(s.tools)
				s.tools[ev.Index] = n
				call := toolCall(b.ID, b.Name, nil)
				call["index"] = n
				call["function"] = map[string]any{"name": b.Name, "arguments": ""}
				return StreamOut{Data: s.content(s.chunk(map[string]any{"tool_calls": []any{call}}, nil))}, nil
			}
		}
	case "content_block_delta":
		if d := ev.Delta; d != nil {
			switch d.Type {
			case "text_delta":
				// The text as it came (raw): a character split across events keeps its bytes
				// rather than become U+FFFD, so the client (and stream recovery) sees them.
				text := d.Text
				if len(text) == 0 || text[0] != '"' {
					text = json.RawMessage(`""`)
				}
				if s.holdText(text) {
					return StreamOut{}, nil
				}
				s.text.add(s.out, text)
				return StreamOut{Data: s.content(s.chunk(map[string]any{"content": text}, nil))}, nil
			case "input_json_delta":
				if ev.Index == s.format && s.format >= 0 {
					if d.PartialJSON == "" {
						return StreamOut{}, nil
					}
					text := mustJSON(d.PartialJSON)
					s.text.add(s.out, text)
					return StreamOut{Data: s.content(s.chunk(map[string]any{"content": json.RawMessage(text)}, nil))}, nil
				}
				n, ok := s.tools[ev.Index]
				if ok && d.PartialJSON != "" {
					return StreamOut{Data: s.content(s.chunk(map[string]any{"tool_calls": []any{
						map[string]any{"index": n, "function": map[string]any{"arguments": d.PartialJSON}},
					}}, nil))}, nil
				}
			}
		}
	case "message_delta":
		if ev.Delta == nil || ev.Delta.StopReason == "" {
			return StreamOut{}, nil
		}
		u := &Usage{Prompt: s.prompt}
		if ev.Usage != nil {
			u.Completion = ev.Usage.OutputTokens
			if p := ev.Usage.prompt(); p > 0 {
				u.Prompt = p // newer API versions count the input here too
			}
		}
		finish := FinishReason(ev.Delta.StopReason)
		if s.format >= 0 && !s.calls && finish == "tool_calls" {
			finish = "stop" // the format tool's call is the answer, not a call for the client to make
		}
		var out []byte
		if len(s.held) > 0 { // no format tool came: the text is the answer after all
			text := json.RawMessage(append(append([]byte{'"'}, s.held...), '"'))
			s.text.add(s.out, text)
			s.held = nil
			out = s.content(s.chunk(map[string]any{"content": text}, nil))
		}
		var violation *SchemaViolation
		if finish == "stop" { // a cut or refused answer is not validated: its finish_reason says so
			violation = s.text.validate(s.out)
		}
		if violation == nil {
			out = append(s.content(out), s.chunk(map[string]any{}, finish)...)
		}
		if s.includeUsage {
			out = append(s.content(out), chunk(map[string]any{
				"id": s.id, "object": "chat.completion.chunk", "created": s.created, "model": s.model,
				"choices": []any{}, "usage": openaiUsage(u),
			})...)
		}
		if violation != nil {
			s.violation = violation
			out = append(s.content(out), chunk(map[string]any{"error": violation.errorObject()})...)
		}
		return StreamOut{Data: out, Finished: true, Usage: u}, nil
	case "message_stop":
		return StreamOut{Finished: true}, nil
	}
	// ping, content_block_stop, thinking and signature deltas: nothing for a chat client.
	return StreamOut{}, nil
}

// PassthroughUsage reads the token counts of an Anthropic stream that goes to the client as it
// came: the input from message_start (or from the final message_delta, where newer API
// versions count it too), the output from the final message_delta. It reports once, at the
// message_delta that ends the answer, so a counter adding each report counts the answer once.
type PassthroughUsage struct{ prompt int }

// Event reads one event (its type and data); non-nil when the event ends the answer.
func (p *PassthroughUsage) Event(typ string, data []byte) *Usage {
	if typ != "message_start" && typ != "message_delta" {
		return nil
	}
	var ev streamEvent
	if json.Unmarshal(data, &ev) != nil {
		return nil
	}
	if typ == "message_start" {
		if ev.Message != nil {
			p.prompt = ev.Message.Usage.prompt()
		}
		return nil
	}
	if ev.Delta == nil || ev.Delta.StopReason == "" {
		return nil
	}
	u := &Usage{Prompt: p.prompt}
	if ev.Usage != nil {
		u.Completion = ev.Usage.OutputTokens
		if n := ev.Usage.prompt(); n > 0 {
			u.Prompt = n
		}
	}
	return u
}
