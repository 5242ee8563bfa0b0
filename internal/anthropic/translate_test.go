package anthropic

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestChatFieldsWithoutEquivalent: every OpenAI member Anthropic cannot express is a 400 naming
// it, and its no-op values pass.
func TestChatFieldsWithoutEquivalent(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct{ extra, field string }{
		{`"n":2`, "n"},
		{`"logprobs":true`, "logprobs"},
		{`"top_logprobs":3`, "top_logprobs"},
		{`"presence_penalty":0.5`, "presence_penalty"},
		{`"frequency_penalty":1`, "frequency_penalty"},
		{`"logit_bias":{"50256":-100}`, "logit_bias"},
		{`"seed":7`, "seed"},
		{`"audio":{"voice":"alloy"}`, "audio"},
		{`"modalities":["text","audio"]`, "modalities"},
		{`"functions":[{"name":"f"}]`, "functions"},
		{`"store":true`, "store"},
		{`"some_future_field":1`, "some_future_field"},
		{`"temperature":1.5`, "temperature"},
		{`"tools":[{"type":"web_search"}]`, "tools[0].type"},
		{`"tool_choice":"sometimes"`, "tool_choice"},
	} {
		_, err := MessagesFromChat([]byte(`{"model":"m",`+msgs+`,`+c.extra+`}`), Target{Model: "up"})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: error %v, want a FieldError naming %q", c.extra, err, c.field)
		}
	}
	for _, ok := range []string{`"n":1`, `"logprobs":false`, `"presence_penalty":0`, `"frequency_penalty":0`, `"store":false`, `"n":null`, `"service_tier":"auto"`, `"temperature":1`} {
		if _, err := MessagesFromChat([]byte(`{"model":"m",`+msgs+`,`+ok+`}`), Target{Model: "up"}); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, c := range []struct{ msgs, field string }{
		{`[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]`, "messages[0].content[0].type"},
		{`[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://example.com/a.png"}}]}]`, "messages[0].content[0].image_url.url"},
		{`[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:text/plain;base64,aGk="}}]}]`, "messages[0].content[0].image_url.url"},
		{`[{"role":"tool","content":"x"}]`, "messages[0].tool_call_id"},
		{`[{"role":"function","name":"f","content":"x"}]`, "messages[0].role"},
		{`[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]`, "messages[0].tool_calls[0].function.arguments"},
		{`[]`, "messages"},
	} {
		_, err := MessagesFromChat([]byte(`{"model":"m","messages":`+c.msgs+`}`), Target{Model: "up"})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: error %v, want a FieldError naming %q", c.msgs, err, c.field)
		}
	}
}

func TestMaxTokensDefault(t *testing.T) {
	for _, c := range []struct {
		body string
		def  int
		want int
	}{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 64000, 64000},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, 0, FallbackMaxTokens},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":10}`, 64000, 10},
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":20}`, 64000, 20},
	} {
		r, err := MessagesFromChat([]byte(c.body), Target{Model: "up", MaxTokens: c.def})
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			MaxTokens int `json:"max_tokens"`
		}
		_ = json.Unmarshal(r.Body, &got)
		if got.MaxTokens != c.want {
			t.Errorf("%s with default %d: max_tokens %d, want %d", c.body, c.def, got.MaxTokens, c.want)
		}
	}
}

func TestMessagesFieldsWithoutEquivalent(t *testing.T) {
	for _, c := range []struct{ extra, field string }{
		{`"top_k":5`, "top_k"},
		{`"thinking":{"type":"enabled","budget_tokens":1024}`, "thinking"},
		{`"tools":[{"type":"web_search_20250305","name":"web_search"}]`, "tools[0].type"},
		{`"messages":[{"role":"user","content":[{"type":"document","source":{}}]}]`, "messages[0].content[0].type"},
	} {
		body := `{"model":"m","max_tokens":5,` + c.extra
		if !strings.Contains(c.extra, `"messages"`) {
			body += `,"messages":[{"role":"user","content":"hi"}]`
		}
		_, err := ChatFromMessagesRequest([]byte(body+`}`), "up")
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: error %v, want a FieldError naming %q", c.extra, err, c.field)
		}
	}
}

