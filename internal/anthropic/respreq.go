package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// ResponsesRequest is an OpenAI Responses API body translated to a Messages body.
type ResponsesRequest struct {
	Body   []byte
	Stream bool
	// Echo is what the response object repeats of the request (instructions, tools, tool_choice,
	// text, temperature, ...), OpenAI's defaults where the client gave none: the SDKs read a
	// response's own fields, not their request's.
	Echo ResponsesEcho
	// Output is what text.format asks of the answer (ResponsesFromMessage, ResponsesStream);
	// nil when it asks for nothing.
	Output *Output
}

// ResponsesEcho holds the request members a response object repeats, by name.
type ResponsesEcho map[string]any

// responsesIgnored are Responses members that change nothing an Anthropic model does, when they
// have the value given here ("" for any value): they are accepted and not sent. store is any: the
// API defaults it to true, the SDKs send false or nothing, and the gateway stores nothing either
// way. stream_options only asks for OpenAI's obfuscation padding.
var responsesIgnored = map[string]string{
	"store": "", "service_tier": "", "include": "[]", "truncation": `"disabled"`, "top_logprobs": "0",
	"metadata": "{}", "reasoning": "{}", "stream_options": "",
	// A hint for OpenAI's prompt cache; Anthropic caches by the prefix's cache_control.
	"prompt_cache_key": "",
}

// responsesNoEquivalent names why the Responses API's stateful and server-side members cannot be
// served by a Messages channel: the gateway keeps no responses, conversations or prompts.
var responsesNoEquivalent = map[string]string{
	"previous_response_id": "needs a stored response: the gateway stores none (send the whole conversation in input)",
	"conversation":         "needs a stored conversation: the gateway stores none (send the whole conversation in input)",
	"background":           "background responses are not served for a model on an Anthropic channel",
	"prompt":               "stored prompt templates have no equivalent in the Anthropic Messages API",
}

// MessagesFromResponses translates an OpenAI Responses API request to a Messages request for
// the target's model. Its MaxTokens is sent when the client gives no max_output_tokens (0 means
// FallbackMaxTokens), as MessagesFromChat does.
//
// Translated: input (a string, or message items of role user, assistant, system or developer
// with input_text, output_text and input_image parts; function_call items become tool_use
// blocks, function_call_output items tool_result blocks), instructions (system),
// max_output_tokens, temperature (0-1), top_p, stream, tools (function tools), tool_choice,
// parallel_tool_calls, text.format's json_schema and json_object (output_config.format or a
// forced tool, by the target: see structured.go) and user
// (metadata.user_id). Anthropic's own top_k and thinking pass through. Every other member is a
// *FieldError naming it, unless it is a no-op (store, service_tier, include: [], truncation:
// "disabled", ...).
func MessagesFromResponses(body []byte, target Target) (*ResponsesRequest, error) {
	in, err := object(body)
	if err != nil {
		return nil, fieldErr("body", "must be a JSON object: %v", err)
	}
	out := map[string]any{"model": target.Model}
	r := &ResponsesRequest{Echo: ResponsesEcho{
		"instructions": nil, "max_output_tokens": nil, "parallel_tool_calls": true, "tool_choice": "auto",
		"tools": []any{}, "temperature": 1, "top_p": 1, "metadata": map[string]any{},
		"text": map[string]any{"format": map[string]any{"type": "text"}},
	}}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first offending member named is the same on every call
	var toolChoice map[string]any
	var system []block
	var format *responseFormat
	parallel := true
	for _, k := range keys {
		v := in[k]
		switch k {
		case "model", "input":
		case "stream":
			if err := json.Unmarshal(v, &r.Stream); err != nil {
				return nil, fieldErr(k, "must be a boolean")
			}
			out["stream"] = r.Stream
		case "instructions":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, fieldErr(k, "must be a string")
			}
			if s != "" {
				system = append(system, block{"type": "text", "text": s})
			}
			r.Echo[k] = s
		case "max_output_tokens":
			var n int
			if err := json.Unmarshal(v, &n); err != nil || n < 1 {
				return nil, fieldErr(k, "must be a positive integer")
			}
			out["max_tokens"] = n
			r.Echo[k] = n
		case "temperature":
			var t float64
			if err := json.Unmarshal(v, &t); err != nil || t < 0 {
				return nil, fieldErr(k, "must be a number from 0")
			}
			if t > 1 {
				return nil, fieldErr(k, "%v is above 1, the highest temperature an Anthropic model takes", t)
			}
			out[k] = json.RawMessage(v)
			r.Echo[k] = json.RawMessage(v)
		case "top_p":
			out[k] = json.RawMessage(v)
			r.Echo[k] = json.RawMessage(v)
		case "top_k", "thinking":
			out[k] = json.RawMessage(v)
		case "tools":
			tools, err := toolsFromResponses(v)
			if err != nil {
				return nil, err
			}
			if err := checkToolNames(tools, func(i int) string { return fmt.Sprintf("tools[%d].name", i) }); err != nil {
				return nil, err
			}
			if len(tools) > 0 {
				out["tools"] = tools
			}
			r.Echo[k] = json.RawMessage(v)
		case "tool_choice":
			if toolChoice, err = toolChoiceFromResponses(v); err != nil {
				return nil, err
			}
			r.Echo[k] = json.RawMessage(v)
		case "parallel_tool_calls":
			if err := json.Unmarshal(v, &parallel); err != nil {
				return nil, fieldErr(k, "must be a boolean")
			}
			r.Echo[k] = parallel
		case "text":
			var echo map[string]any
			if format, echo, err = formatFromResponses(v); err != nil {
				return nil, err
			}
			r.Echo[k] = echo
		case "user":
			var u string
			if err := json.Unmarshal(v, &u); err != nil {
				return nil, fieldErr(k, "must be a string")
			}
			out["metadata"] = map[string]any{"user_id": u}
		default:
			if why, ok := responsesNoEquivalent[k]; ok {
				return nil, fieldErr(k, "%s", why)
			}
			want, known := responsesIgnored[k]
			if !known || (want != "" && !sameJSON(v, want)) {
				return nil, fieldErr(k, "has no equivalent in the Anthropic Messages API (the model is served by an Anthropic channel)")
			}
		}
	}
	if format != nil {
		_, clientTools := out["tools"]
		if r.Output, toolChoice, err = format.apply(target, out, clientTools, toolChoice); err != nil {
			return nil, err
		}
	}
	setMaxTokensAndToolChoice(out, target.MaxTokens, parallel, toolChoice)
	raw, ok := in["input"]
	if !ok {
		return nil, fieldErr("input", "is required")
	}
	more, msgs, err := messagesFromInput(raw)
	if err != nil {
		return nil, err
	}
	if system = append(system, more...); len(system) > 0 {
		out["system"] = system
	}
	out["messages"] = msgs
	r.Body = mustJSON(out)
	return r, nil
}

