package mockprovider

import (
	"bytes"
	"encoding/json"
)

// Tool calls, in every format the mock speaks. A request that offers tools and has not just
// answered a call is answered with a call of its first tool, as a model that wants the tool
// would: chat completions with tool_calls, the Responses API with a function_call item, the
// Messages API with a tool_use block; its arguments an instance of the tool's parameters. Real
// clients (agent loops, the SDKs' tool helpers) then send the tool's result, and get text back.
// Behavior.ToolCall forces a call of its own tool.

// toolToCall is the tool the mock calls: ToolCall's; else, when the request offers tools, the
// one its tool_choice names, or its first one when the choice is auto or required, unless the
// conversation already answered a call (its last message or input item is a tool result); none
// for tool_choice "none".
func (x *exchange) toolToCall() (string, bool) {
	if x.b.ToolCall != "" {
		return x.b.ToolCall, true
	}
	if x.ep != epChat && x.ep != epResponses && x.ep != epMessages {
		return "", false
	}
	tools := x.tools()
	if len(tools) == 0 || tools[0].name == "" {
		return "", false
	}
	choice, named := x.toolChoice()
	switch {
	case choice == "none":
		return "", false
	case named != "":
		return named, true
	case x.answeredCall():
		return "", false
	}
	return tools[0].name, true
}

// offeredTool is a tool of the request: its name and its parameters' schema.
type offeredTool struct {
	name   string
	schema json.RawMessage
}

// tools are the request's tools: Messages' {"name","input_schema"}, the Responses API's
// {"type":"function","name","parameters"}, chat's {"type":"function","function":{"name",
// "parameters"}}.
func (x *exchange) tools() []offeredTool {
	var raw []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
		Parameters  json.RawMessage `json:"parameters"`
		Function    struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if json.Unmarshal(x.req.Tools, &raw) != nil {
		return nil
	}
	out := make([]offeredTool, 0, len(raw))
	for _, t := range raw {
		switch {
		case t.Function.Name != "":
			out = append(out, offeredTool{t.Function.Name, t.Function.Parameters})
		case t.InputSchema != nil:
			out = append(out, offeredTool{t.Name, t.InputSchema})
		default:
			out = append(out, offeredTool{t.Name, t.Parameters})
		}
	}
	return out
}

// toolChoice is the request's tool_choice: "auto", "none", "required" (Messages: "any"), or the
// name of the tool it forces (chat {"type":"function","function":{"name"}}, Responses
// {"type":"function","name"}, Messages {"type":"tool","name"}).
func (x *exchange) toolChoice() (choice, named string) {
	var s string
	if json.Unmarshal(x.req.ToolChoice, &s) == nil {
		return s, ""
	}
	var c struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(x.req.ToolChoice, &c) != nil {
		return "auto", ""
	}
	if c.Function.Name != "" {
		return c.Type, c.Function.Name
	}
	if c.Type == "function" || c.Type == "tool" {
		return c.Type, c.Name
	}
	return c.Type, ""
}

// toolInput is the input the mock calls its tool with: an instance of the tool's parameters
// (structured.go), its strings the last user text; {"query": <the last user text>} for a tool
// whose parameters name no properties (or that the request does not offer: ToolCall's).
func (x *exchange) toolInput() string {
	name, _ := x.toolToCall()
	for _, t := range x.tools() {
		if t.name != name {
			continue
		}
		var s map[string]any
		if json.Unmarshal(t.schema, &s) != nil {
			break
		}
		if props, _ := s["properties"].(map[string]any); len(props) == 0 {
			break
		}
		b, _ := json.Marshal(schemaInstance(s, s, x.echo(), 0))
		return string(b)
	}
	b, _ := json.Marshal(map[string]string{"query": x.echo()})
	return string(b)
}

// answeredCall reports whether the request ends with a tool's result: a chat "tool" message, a
// Responses function_call_output input item, or a Messages tool_result block.
func (x *exchange) answeredCall() bool {
	raw := x.req.Messages
	if x.ep == epResponses {
		raw = x.req.Input
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &items) != nil || len(items) == 0 {
		return false
	}
	last := items[len(items)-1]
	switch x.ep {
	case epChat:
		return last.Role == "tool"
	case epResponses:
		return last.Type == "function_call_output"
	}
	return bytes.Contains(last.Content, []byte(`"tool_result"`))
}
