package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestNativeFormat: which targets get output_config.format for a json_schema, by the SDKs' tables.
func TestNativeFormat(t *testing.T) {
	for _, c := range []struct {
		provider, model  string
		native, noForced bool
	}{
		{"anthropic", "claude-sonnet-4-5-20250929", true, false},
		{"anthropic", "claude-opus-4-1-20250805", true, false},
		{"anthropic", "claude-sonnet-4-20250514", false, false},
		{"anthropic", "claude-opus-4-0", false, false},
		{"anthropic", "claude-3-7-sonnet-latest", false, false},
		{"anthropic", "claude-3-5-haiku-20241022", false, false},
		{"anthropic", "claude-2.1", false, false},
		{"anthropic", "claude-instant-1.2", false, false},
		{"anthropic", "claude-sonnet-5-5", true, true},
		{"anthropic", "claude-haiku-4-5", true, false},
		{"anthropic", "up", true, false}, // an alias or a newer model: taken to serve it
		{"bedrock", "anthropic.claude-sonnet-4-5-20250929-v1:0", true, false},
		{"bedrock", "us.anthropic.claude-haiku-4-5-20251001-v1:0", false, false},
		{"bedrock", "anthropic.claude-sonnet-4-6", false, false},
		{"bedrock", "anthropic.claude-3-5-sonnet-20240620-v1:0", false, false},
		{"bedrock", "anthropic.claude-sonnet-5-5-v1:0", true, true}, // refuses a forced tool: native wherever
		{"vertex", "claude-sonnet-4-5@20250929", false, false},
		{"vertex", "claude-opus-5-5", true, true},
	} {
		native, noForced := nativeFormat(Target{Provider: c.provider, Model: c.model})
		if native != c.native || noForced != c.noForced {
			t.Errorf("%s %s: native %v, refuses a forced tool %v; want %v, %v", c.provider, c.model, native, noForced, c.native, c.noForced)
		}
	}
}

