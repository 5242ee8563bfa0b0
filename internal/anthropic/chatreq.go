package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// ChatRequest is an OpenAI chat completions body translated to a Messages body.
type ChatRequest struct {
	Body   []byte
	Stream bool
	// IncludeUsage: the client asked for stream_options.include_usage, so the translated stream
	// ends with a usage chunk.
	IncludeUsage bool
	// NeedsVision and NeedsTools say what the request asks of the model (capability routing).
	NeedsVision, NeedsTools bool
	// Output is what response_format asks of the answer (ChatFromMessage, ChatStream); nil
	// when it asks for nothing.
	Output *Output
}

// chatIgnored are OpenAI members that change nothing an Anthropic model does, when they have the
// value given here ("" for any value): they are accepted and not sent.
var chatIgnored = map[string]string{
	"n": "1", "logprobs": "false", "presence_penalty": "0", "frequency_penalty": "0",
	"store": "false", "modalities": `["text"]`, "service_tier": "", "stream_options": "",
}

// MessagesFromChat translates an OpenAI chat completions request to a Messages request for the
// target's model. Its MaxTokens is sent when the client gives neither max_tokens nor
// max_completion_tokens (the Messages API requires one; 0 means FallbackMaxTokens).
//
// Translated: messages (system and developer messages become system; tool messages become
// tool_result blocks; images from data: and https: URLs become image blocks), max_tokens and
// max_completion_tokens, temperature (0-1), top_p, stop, stream, tools, tool_choice,
// parallel_tool_calls, user (metadata.user_id) and response_format's json_schema and
// json_object (output_config.format or a forced tool, by the target: see structured.go).
// Anthropic's own top_k and thinking pass
// through. Every other member is a *FieldError naming it, unless it is a no-op (n: 1,
// logprobs: false, presence_penalty: 0, …).
func MessagesFromChat(body []byte, target Target) (*ChatRequest, error) {
	in, err := object(body)
	if err != nil {
		return nil, fieldErr("body", "must be a JSON object: %v", err)
	}
	out := map[string]any{"model": target.Model}
	r := &ChatRequest{}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first offending member named is the same on every call
	var toolChoice map[string]any
	var format *responseFormat
	parallel := true
	for _, k := range keys {
		v := in[k]
		switch k {
		case "model", "messages":
		case "stream":
			if err := json.Unmarshal(v, &r.Stream); err != nil {
				return nil, fieldErr(k, "must be a boolean")
			}
			out["stream"] = r.Stream
		case "max_tokens", "max_completion_tokens":
			var n int
			if err := json.Unmarshal(v, &n); err != nil || n < 1 {
				return nil, fieldErr(k, "must be a positive integer")
			}
			out["max_tokens"] = n
		case "temperature":
			var t float64
			if err := json.Unmarshal(v, &t); err != nil || t < 0 {
				return nil, fieldErr(k, "must be a number from 0")
			}
			if t > 1 {
				return nil, fieldErr(k, "%v is above 1, the highest temperature an Anthropic model takes", t)
			}
			out["temperature"] = json.RawMessage(v)
		case "top_p", "top_k", "thinking":
			out[k] = json.RawMessage(v)
		case "stop":
			var one string
			var many []string
			switch {
			case json.Unmarshal(v, &one) == nil:
				many = []string{one}
			case json.Unmarshal(v, &many) == nil:
			default:
				return nil, fieldErr(k, "must be a string or an array of strings")
			}
			if len(many) > 0 {
				out["stop_sequences"] = many
			}
		case "tools":
			tools, err := toolsFromChat(v)
			if err != nil {
				return nil, err
			}
			if err := checkToolNames(tools, func(i int) string { return fmt.Sprintf("tools[%d].function.name", i) }); err != nil {
				return nil, err
			}
			if len(tools) > 0 {
				out["tools"] = tools
				r.NeedsTools = true
			}
		case "tool_choice":
			if toolChoice, err = toolChoiceFromChat(v); err != nil {
				return nil, err
			}
		case "parallel_tool_calls":
			if err := json.Unmarshal(v, &parallel); err != nil {
				return nil, fieldErr(k, "must be a boolean")
			}
		case "response_format":
			if format, err = formatFromChat(v); err != nil {
				return nil, err
			}
		case "user":
			var u string
			if err := json.Unmarshal(v, &u); err != nil {
				return nil, fieldErr(k, "must be a string")
			}
			out["metadata"] = map[string]any{"user_id": u}
		default:
			want, known := chatIgnored[k]
			if !known || (want != "" && !sameJSON(v, want)) {
				return nil, fieldErr(k, "has no equivalent in the Anthropic Messages API (the model is served by an Anthropic channel)")
			}
		}
	}
	if so, ok := in["stream_options"]; ok && r.Stream {
		var o struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if err := json.Unmarshal(so, &o); err != nil {
			return nil, fieldErr("stream_options", "must be an object")
		}
		r.IncludeUsage = o.IncludeUsage
	}
	if format != nil {
		if r.Output, toolChoice, err = format.apply(target, out, r.NeedsTools, toolChoice); err != nil {
			return nil, err
		}
	}
	setMaxTokensAndToolChoice(out, target.MaxTokens, parallel, toolChoice)
	raw, ok := in["messages"]
	if !ok {
		return nil, fieldErr("messages", "is required")
	}
	system, msgs, vision, err := messagesFromChat(raw)
	if err != nil {
		return nil, err
	}
	r.NeedsVision = vision
	if len(system) > 0 {
		out["system"] = system
	}
	out["messages"] = msgs
	r.Body = mustJSON(out)
	return r, nil
}