func TestReasons(t *testing.T) {
	for stop, finish := range map[string]string{"end_turn": "stop", "max_tokens": "length", "tool_use": "tool_calls", "stop_sequence": "stop", "pause_turn": "stop", "refusal": "content_filter"} {
		if got := FinishReason(stop); got != finish {
			t.Errorf("FinishReason(%s) = %s, want %s", stop, got, finish)
		}
	}
	for finish, stop := range map[string]string{"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"} {
		if got := StopReason(finish); got != stop {
			t.Errorf("StopReason(%s) = %s, want %s", finish, got, stop)
		}
	}
}

// TestErrorShapes: each error class crosses between the two shapes with its meaning.
func TestErrorShapes(t *testing.T) {
	for _, c := range []struct {
		status       int
		body         string
		wantType     string
		wantCode     any
		wantContains string
	}{
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`, "invalid_request_error", "context_length_exceeded", "prompt is too long"},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: must be positive"}}`, "invalid_request_error", nil, "max_tokens"},
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`, "rate_limit_error", nil, "rate limit"},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded_error", nil, "Overloaded"},
		{500, `upstream connect error`, "api_error", nil, "upstream connect error"},
	} {
		var got struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    any    `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(OpenAIErrorFromMessages(c.status, []byte(c.body)), &got); err != nil {
			t.Fatal(err)
		}
		if got.Error.Type != c.wantType || got.Error.Code != c.wantCode || !strings.Contains(got.Error.Message, c.wantContains) {
			t.Errorf("%d %s: got %+v", c.status, c.body, got.Error)
		}
	}
	for status, typ := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error", 503: "api_error", 529: "overloaded_error"} {
		e, ok := ParseError(MessagesErrorFromOpenAI(status, []byte(`{"error":{"message":"boom","type":"x","code":null}}`)))
		if !ok || e.Type != typ || e.Message != "boom" {
			t.Errorf("%d: got %+v, want type %s", status, e, typ)
		}
	}
}