const tripSchema = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1}},"required":["city","days"],"additionalProperties":false}`

type messagesBody struct {
	OutputConfig *struct {
		Format struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
	Tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	ToolChoice map[string]any `json:"tool_choice"`
}

// TestStructuredRequests: both APIs' formats, by target: output_config.format where it is
// served, else the forced format tool; what cannot be served is a 400 naming the field.
func TestStructuredRequests(t *testing.T) {
	sonnet45 := Target{Provider: "anthropic", Model: "claude-sonnet-4-5-20250929"}
	sonnet4 := Target{Provider: "anthropic", Model: "claude-sonnet-4-20250514"}
	vertex := Target{Provider: "vertex", Model: "claude-sonnet-4-5@20250929"}
	chatSchema := `{"type":"json_schema","json_schema":{"name":"trip","strict":true,"schema":` + tripSchema + `}}`
	respSchema := `{"format":{"type":"json_schema","name":"trip","strict":true,"schema":` + tripSchema + `}}`
	lookup := `[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]`
	respLookup := `[{"type":"function","name":"lookup","parameters":{"type":"object"}}]`
	for _, c := range []struct {
		name   string
		api    string // chat or responses
		extra  string // members after model and messages/input
		target Target
		// want: "native", "tool" (with the tool's schema toolSchema), or the field a
		// FieldError names.
		want, toolSchema string
		strict           bool
	}{
		{"chat json_schema, Claude 4.5", "chat", `"response_format":` + chatSchema, sonnet45, "native", "", true},
		{"chat json_schema, Claude 4", "chat", `"response_format":` + chatSchema, sonnet4, "tool", tripSchema, true},
		{"chat json_schema, Vertex", "chat", `"response_format":` + chatSchema, vertex, "tool", tripSchema, true},
		{"chat json_object", "chat", `"response_format":{"type":"json_object"}`, sonnet45, "tool", `{"type":"object"}`, false},
		{"chat json_object, tool_choice none", "chat", `"response_format":{"type":"json_object"},"tools":` + lookup + `,"tool_choice":"none"`, sonnet45, "tool", `{"type":"object"}`, false},
		{"chat json_schema with tools, native", "chat", `"response_format":` + chatSchema + `,"tools":` + lookup, sonnet45, "native", "", true},
		{"chat json_object with tools", "chat", `"response_format":{"type":"json_object"},"tools":` + lookup, sonnet45, "response_format", "", false},
		{"chat json_object with thinking", "chat", `"response_format":{"type":"json_object"},"thinking":{"type":"enabled","budget_tokens":1024}`, sonnet45, "response_format", "", false},
		{"chat json_object, a model refusing forced tools", "chat", `"response_format":{"type":"json_object"}`, Target{Provider: "anthropic", Model: "claude-opus-5-5"}, "response_format", "", false},
		{"chat array schema as a tool", "chat", `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"array"}}}`, vertex, "response_format.json_schema.schema", "", false},
		{"chat strict, not a schema", "chat", `"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"objekt"}}}`, sonnet45, "response_format.json_schema.schema", "", false},
		{"chat tool named as the format tool", "chat", `"tools":[{"type":"function","function":{"name":"` + FormatTool + `"}}]`, sonnet45, "tools[0].function.name", "", false},
		{"responses json_schema, Claude 4.5", "responses", `"text":` + respSchema, sonnet45, "native", "", true},
		{"responses json_schema, Bedrock Haiku 4.5", "responses", `"text":` + respSchema, Target{Provider: "bedrock", Model: "anthropic.claude-haiku-4-5-20251001-v1:0"}, "tool", tripSchema, true},
		{"responses json_object", "responses", `"text":{"format":{"type":"json_object"}}`, vertex, "tool", `{"type":"object"}`, false},
		{"responses json_object with tools", "responses", `"text":{"format":{"type":"json_object"}},"tools":` + respLookup, sonnet45, "text.format", "", false},
		{"responses strict, not a schema", "responses", `"text":{"format":{"type":"json_schema","name":"x","strict":true,"schema":{"required":"city"}}}`, sonnet45, "text.format.schema", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var body []byte
			var out *Output
			var err error
			if c.api == "chat" {
				var r *ChatRequest
				if r, err = MessagesFromChat([]byte(`{"model":"m","messages":[{"role":"user","content":"Paris"}],`+c.extra+`}`), c.target); err == nil {
					body, out = r.Body, r.Output
				}
			} else {
				var r *ResponsesRequest
				if r, err = MessagesFromResponses([]byte(`{"model":"m","input":"Paris",`+c.extra+`}`), c.target); err == nil {
					body, out = r.Body, r.Output
				}
			}
			if c.want != "native" && c.want != "tool" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != c.want {
					t.Fatalf("error %v, want a FieldError naming %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got messagesBody
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if out.Strict() != c.strict {
				t.Errorf("strict %v, want %v", out.Strict(), c.strict)
			}
			switch c.want {
			case "native":
				if out.Tool || got.OutputConfig == nil || string(got.OutputConfig.Format.Schema) != tripSchema {
					t.Errorf("want output_config.format with the schema: %s", body)
				}
			case "tool":
				last := len(got.Tools) - 1
				if !out.Tool || got.OutputConfig != nil || last < 0 || got.Tools[last].Name != FormatTool || string(got.Tools[last].InputSchema) != c.toolSchema {
					t.Fatalf("want the format tool with %s: %s", c.toolSchema, body)
				}
				if got.ToolChoice["type"] != "tool" || got.ToolChoice["name"] != FormatTool || got.ToolChoice["disable_parallel_tool_use"] != true {
					t.Errorf("tool_choice %v, want the format tool, alone", got.ToolChoice)
				}
			}
		})
	}
}

// strictOutput is the Output of a strict trip schema, as the target decides.
func strictOutput(t *testing.T, target Target) *Output {
	t.Helper()
	r, err := MessagesFromChat([]byte(`{"model":"m","messages":[{"role":"user","content":"Paris"}],"response_format":{"type":"json_schema","json_schema":{"name":"trip","strict":true,"schema":`+tripSchema+`}}}`), target)
	if err != nil {
		t.Fatal(err)
	}
	return r.Output
}