// formatFromChat reads response_format: {"type":"text"} asks for nothing (nil); json_schema
// ({"json_schema":{"name","description","schema","strict"}}) and json_object ask for JSON.
func formatFromChat(v json.RawMessage) (*responseFormat, error) {
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      bool            `json:"strict"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(v, &rf); err != nil {
		return nil, fieldErr("response_format", "must be an object")
	}
	f := &responseFormat{field: "response_format", schemaField: "response_format.json_schema.schema", typ: rf.Type}
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_schema":
		if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 || rf.JSONSchema.Schema[0] != '{' {
			return nil, fieldErr("response_format.json_schema.schema", "is required (a JSON schema object)")
		}
		f.schema, f.description, f.strict = rf.JSONSchema.Schema, rf.JSONSchema.Description, rf.JSONSchema.Strict
		return f, nil
	case "json_object":
		return f, nil
	}
	return nil, fieldErr("response_format.type", "unknown value %q (text, json_schema, json_object)", rf.Type)
}

// setMaxTokensAndToolChoice puts into a Messages body what both OpenAI APIs leave to defaults:
// max_tokens (which the Messages API requires: maxTokens, else FallbackMaxTokens) when the client
// gave none, and the tool choice, with parallel tool use off when the client turned it off.
func setMaxTokensAndToolChoice(out map[string]any, maxTokens int, parallel bool, toolChoice map[string]any) {
	if _, ok := out["max_tokens"]; !ok {
		if maxTokens <= 0 {
			maxTokens = FallbackMaxTokens
		}
		out["max_tokens"] = maxTokens
	}
	if !parallel {
		if toolChoice == nil {
			toolChoice = map[string]any{"type": "auto"}
		}
		if toolChoice["type"] != "none" {
			toolChoice["disable_parallel_tool_use"] = true
		}
	}
	if toolChoice != nil {
		out["tool_choice"] = toolChoice
	}
}

func sameJSON(raw json.RawMessage, want string) bool {
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	return bytes.Equal(mustJSON(a), mustJSON(b))
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	FunctionCall json.RawMessage `json:"function_call"`
}

type block = map[string]any

// messagesFromChat turns OpenAI messages into the system blocks and Anthropic's alternating
// user/assistant messages: consecutive messages of one role (tool results are the user's) are
// merged, as the Messages API wants every tool result of a turn in the user message after it.
func messagesFromChat(raw json.RawMessage) (system []block, msgs []map[string]any, vision bool, err error) {
	var in []chatMessage
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, nil, false, fieldErr("messages", "must be an array of message objects: %v", err)
	}
	if len(in) == 0 {
		return nil, nil, false, fieldErr("messages", "must not be empty")
	}
	add := func(role string, blocks []block) {
		if len(blocks) == 0 {
			return
		}
		if n := len(msgs); n > 0 && msgs[n-1]["role"] == role {
			msgs[n-1]["content"] = append(msgs[n-1]["content"].([]block), blocks...)
			return
		}
		msgs = append(msgs, map[string]any{"role": role, "content": blocks})
	}
	for i, m := range in {
		at := fmt.Sprintf("messages[%d]", i)
		if len(m.FunctionCall) > 0 && string(m.FunctionCall) != "null" {
			return nil, nil, false, fieldErr(at+".function_call", "legacy function calls have no equivalent: use tool_calls")
		}
		switch m.Role {
		case "system", "developer":
			text, err := textOnly(m.Content, at+".content")
			if err != nil {
				return nil, nil, false, err
			}
			system = append(system, text...)
		case "user":
			blocks, v, err := userBlocks(m.Content, at+".content")
			if err != nil {
				return nil, nil, false, err
			}
			vision = vision || v
			add("user", blocks)
		case "assistant":
			blocks, err := textOnly(m.Content, at+".content")
			if err != nil {
				return nil, nil, false, err
			}
			for j, tc := range m.ToolCalls {
				input := json.RawMessage(`{}`)
				if strings.TrimSpace(tc.Function.Arguments) != "" {
					input = json.RawMessage(tc.Function.Arguments)
					if !json.Valid(input) || bytes.TrimSpace(input)[0] != '{' {
						return nil, nil, false, fieldErr(fmt.Sprintf("%s.tool_calls[%d].function.arguments", at, j), "must be a JSON object")
					}
				}
				blocks = append(blocks, block{"type": "tool_use", "id": tc.ID, "name": tc.Function.Name, "input": input})
			}
			add("assistant", blocks)
		case "tool":
			if m.ToolCallID == "" {
				return nil, nil, false, fieldErr(at+".tool_call_id", "is required")
			}
			text, err := textOnly(m.Content, at+".content")
			if err != nil {
				return nil, nil, false, err
			}
			tr := block{"type": "tool_result", "tool_use_id": m.ToolCallID}
			if len(text) > 0 {
				tr["content"] = text
			}
			add("user", []block{tr})
		case "function":
			return nil, nil, false, fieldErr(at+".role", "legacy function messages have no equivalent: use tool messages")
		default:
			return nil, nil, false, fieldErr(at+".role", "unknown role %q", m.Role)
		}
	}
	if len(msgs) == 0 {
		return nil, nil, false, fieldErr("messages", "has no user or assistant message")
	}
	return system, msgs, vision, nil
}

type chatPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// textOnly reads content that may only hold text: a string, or text (and refusal) parts.
func textOnly(raw json.RawMessage, at string) ([]block, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []block{{"type": "text", "text": s}}, nil
	}
	var parts []chatPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, fieldErr(at, "must be a string or an array of content parts")
	}
	var out []block
	for j, p := range parts {
		switch p.Type {
		case "text", "refusal":
			if p.Text != "" {
				out = append(out, block{"type": "text", "text": p.Text})
			}
		default:
			return nil, fieldErr(fmt.Sprintf("%s[%d].type", at, j), "%q is not allowed here (text only)", p.Type)
		}
	}
	return out, nil
}

// userBlocks reads a user message's content: text and images.
func userBlocks(raw json.RawMessage, at string) (out []block, vision bool, err error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []block{{"type": "text", "text": s}}, false, nil
	}
	var parts []chatPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, false, fieldErr(at, "must be a string or an array of content parts")
	}
	for j, p := range parts {
		pat := fmt.Sprintf("%s[%d]", at, j)
		switch p.Type {
		case "text":
			out = append(out, block{"type": "text", "text": p.Text})
		case "image_url":
			if p.ImageURL == nil {
				return nil, false, fieldErr(pat+".image_url", "is required")
			}
			src, err := imageSource(p.ImageURL.URL, pat+".image_url.url")
			if err != nil {
				return nil, false, err
			}
			out = append(out, block{"type": "image", "source": src})
			vision = true
		default:
			return nil, false, fieldErr(pat+".type", "%q has no equivalent in the Anthropic Messages API", p.Type)
		}
	}
	return out, vision, nil
}

// imageSource is the Messages image source of an OpenAI image URL: base64 data or an https URL.
func imageSource(u, at string) (map[string]any, error) {
	switch {
	case strings.HasPrefix(u, "data:"):
		meta, data, ok := strings.Cut(u[len("data:"):], ",")
		media, enc, _ := strings.Cut(meta, ";")
		if !ok || enc != "base64" || !strings.HasPrefix(media, "image/") {
			return nil, fieldErr(at, "a data URL must be data:image/<type>;base64,<data>")
		}
		return map[string]any{"type": "base64", "media_type": media, "data": data}, nil
	case strings.HasPrefix(u, "https://"):
		return map[string]any{"type": "url", "url": u}, nil
	}
	return nil, fieldErr(at, "must be a data: or https: URL")
}

func toolsFromChat(raw json.RawMessage) ([]block, error) {
	var in []struct {
		Type     string `json:"type"`
		Function *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fieldErr("tools", "must be an array of tools")
	}
	var out []block
	for i, t := range in {
		if t.Type != "function" || t.Function == nil {
			return nil, fieldErr(fmt.Sprintf("tools[%d].type", i), "only function tools have an equivalent")
		}
		schema := t.Function.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		b := block{"name": t.Function.Name, "input_schema": schema}
		if t.Function.Description != "" {
			b["description"] = t.Function.Description
		}
		out = append(out, b)
	}
	return out, nil
}

// toolChoiceMode reads a tool_choice given as a string, the same in both OpenAI APIs: none,
// auto, required. ok is false for any other JSON (an object naming a function).
func toolChoiceMode(raw json.RawMessage) (tc map[string]any, ok bool, err error) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, false, nil
	}
	switch s {
	case "none":
		return map[string]any{"type": "none"}, true, nil
	case "auto":
		return map[string]any{"type": "auto"}, true, nil
	case "required":
		return map[string]any{"type": "any"}, true, nil
	}
	return nil, true, fieldErr("tool_choice", "unknown value %q", s)
}

func toolChoiceFromChat(raw json.RawMessage) (map[string]any, error) {
	if tc, ok, err := toolChoiceMode(raw); ok {
		return tc, err
	}
	var o struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &o); err != nil || o.Type != "function" || o.Function.Name == "" {
		return nil, fieldErr("tool_choice", "must be none, auto, required or {\"type\":\"function\",\"function\":{\"name\":...}}")
	}
	return map[string]any{"type": "tool", "name": o.Function.Name}, nil
}
