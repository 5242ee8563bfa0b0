package mockprovider

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSchemaInstance(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":2},"ok":{"type":"boolean"}},"required":["city"]}`,
			`{"city":"T","days":2,"ok":true}`},
		{`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"minItems":2},"kind":{"enum":["a","b"]},"v":{"const":3}}}`,
			`{"kind":"a","tags":["T","T"],"v":3}`},
		{`{"type":"object","properties":{"n":{"anyOf":[{"type":"null"},{"type":"number"}]},"s":{"type":["null","string"]}}}`, `{"n":1,"s":"T"}`},
		{`{"$defs":{"p":{"type":"object","properties":{"name":{"type":"string"}}}},"type":"object","properties":{"a":{"$ref":"#/$defs/p"}}}`,
			`{"a":{"name":"T"}}`},
		{`{"properties":{"x":{"type":"number"}}}`, `{"x":1}`},
		{`{"properties":{"i":{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991},"j":{"type":"number","maximum":-3}}}`, `{"i":1,"j":-3}`},
		// A schema that refers to itself ends at the depth bound.
		{`{"type":"object","properties":{"next":{"$ref":"#"}}}`, `{"next":{"next":{"next":{"next":{"next":null}}}}}`},
	} {
		var s any
		if err := json.Unmarshal([]byte(tc.schema), &s); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(schemaInstance(s, s, "T", 0))
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.schema, got, tc.want)
		}
	}
}

// TestStructuredOutput: a request for JSON of a schema, in each API's own field, is answered with an
// instance of it (streamed in pieces or not); one for any JSON object with a JSON object.
func TestStructuredOutput(t *testing.T) {
	_, ts, c := start(t, Options{Name: "m"})
	schema := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"},
		"days": map[string]any{"type": "integer"}}, "required": []string{"city", "days"}, "additionalProperties": false}
	msgs := []any{map[string]any{"role": "user", "content": "Paris"}}
	for _, tc := range []struct {
		name, path string
		body       map[string]any
		want       string
	}{
		{"chat json_schema", "/v1/chat/completions", map[string]any{"messages": msgs,
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "trip", "strict": true, "schema": schema}}},
			`{"city":"Paris","days":1}`},
		{"chat json_object", "/v1/chat/completions", map[string]any{"messages": msgs, "response_format": map[string]any{"type": "json_object"}},
			`{"text":"Hello from m"}`},
		{"responses text.format", "/v1/responses", map[string]any{"input": "Paris",
			"text": map[string]any{"format": map[string]any{"type": "json_schema", "name": "trip", "strict": true, "schema": schema}}},
			`{"city":"Paris","days":1}`},
		{"messages output_format", "/v1/messages", map[string]any{"messages": msgs, "max_tokens": 100,
			"output_format": map[string]any{"type": "json_schema", "schema": schema}}, `{"city":"Paris","days":1}`},
		{"messages output_config.format", "/v1/messages", map[string]any{"messages": msgs, "max_tokens": 100,
			"output_config": map[string]any{"effort": "low", "format": map[string]any{"type": "json_schema", "schema": schema}}}, `{"city":"Paris","days":1}`},
		{"chat text", "/v1/chat/completions", map[string]any{"messages": msgs, "response_format": map[string]any{"type": "text"}}, "Hello from m"},
	} {
		for _, stream := range []bool{false, true} {
			body := map[string]any{"model": "gpt-4o", "stream": stream}
			for k, v := range tc.body {
				body[k] = v
			}
			resp, data := mustDo(t, c, ts, reqOpts{path: tc.path, body: body})
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d %s", tc.name, resp.StatusCode, data)
			}
			text, pieces := answerOf(t, tc.path, stream, data)
			if text != tc.want || (stream && len(tc.want) > 12 && pieces < 2) {
				t.Errorf("%s, stream=%v: text %q in %d piece(s), want %q", tc.name, stream, text, pieces, tc.want)
			}
		}
	}
}

