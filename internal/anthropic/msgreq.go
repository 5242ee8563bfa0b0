package anthropic

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Needs is what a request asks of the model, for capability routing.
type Needs struct {
	Vision, Tools bool
	// TextBytes counts the bytes of the prompt's text (system, messages, tool results and
	// definitions; not image data), for a lower bound on its tokens.
	TextBytes int
}

// Inspect reads what a Messages or OpenAI chat completions request asks of the model: images
// (image and document blocks, image_url parts), tools, and how much text it holds. It never
// fails: what it cannot read it does not count.
func Inspect(body []byte) Needs {
	var r struct {
		Tools    []json.RawMessage `json:"tools"`
		System   json.RawMessage   `json:"system"`
		Messages []json.RawMessage `json:"messages"`
	}
	_ = json.Unmarshal(body, &r)
	n := Needs{Tools: len(r.Tools) > 0, TextBytes: len(r.System)}
	for _, t := range r.Tools {
		n.TextBytes += len(t)
	}
	for _, m := range r.Messages {
		n.walk(m)
	}
	return n
}

// InspectResponses is Inspect for an OpenAI Responses API request: its input (a string or
// items: messages with input_text and input_image parts, function calls and their outputs),
// instructions and tools.
func InspectResponses(body []byte) Needs {
	var r struct {
		Tools        []json.RawMessage `json:"tools"`
		Instructions json.RawMessage   `json:"instructions"`
		Input        json.RawMessage   `json:"input"`
	}
	_ = json.Unmarshal(body, &r)
	n := Needs{Tools: len(r.Tools) > 0, TextBytes: len(r.Instructions)}
	for _, t := range r.Tools {
		n.TextBytes += len(t)
	}
	if len(r.Input) > 0 {
		n.walk(r.Input)
	}
	return n
}

// walk counts the text of a message (or block) and notes its images.
func (n *Needs) walk(raw json.RawMessage) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		n.TextBytes += len(s)
		return
	}
	var arr []json.RawMessage
	if json.Unmarshal(raw, &arr) == nil {
		for _, e := range arr {
			n.walk(e)
		}
		return
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return
	}
	var typ string
	_ = json.Unmarshal(obj["type"], &typ)
	switch typ {
	case "image", "image_url", "document", "input_image", "input_file":
		n.Vision = true
		return
	}
	for k, v := range obj {
		switch k {
		case "content", "text", "arguments", "input", "tool_calls", "function", "output":
			if k == "input" {
				n.TextBytes += len(v)
				continue
			}
			n.walk(v)
		}
	}
}

// ChatFromMessagesRequest translates a Messages request to an OpenAI chat completions request
// for upstreamModel. A streamed request asks for stream_options.include_usage, which the
// translated stream needs for its message_delta usage.
//
// Translated: system, messages (text, images, tool_use, tool_result), max_tokens, temperature,
// top_p, stop_sequences, stream, tools, tool_choice (with disable_parallel_tool_use) and
// metadata.user_id. cache_control hints are dropped (OpenAI caches by itself) and thinking
// blocks of earlier turns are left out. Every other member is a *FieldError naming it.
func ChatFromMessagesRequest(body []byte, upstreamModel string) ([]byte, error) {
	in, err := object(body)
	if err != nil {
		return nil, fieldErr("body", "must be a JSON object: %v", err)
	}
	out := map[string]any{"model": upstreamModel}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var msgs []map[string]any
	for _, k := range keys {
		v := in[k]
		switch k {
		case "model", "messages":
		case "system":
			text, err := systemText(v)
			if err != nil {
				return nil, err
			}
			if text != "" {
				msgs = append(msgs, map[string]any{"role": "system", "content": text})
			}
		case "max_tokens", "temperature", "top_p":
			out[k] = json.RawMessage(v)
		case "stream":
			var st bool
			if err := json.Unmarshal(v, &st); err != nil {
				return nil, fieldErr(k, "must be a boolean")
			}
			out["stream"] = st
			if st {
				out["stream_options"] = map[string]any{"include_usage": true}
			}
		case "stop_sequences":
			out["stop"] = json.RawMessage(v)
		case "metadata":
			var md struct {
				UserID string `json:"user_id"`
			}
			if err := json.Unmarshal(v, &md); err != nil {
				return nil, fieldErr(k, "must be an object")
			}
			if md.UserID != "" {
				out["user"] = md.UserID
			}
		case "tools":
			tools, err := chatTools(v)
			if err != nil {
				return nil, err
			}
			if len(tools) > 0 {
				out["tools"] = tools
			}
		case "tool_choice":
			var tc struct {
				Type                   string `json:"type"`
				Name                   string `json:"name"`
				DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
			}
			if err := json.Unmarshal(v, &tc); err != nil {
				return nil, fieldErr(k, "must be an object")
			}
			switch tc.Type {
			case "auto":
				out["tool_choice"] = "auto"
			case "any":
				out["tool_choice"] = "required"
			case "none":
				out["tool_choice"] = "none"
			case "tool":
				out["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": tc.Name}}
			default:
				return nil, fieldErr(k+".type", "unknown value %q", tc.Type)
			}
			if tc.DisableParallelToolUse {
				out["parallel_tool_calls"] = false
			}
		case "output_config", "output_format":
			rf, err := responseFormatFromMessages(k, v)
			if err != nil {
				return nil, err
			}
			if rf != nil {
				out["response_format"] = rf
			}
		default:
			return nil, fieldErr(k, "has no equivalent in the OpenAI chat completions API (the model is served by an OpenAI-compatible channel)")
		}
	}
	raw, ok := in["messages"]
	if !ok {
		return nil, fieldErr("messages", "is required")
	}
	turns, err := chatMessages(raw)
	if err != nil {
		return nil, err
	}
	out["messages"] = append(msgs, turns...)
	return mustJSON(out), nil
}