// TestChatStreamHoldsMessageStart: nothing reaches the client before the first content, so an
// upstream that fails after message_start can still be failed over.
func TestChatStreamHoldsMessageStart(t *testing.T) {
	s := NewChatStream(false, 1, nil)
	for _, ev := range []string{
		`{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":3}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"ping"}`,
	} {
		if out, err := s.Event([]byte(ev)); err != nil || len(out.Data) > 0 {
			t.Fatalf("%s: wrote %q (%v) before any content", ev, out.Data, err)
		}
	}
	out, _ := s.Event([]byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`))
	if n := strings.Count(string(out.Data), "data: "); n != 2 || !strings.Contains(string(out.Data), `"role":"assistant"`) {
		t.Errorf("first content: want the role chunk and the content chunk, got %q", out.Data)
	}
	if _, err := s.Event([]byte(`{not json`)); err == nil {
		t.Error("a malformed event is not reported")
	}
}

// TestMessageStreamEndWithoutDone: a stream that closes cleanly after its finish_reason, without
// [DONE] or usage, still ends with message_delta and message_stop, once.
func TestMessageStreamEndWithoutDone(t *testing.T) {
	s := NewMessageStream()
	_, _ = s.Event([]byte(`{"id":"c","model":"g","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`))
	out, _ := s.Event([]byte(`{"id":"c","model":"g","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`))
	if !out.Finished || strings.Contains(string(out.Data), "message_stop") {
		t.Fatalf("finish chunk: finished %v, data %q", out.Finished, out.Data)
	}
	end := string(s.End())
	if !strings.Contains(end, `"stop_reason":"max_tokens"`) || !strings.HasSuffix(end, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Errorf("End: %q", end)
	}
	if again := s.End(); again != nil {
		t.Errorf("second End: %q", again)
	}
}

func TestInspect(t *testing.T) {
	for _, c := range []struct {
		body          string
		vision, tools bool
		text          int
	}{
		{`{"tools":[{"name":"f","input_schema":{}}],"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x"}}]}]}`, true, true, 30},
		{`{"messages":[{"role":"user","content":"hello"}]}`, false, false, 5},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`, true, false, 2},
		{`{"messages":[{"role":"tool","tool_call_id":"c","content":"result"},{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}]}`, false, false, 8},
	} {
		n := Inspect([]byte(c.body))
		if n.Vision != c.vision || n.Tools != c.tools || n.TextBytes != c.text {
			t.Errorf("%s: %+v, want vision %v tools %v text %d", c.body, n, c.vision, c.tools, c.text)
		}
	}
}

// TestInspectResponses: a Responses API request's images, tools and text, in the input's string
// or items form, instructions included.
func TestInspectResponses(t *testing.T) {
	for _, c := range []struct {
		body          string
		vision, tools bool
		text          int
	}{
		{`{"input":"hello","instructions":"\"be brief\""}`, false, false, 5 + 14}, // instructions counted as the raw value, as system is
		{`{"input":[{"role":"user","content":[{"type":"input_text","text":"what is it?"},{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]}]}`, true, false, 11},
		{`{"tools":[{"type":"function","name":"f"}],"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"sunny"}]}`, false, true, 30 + 2 + 5},
		{`{"input":[{"type":"message","role":"user","content":"hi"}]}`, false, false, 2},
		{`{"model":"m"}`, false, false, 0},
	} {
		n := InspectResponses([]byte(c.body))
		if n.Vision != c.vision || n.Tools != c.tools || n.TextBytes != c.text {
			t.Errorf("%s: %+v, want vision %v tools %v text %d", c.body, n, c.vision, c.tools, c.text)
		}
	}
}

// TestStructuredOutputs: response_format's json_schema is the Messages API's output_config.format
// and back (strict, as Anthropic's constrained decoding is); text asks for nothing;
// output_config's effort has no equivalent and is named. json_object: structured_test.go.
func TestStructuredOutputs(t *testing.T) {
	const schema = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`
	r, err := MessagesFromChat([]byte(`{"model":"m","messages":[{"role":"user","content":"Paris"}],"response_format":{"type":"json_schema","json_schema":{"name":"trip","strict":true,"schema":`+schema+`}}}`), Target{Model: "up"})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		OutputConfig struct {
			Format struct {
				Type   string          `json:"type"`
				Schema json.RawMessage `json:"schema"`
			} `json:"format"`
		} `json:"output_config"`
	}
	if err := json.Unmarshal(r.Body, &got); err != nil || got.OutputConfig.Format.Type != "json_schema" || string(got.OutputConfig.Format.Schema) != schema {
		t.Errorf("chat json_schema: %s", r.Body)
	}
	if r, err := MessagesFromChat([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"text"}}`), Target{Model: "up"}); err != nil || strings.Contains(string(r.Body), "output_config") {
		t.Errorf("chat text: %v %s", err, r.Body)
	}
	for _, c := range []struct{ rf, field string }{
		{`{"type":"json_schema","json_schema":{"name":"x"}}`, "response_format.json_schema.schema"},
		{`{"type":"yaml"}`, "response_format.type"},
	} {
		_, err := MessagesFromChat([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":`+c.rf+`}`), Target{Model: "up"})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v, want a FieldError naming %q", c.rf, err, c.field)
		}
	}

	for _, field := range []string{`"output_config":{"format":{"type":"json_schema","schema":` + schema + `}}`, `"output_format":{"type":"json_schema","schema":` + schema + `}`} {
		body, err := ChatFromMessagesRequest([]byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Paris"}],`+field+`}`), "up")
		if err != nil {
			t.Fatal(err)
		}
		var chat struct {
			ResponseFormat struct {
				Type       string `json:"type"`
				JSONSchema struct {
					Name   string          `json:"name"`
					Strict bool            `json:"strict"`
					Schema json.RawMessage `json:"schema"`
				} `json:"json_schema"`
			} `json:"response_format"`
		}
		if err := json.Unmarshal(body, &chat); err != nil || chat.ResponseFormat.Type != "json_schema" || !chat.ResponseFormat.JSONSchema.Strict ||
			chat.ResponseFormat.JSONSchema.Name == "" || string(chat.ResponseFormat.JSONSchema.Schema) != schema {
			t.Errorf("%s: %s", field, body)
		}
	}
	_, err = ChatFromMessagesRequest([]byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"output_config":{"effort":"high"}}`), "up")
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "output_config.effort" {
		t.Errorf("output_config.effort: %v, want a FieldError naming it", err)
	}
}