// answerOf is the text of an answer (chat, Responses or Messages), and how many pieces streamed it.
func answerOf(t *testing.T, path string, stream bool, data []byte) (string, int) {
	t.Helper()
	if !stream {
		var out struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
			Output []struct {
				Type    string `json:"type"`
				Content []struct{ Text string }
			} `json:"output"`
			Content []struct{ Type, Text string } `json:"content"`
		}
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%s: %s", path, data)
		}
		switch {
		case len(out.Choices) > 0:
			return out.Choices[0].Message.Content, 1
		case len(out.Output) > 0 && len(out.Output[0].Content) > 0:
			return out.Output[0].Content[0].Text, 1
		case len(out.Content) > 0:
			return out.Content[0].Text, 1
		}
		return "", 0
	}
	evs, err := readSSE(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	text, n := "", 0
	for _, ev := range evs {
		var m struct {
			Type    string `json:"type"`
			Delta   json.RawMessage
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
		}
		if ev.data == "[DONE]" || json.Unmarshal([]byte(ev.data), &m) != nil {
			continue
		}
		for _, ch := range m.Choices {
			if ch.Delta.Content != "" {
				text += ch.Delta.Content
				n++
			}
		}
		switch m.Type {
		case "response.output_text.delta":
			var d string
			_ = json.Unmarshal(m.Delta, &d)
			text += d
			n++
		case "content_block_delta":
			var d struct{ Text string }
			_ = json.Unmarshal(m.Delta, &d)
			text += d.Text
			n++
		}
	}
	return text, n
}

// TestToolChoice: a tool_choice that names a tool is obeyed, "none" is, and the call's arguments
// are an instance of the tool's parameters.
func TestToolChoice(t *testing.T) {
	_, ts, c := start(t, Options{Name: "m"})
	params := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"},
		"units": map[string]any{"enum": []string{"c", "f"}}}}
	chatTools := []any{
		map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "parameters": map[string]any{"type": "object"}}},
		map[string]any{"type": "function", "function": map[string]any{"name": "weather", "parameters": params}},
	}
	msgTools := []any{map[string]any{"name": "lookup", "input_schema": map[string]any{"type": "object"}},
		map[string]any{"name": "weather", "input_schema": params}}
	msgs := []any{map[string]any{"role": "user", "content": "Oslo"}}
	for _, tc := range []struct {
		name, path     string
		tools, choice  any
		call, wantArgs string
	}{
		{"chat, named", "/v1/chat/completions", chatTools, map[string]any{"type": "function", "function": map[string]any{"name": "weather"}},
			"weather", `{"city":"Oslo","units":"c"}`},
		{"chat, auto", "/v1/chat/completions", chatTools, "auto", "lookup", `{"query":"Oslo"}`},
		{"chat, none", "/v1/chat/completions", chatTools, "none", "", ""},
		{"messages, named", "/v1/messages", msgTools, map[string]any{"type": "tool", "name": "weather"}, "weather", `{"city":"Oslo","units":"c"}`},
		{"messages, none", "/v1/messages", msgTools, map[string]any{"type": "none"}, "", ""},
	} {
		resp, data := mustDo(t, c, ts, reqOpts{path: tc.path, body: map[string]any{"model": "gpt-4o", "max_tokens": 100, "messages": msgs,
			"tools": tc.tools, "tool_choice": tc.choice}})
		var out struct {
			Choices []struct {
				Message struct {
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
			Content []struct {
				Type, Name string
				Input      json.RawMessage
			} `json:"content"`
		}
		if err := json.Unmarshal(data, &out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tc.name, resp.StatusCode, data)
		}
		var name, args string
		for _, ch := range out.Choices {
			for _, call := range ch.Message.ToolCalls {
				name, args = call.Function.Name, call.Function.Arguments
			}
		}
		for _, b := range out.Content {
			if b.Type == "tool_use" {
				name, args = b.Name, string(b.Input)
			}
		}
		if name != tc.call || args != tc.wantArgs {
			t.Errorf("%s: called %q with %s, want %q with %s", tc.name, name, args, tc.call, tc.wantArgs)
		}
	}
}