// systemText reads system: a string or text blocks, joined by blank lines.
func systemText(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", fieldErr("system", "must be a string or an array of text blocks")
	}
	var parts []string
	for i, b := range blocks {
		if b.Type != "text" {
			return "", fieldErr(fmt.Sprintf("system[%d].type", i), "only text blocks are allowed")
		}
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n\n"), nil
}

type msgBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Source    *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
}

// chatMessages turns Messages turns into OpenAI messages: a user turn's tool_result blocks become
// tool messages (before the rest of the turn, as they answer the previous assistant turn), an
// assistant turn's tool_use blocks become its tool_calls.
func chatMessages(raw json.RawMessage) ([]map[string]any, error) {
	var in []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fieldErr("messages", "must be an array of message objects")
	}
	var out []map[string]any
	for i, m := range in {
		at := fmt.Sprintf("messages[%d]", i)
		if m.Role != "user" && m.Role != "assistant" {
			return nil, fieldErr(at+".role", "must be user or assistant")
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			out = append(out, map[string]any{"role": m.Role, "content": s})
			continue
		}
		var blocks []msgBlock
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return nil, fieldErr(at+".content", "must be a string or an array of content blocks")
		}
		var parts []map[string]any
		var text []string
		var calls []map[string]any
		for j, b := range blocks {
			bat := fmt.Sprintf("%s.content[%d]", at, j)
			switch {
			case b.Type == "text":
				parts = append(parts, map[string]any{"type": "text", "text": b.Text})
				text = append(text, b.Text)
			case b.Type == "image" && m.Role == "user":
				u, err := imageURL(b, bat)
				if err != nil {
					return nil, err
				}
				parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": u}})
			case b.Type == "tool_result" && m.Role == "user":
				content, err := toolResultText(b.Content, bat+".content")
				if err != nil {
					return nil, err
				}
				out = append(out, map[string]any{"role": "tool", "tool_call_id": b.ToolUseID, "content": content})
			case b.Type == "tool_use" && m.Role == "assistant":
				calls = append(calls, toolCall(b.ID, b.Name, b.Input))
			case b.Type == "thinking" || b.Type == "redacted_thinking":
			default:
				return nil, fieldErr(bat+".type", "%q has no equivalent in the OpenAI chat completions API here", b.Type)
			}
		}
		switch m.Role {
		case "user":
			if len(parts) > 0 {
				out = append(out, map[string]any{"role": "user", "content": parts})
			}
		case "assistant":
			msg := map[string]any{"role": "assistant", "content": strings.Join(text, "")}
			if len(calls) > 0 {
				msg["tool_calls"] = calls
				if len(text) == 0 {
					msg["content"] = nil
				}
			}
			out = append(out, msg)
		}
	}
	return out, nil
}

func imageURL(b msgBlock, at string) (string, error) {
	switch {
	case b.Source == nil:
		return "", fieldErr(at+".source", "is required")
	case b.Source.Type == "base64":
		return "data:" + b.Source.MediaType + ";base64," + b.Source.Data, nil
	case b.Source.Type == "url":
		return b.Source.URL, nil
	}
	return "", fieldErr(at+".source.type", "%q has no equivalent (base64 and url images do)", b.Source.Type)
}

func toolResultText(raw json.RawMessage, at string) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []msgBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", fieldErr(at, "must be a string or an array of text blocks")
	}
	var parts []string
	for i, b := range blocks {
		if b.Type != "text" {
			return "", fieldErr(fmt.Sprintf("%s[%d].type", at, i), "only text tool results have an equivalent")
		}
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, ""), nil
}

func chatTools(raw json.RawMessage) ([]map[string]any, error) {
	var in []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fieldErr("tools", "must be an array of tools")
	}
	var out []map[string]any
	for i, t := range in {
		if t.Type != "" && t.Type != "custom" {
			return nil, fieldErr(fmt.Sprintf("tools[%d].type", i), "server tool %q has no equivalent", t.Type)
		}
		fn := map[string]any{"name": t.Name}
		if t.Description != "" {
			fn["description"] = t.Description
		}
		if len(t.InputSchema) > 0 {
			fn["parameters"] = t.InputSchema
		}
		out = append(out, map[string]any{"type": "function", "function": fn})
	}
	return out, nil
}

// responseFormatFromMessages is structured outputs (output_config.format, or the beta's
// output_format) as the chat API takes them: response_format json_schema, strict as Anthropic's
// constrained decoding is. output_config's effort has no equivalent on a chat channel.
func responseFormatFromMessages(k string, v json.RawMessage) (map[string]any, error) {
	var format struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	raw, at := v, k
	if k == "output_config" {
		var oc map[string]json.RawMessage
		if err := json.Unmarshal(v, &oc); err != nil {
			return nil, fieldErr(k, "must be an object")
		}
		for name, val := range oc {
			if name != "format" && string(val) != "null" {
				return nil, fieldErr(k+"."+name, "has no equivalent in the OpenAI chat completions API (the model is served by an OpenAI-compatible channel)")
			}
		}
		raw, at = oc["format"], k+".format"
		if len(raw) == 0 || string(raw) == "null" {
			return nil, nil
		}
	}
	if err := json.Unmarshal(raw, &format); err != nil {
		return nil, fieldErr(at, "must be an object")
	}
	if format.Type != "json_schema" {
		return nil, fieldErr(at+".type", "unknown value %q (json_schema)", format.Type)
	}
	if len(format.Schema) == 0 || format.Schema[0] != '{' {
		return nil, fieldErr(at+".schema", "is required (a JSON schema object)")
	}
	return map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "output", "schema": format.Schema, "strict": true}}, nil
}