// formatFromResponses reads text: its format, flat in the Responses API ({type, name,
// description, schema, strict}) where chat nests it. echo is text as the response repeats it,
// its format {"type":"text"} when the client gave none.
func formatFromResponses(v json.RawMessage) (format *responseFormat, echo map[string]any, err error) {
	var t struct {
		Format    json.RawMessage `json:"format"`
		Verbosity json.RawMessage `json:"verbosity"`
	}
	if err := json.Unmarshal(v, &t); err != nil {
		return nil, nil, fieldErr("text", "must be an object")
	}
	echo = map[string]any{"format": map[string]any{"type": "text"}}
	if len(t.Verbosity) > 0 && string(t.Verbosity) != "null" {
		if !sameJSON(t.Verbosity, `"medium"`) {
			return nil, nil, fieldErr("text.verbosity", "has no equivalent in the Anthropic Messages API (the model is served by an Anthropic channel)")
		}
		echo["verbosity"] = t.Verbosity
	}
	if len(t.Format) == 0 || string(t.Format) == "null" {
		return nil, echo, nil
	}
	var f struct {
		Type        string          `json:"type"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      bool            `json:"strict"`
	}
	if err := json.Unmarshal(t.Format, &f); err != nil {
		return nil, nil, fieldErr("text.format", "must be an object")
	}
	rf := &responseFormat{field: "text.format", schemaField: "text.format.schema", typ: f.Type}
	switch f.Type {
	case "text":
		return nil, echo, nil
	case "json_schema":
		if len(f.Schema) == 0 || f.Schema[0] != '{' {
			return nil, nil, fieldErr("text.format.schema", "is required (a JSON schema object)")
		}
		rf.schema, rf.description, rf.strict = f.Schema, f.Description, f.Strict
	case "json_object":
	default:
		return nil, nil, fieldErr("text.format.type", "unknown value %q (text, json_schema, json_object)", f.Type)
	}
	echo["format"] = t.Format
	return rf, echo, nil
}

func toolsFromResponses(raw json.RawMessage) ([]block, error) {
	var in []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fieldErr("tools", "must be an array of tools")
	}
	var out []block
	for i, t := range in {
		if t.Type != "function" {
			return nil, fieldErr(fmt.Sprintf("tools[%d].type", i), "%q: only function tools have an equivalent (built-in tools are OpenAI's)", t.Type)
		}
		if t.Name == "" {
			return nil, fieldErr(fmt.Sprintf("tools[%d].name", i), "is required")
		}
		schema := t.Parameters
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		b := block{"name": t.Name, "input_schema": schema}
		if t.Description != "" {
			b["description"] = t.Description
		}
		out = append(out, b)
	}
	return out, nil
}

func toolChoiceFromResponses(raw json.RawMessage) (map[string]any, error) {
	if tc, ok, err := toolChoiceMode(raw); ok {
		return tc, err
	}
	var o struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &o); err != nil || o.Type != "function" || o.Name == "" {
		return nil, fieldErr("tool_choice", `must be none, auto, required or {"type":"function","name":...}`)
	}
	return map[string]any{"type": "tool", "name": o.Name}, nil
}

// inputItem is one element of input: a message (type "message", or no type and a role), a
// function_call or a function_call_output. Other members (id, status, phase) change nothing.
type inputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// function_call
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// function_call_output
	Output json.RawMessage `json:"output"`
}

type inputPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	FileID   string `json:"file_id"`
}

// messagesFromInput turns input into system blocks (system and developer messages) and
// Anthropic's alternating messages, consecutive turns of one role merged (tool results are the
// user's), as messagesFromChat does.
func messagesFromInput(raw json.RawMessage) (system []block, msgs []map[string]any, err error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil, fieldErr("input", "must not be empty") // Anthropic refuses an empty text block
		}
		return nil, []map[string]any{{"role": "user", "content": []block{{"type": "text", "text": s}}}}, nil
	}
	var in []inputItem
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, nil, fieldErr("input", "must be a string or an array of input items: %v", err)
	}
	if len(in) == 0 {
		return nil, nil, fieldErr("input", "must not be empty")
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
	for i, it := range in {
		at := fmt.Sprintf("input[%d]", i)
		switch {
		case it.Type == "message" || (it.Type == "" && it.Role != ""):
			blocks, err := inputContent(it.Content, at+".content", it.Role == "user")
			if err != nil {
				return nil, nil, err
			}
			switch it.Role {
			case "system", "developer":
				system = append(system, blocks...)
			case "user", "assistant":
				add(it.Role, blocks)
			default:
				return nil, nil, fieldErr(at+".role", "unknown role %q", it.Role)
			}
		case it.Type == "function_call":
			if it.CallID == "" {
				return nil, nil, fieldErr(at+".call_id", "is required")
			}
			input := json.RawMessage(`{}`)
			if strings.TrimSpace(it.Arguments) != "" {
				input = json.RawMessage(it.Arguments)
				if !json.Valid(input) || bytes.TrimSpace(input)[0] != '{' {
					return nil, nil, fieldErr(at+".arguments", "must be a JSON object")
				}
			}
			add("assistant", []block{{"type": "tool_use", "id": it.CallID, "name": it.Name, "input": input}})
		case it.Type == "function_call_output":
			if it.CallID == "" {
				return nil, nil, fieldErr(at+".call_id", "is required")
			}
			content, err := inputContent(it.Output, at+".output", true)
			if err != nil {
				return nil, nil, err
			}
			tr := block{"type": "tool_result", "tool_use_id": it.CallID}
			if len(content) > 0 {
				tr["content"] = content
			}
			add("user", []block{tr})
		case it.Type == "item_reference":
			return nil, nil, fieldErr(at+".type", "an item_reference needs a stored response: the gateway stores none (send the item itself, as the Vercel AI SDK does with providerOptions.openai.store: false)")
		case it.Type == "":
			return nil, nil, fieldErr(at+".type", "is required (message, function_call or function_call_output)")
		default:
			return nil, nil, fieldErr(at+".type", "%q has no equivalent in the Anthropic Messages API (the model is served by an Anthropic channel)", it.Type)
		}
	}
	if len(msgs) == 0 {
		return nil, nil, fieldErr("input", "has no user or assistant message")
	}
	return system, msgs, nil
}

// inputContent reads a message's content (or a function_call_output's output): a string, or
// parts. Text parts of any role are text; images are the user's (and a tool result's).
func inputContent(raw json.RawMessage, at string, images bool) ([]block, error) {
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
	var parts []inputPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, fieldErr(at, "must be a string or an array of content parts")
	}
	var out []block
	for j, p := range parts {
		pat := fmt.Sprintf("%s[%d]", at, j)
		switch {
		case p.Type == "input_text" || p.Type == "output_text":
			if p.Text != "" {
				out = append(out, block{"type": "text", "text": p.Text})
			}
		case p.Type == "refusal":
			if p.Refusal != "" {
				out = append(out, block{"type": "text", "text": p.Refusal})
			}
		case p.Type == "input_image" && images:
			if p.ImageURL == "" {
				return nil, fieldErr(pat+".image_url", "is required (file_id has no equivalent: the gateway keeps no files)")
			}
			src, err := imageSource(p.ImageURL, pat+".image_url")
			if err != nil {
				return nil, err
			}
			out = append(out, block{"type": "image", "source": src})
		default:
			return nil, fieldErr(pat+".type", "%q has no equivalent in the Anthropic Messages API (the model is served by an Anthropic channel)", p.Type)
		}
	}
	return out, nil
}
