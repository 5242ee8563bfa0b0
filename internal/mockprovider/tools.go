package mockprovider

import (
	"bytes"
	"encoding/json"
)

// Tool calls, in every format the mock speaks. A request that offers tools and has not just
// answered a call is answered with a call of its first tool, as a model that wants the tool
// would: chat completions with tool_calls, the Responses API with a function_call item, the
// Messages API with a tool_use block. Real clients (agent loops, the SDKs' tool helpers) then
// send the tool's result, and get text back. Behavior.ToolCall forces a call of its own tool.

// toolToCall is the tool the mock calls: ToolCall's, or else the request's first one unless the
// conversation already answered a call (its last message or input item is a tool result).
func (x *exchange) toolToCall() (string, bool) {
	if x.b.ToolCall != "" {
		return x.b.ToolCall, true
	}
	if x.ep != epChat && x.ep != epResponses && x.ep != epMessages {
		return "", false
	}
	name := firstToolName(x.req.Tools)
	if name == "" || x.answeredCall() {
		return "", false
	}
	return name, true
}

// firstToolName is the name of the first tool of a request: Messages' {"name"}, the Responses
// API's {"type":"function","name"}, chat's {"type":"function","function":{"name"}}.
func firstToolName(raw json.RawMessage) string {
	var tools []struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &tools) != nil || len(tools) == 0 {
		return ""
	}
	if tools[0].Name != "" {
		return tools[0].Name
	}
	return tools[0].Function.Name
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