var (
	toolTarget   = Target{Provider: "vertex", Model: "claude-sonnet-4-5@20250929"}
	nativeTarget = Target{Provider: "anthropic", Model: "claude-sonnet-4-5-20250929"}
)

// formatAnswer is a Messages answer of the format tool with input, stopped for stop.
func formatAnswer(input, stop string) []byte {
	return []byte(`{"id":"msg_1","model":"claude-x","content":[{"type":"tool_use","id":"toolu_1","name":"` + FormatTool +
		`","input":` + input + `}],"stop_reason":"` + stop + `","usage":{"input_tokens":3,"output_tokens":5}}`)
}

func textAnswer(text, stop string) []byte {
	return []byte(`{"id":"msg_1","model":"claude-x","content":[{"type":"text","text":` + string(mustJSON(text)) +
		`}],"stop_reason":"` + stop + `","usage":{"input_tokens":3,"output_tokens":5}}`)
}

// TestStructuredAnswers: the format tool's input is the answer's text (chat content, a Responses
// output_text), finished as a stop; a strict answer that violates the schema is a
// *SchemaViolation naming the first failing path; a cut answer is not validated.
func TestStructuredAnswers(t *testing.T) {
	tool, native := strictOutput(t, toolTarget), strictOutput(t, nativeTarget)
	for _, c := range []struct {
		name   string
		out    *Output
		answer []byte
		// text and finish are the chat answer's; path the violation's ("-" for none).
		text, finish, path string
	}{
		{"tool", tool, formatAnswer(`{"city":"Paris","days":2}`, "tool_use"), `{"city":"Paris","days":2}`, "stop", "-"},
		{"tool, a wrong type", tool, formatAnswer(`{"city":"Paris","days":"two"}`, "tool_use"), "", "", "/days"},
		{"tool, a missing member", tool, formatAnswer(`{"city":"Paris"}`, "tool_use"), "", "", ""},
		{"tool, cut", tool, formatAnswer(`{"city":"Pa"}`, "max_tokens"), `{"city":"Pa"}`, "length", "-"},
		{"native", native, textAnswer(`{"city":"Paris","days":1}`, "end_turn"), `{"city":"Paris","days":1}`, "stop", "-"},
		{"native, below the minimum", native, textAnswer(`{"city":"Paris","days":0}`, "end_turn"), "", "", "/days"},
		{"native, not JSON", native, textAnswer(`Paris, 1 day`, "end_turn"), "", "", ""},
		{"native, cut", native, textAnswer(`{"city":`, "max_tokens"), `{"city":`, "length", "-"},
		{"not strict", &Output{Tool: true}, formatAnswer(`{"anything":true}`, "tool_use"), `{"anything":true}`, "stop", "-"},
		{"tool, a preamble left out", tool, bytes.Replace(formatAnswer(`{"city":"Paris","days":2}`, "tool_use"), []byte(`"content":[`),
			[]byte(`"content":[{"type":"text","text":"Here: "},`), 1), `{"city":"Paris","days":2}`, "stop", "-"},
		{"tool forced, text alone", tool, textAnswer(`{"city":"Paris","days":2}`, "end_turn"), `{"city":"Paris","days":2}`, "stop", "-"},
	} {
		t.Run(c.name, func(t *testing.T) {
			chat, _, chatErr := ChatFromMessage(c.answer, 1, c.out)
			resp, _, respErr := ResponsesFromMessage(c.answer, nil, 1, c.out)
			if c.path != "-" {
				for _, err := range []error{chatErr, respErr} {
					var v *SchemaViolation
					if !errors.As(err, &v) || v.Path != c.path {
						t.Errorf("error %v, want a schema violation at %q", err, c.path)
					}
				}
				return
			}
			if chatErr != nil || respErr != nil {
				t.Fatal(chatErr, respErr)
			}
			var cc struct {
				Choices []struct {
					Message struct {
						Content   string `json:"content"`
						ToolCalls []any  `json:"tool_calls"`
					} `json:"message"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(chat, &cc); err != nil || cc.Choices[0].Message.Content != c.text ||
				cc.Choices[0].FinishReason != c.finish || cc.Choices[0].Message.ToolCalls != nil {
				t.Errorf("chat: %s, want content %s finished %s", chat, c.text, c.finish)
			}
			var rr struct {
				Output []struct {
					Type    string `json:"type"`
					Content []struct {
						Type string `json:"type"`
						Text string `json:"text"`
					} `json:"content"`
				} `json:"output"`
			}
			if err := json.Unmarshal(resp, &rr); err != nil || len(rr.Output) != 1 || rr.Output[0].Type != "message" ||
				rr.Output[0].Content[0].Type != "output_text" || rr.Output[0].Content[0].Text != c.text {
				t.Errorf("responses: %s, want one message of %s", resp, c.text)
			}
		})
	}
	// The violation is OpenAI's error shape, its code schema_violation.
	_, _, err := ChatFromMessage(formatAnswer(`{"city":"Paris","days":"two"}`, "tool_use"), 1, tool)
	var v *SchemaViolation
	if !errors.As(err, &v) {
		t.Fatal(err)
	}
	var e struct {
		Error struct {
			Message, Type, Code string
		} `json:"error"`
	}
	if json.Unmarshal(v.OpenAIError(), &e) != nil || e.Error.Code != "schema_violation" || !strings.Contains(e.Error.Message, "/days") {
		t.Errorf("error body %s", v.OpenAIError())
	}
}

// formatStream is the Messages stream of the format tool's input, in pieces, stopped for stop.
func formatStream(stop string, pieces ...string) []string {
	evs := []string{
		`{"type":"message_start","message":{"id":"msg_1","model":"claude-x","usage":{"input_tokens":3,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"` + FormatTool + `","input":{}}}`,
	}
	for _, p := range pieces {
		evs = append(evs, `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`+string(mustJSON(p))+`}}`)
	}
	return append(evs, `{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"`+stop+`"},"usage":{"output_tokens":5}}`, `{"type":"message_stop"}`)
}

// withPreamble is a stream with text before its first content block's: a model's preamble to a
// forced tool (block 0, the tool's blocks after it), or, with no tool after it, the answer.
func withPreamble(events []string, text string) []string {
	shifted := make([]string, 0, len(events)+3)
	shifted = append(shifted, events[0],
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(mustJSON(text))+`}}`,
		`{"type":"content_block_stop","index":0}`)
	for _, ev := range events[1:] {
		shifted = append(shifted, strings.Replace(ev, `"index":0`, `"index":1`, 1))
	}
	return shifted
}

// textStream is a Messages stream of one text block.
func textStream(text string) []string {
	return []string{
		`{"type":"message_start","message":{"id":"msg_1","model":"claude-x","usage":{"input_tokens":3,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":` + string(mustJSON(text)) + `}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}`, `{"type":"message_stop"}`,
	}
}

// TestStructuredChatStream: the format tool's input_json deltas stream as content, finished as a
// stop; a strict violation takes the finish chunk's place as an in-band error, and no [DONE].
// Text before the forced tool is left out; text without it is the answer.
func TestStructuredChatStream(t *testing.T) {
	tool := strictOutput(t, toolTarget)
	for _, c := range []struct {
		name      string
		events    []string
		text      string
		violation bool
	}{
		{"valid", formatStream("tool_use", `{"city":`, `"Par`, `is","days":3}`), `{"city":"Paris","days":3}`, false},
		{"violation", formatStream("tool_use", `{"city":"Paris",`, `"days":-1}`), `{"city":"Paris","days":-1}`, true},
		{"cut, not validated", formatStream("max_tokens", `{"city":"Pa`), `{"city":"Pa`, false},
		{"a preamble", withPreamble(formatStream("tool_use", `{"city":"Paris","days":3}`), "Here it is: "), `{"city":"Paris","days":3}`, false},
		{"no tool", textStream(`{"city":"Paris","days":4}`), `{"city":"Paris","days":4}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewChatStream(true, 1, tool)
			var all []byte
			finished := false
			for _, ev := range c.events {
				out, err := s.Event([]byte(ev))
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, out.Data...)
				finished = finished || out.Finished
			}
			if !finished {
				t.Error("the stream never finished")
			}
			var text strings.Builder
			var finish, code string
			for _, d := range sseData(all) {
				var ch struct {
					Choices []struct {
						Delta struct {
							Content   string `json:"content"`
							ToolCalls []any  `json:"tool_calls"`
						} `json:"delta"`
						FinishReason string `json:"finish_reason"`
					} `json:"choices"`
					Error *struct {
						Code string `json:"code"`
					} `json:"error"`
				}
				if err := json.Unmarshal(d, &ch); err != nil {
					t.Fatalf("%s: %v", d, err)
				}
				if ch.Error != nil {
					code = ch.Error.Code
				}
				for _, choice := range ch.Choices {
					if choice.Delta.ToolCalls != nil {
						t.Errorf("the format tool went out as a tool call: %s", d)
					}
					text.WriteString(choice.Delta.Content)
					if choice.FinishReason != "" {
						finish = choice.FinishReason
					}
				}
			}
			if text.String() != c.text {
				t.Errorf("content %q, want %q", text.String(), c.text)
			}
			switch {
			case c.violation && (code != "schema_violation" || finish != "" || s.End() != nil):
				t.Errorf("violation: code %q, finish %q, end %q; want schema_violation, no finish, no [DONE]", code, finish, s.End())
			case !c.violation && (code != "" || finish == "" || !bytes.Equal(s.End(), []byte("data: [DONE]\n\n"))):
				t.Errorf("code %q, finish %q, end %q", code, finish, s.End())
			case !c.violation && c.name == "valid" && finish != "stop":
				t.Errorf("finish %q, want stop", finish)
			}
		})
	}
}

// TestStructuredResponsesStream: the format tool streams as a message item of output_text
// deltas; a strict violation takes response.completed's place as an error event.
func TestStructuredResponsesStream(t *testing.T) {
	tool := strictOutput(t, toolTarget)
	for _, c := range []struct {
		name      string
		events    []string
		last      string
		violation bool
	}{
		{"valid", formatStream("tool_use", `{"city":`, `"Paris","days":3}`), "response.completed", false},
		{"violation", formatStream("tool_use", `{"city":7,"days":3}`), "error", true},
		{"a preamble", withPreamble(formatStream("tool_use", `{"city":`, `"Paris","days":3}`), "Sure: "), "response.completed", false},
		{"no tool", textStream(`{"city":"Paris","days":3}`), "response.completed", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewResponsesStream(nil, 1, tool)
			var all []byte
			for _, ev := range c.events {
				out, err := s.Event([]byte(ev))
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, out.Data...)
			}
			types, data := responsesEvents(t, all)
			if got := types[len(types)-1]; got != c.last {
				t.Fatalf("last event %s, want %s: %v", got, c.last, types)
			}
			var deltas strings.Builder
			for i, typ := range types {
				switch typ {
				case "response.function_call_arguments.delta", "response.function_call_arguments.done":
					t.Errorf("the format tool went out as a function call: %v", data[i])
				case "response.output_text.delta":
					deltas.WriteString(data[i]["delta"].(string))
				case "response.output_item.added":
					if item := data[i]["item"].(map[string]any); item["type"] != "message" {
						t.Errorf("item %v, want a message", item)
					}
				}
			}
			last := data[len(data)-1]
			if c.violation {
				if last["code"] != "schema_violation" || !strings.Contains(last["message"].(string), "/city") {
					t.Errorf("error event %v", last)
				}
				return
			}
			if deltas.String() != `{"city":"Paris","days":3}` {
				t.Errorf("deltas %q", deltas.String())
			}
			output := last["response"].(map[string]any)["output"].([]any)
			text := output[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]
			if len(output) != 1 || text != deltas.String() {
				t.Errorf("completed output %v", output)
			}
		})
	}
}
