package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestGoldenResponsesRequest(t *testing.T) {
	eachCase(t, "responses_request", ".json", func(t *testing.T, in []byte) []byte {
		r, err := MessagesFromResponses(in, Target{Provider: "anthropic", Model: "claude-sonnet-4-5-20250929", MaxTokens: 1024})
		if err != nil {
			t.Fatal(err)
		}
		meta := mustJSON(map[string]any{"stream": r.Stream, "echo": r.Echo})
		return append(pretty(t, meta), pretty(t, r.Body)...)
	})
}

// TestResponsesFieldsWithoutEquivalent: every Responses member a Messages channel cannot serve is
// a 400 naming it, and the no-ops pass.
func TestResponsesFieldsWithoutEquivalent(t *testing.T) {
	const input = `"input":"hi"`
	for _, c := range []struct{ extra, field string }{
		{`"previous_response_id":"resp_1"`, "previous_response_id"},
		{`"conversation":"conv_1"`, "conversation"},
		{`"background":true`, "background"},
		{`"prompt":{"id":"pmpt_1"}`, "prompt"},
		{`"include":["message.output_text.logprobs"]`, "include"},
		{`"truncation":"auto"`, "truncation"},
		{`"reasoning":{"effort":"high"}`, "reasoning"},
		{`"metadata":{"k":"v"}`, "metadata"},
		{`"max_tool_calls":3`, "max_tool_calls"},
		{`"top_logprobs":2`, "top_logprobs"},
		{`"safety_identifier":"s"`, "safety_identifier"},
		{`"some_future_field":1`, "some_future_field"},
		{`"temperature":1.5`, "temperature"},
		{`"max_output_tokens":0`, "max_output_tokens"},
		{`"tools":[{"type":"web_search"}]`, "tools[0].type"},
		{`"tools":[{"type":"file_search","vector_store_ids":["vs"]}]`, "tools[0].type"},
		{`"tool_choice":{"type":"web_search_preview"}`, "tool_choice"},
		{`"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]}`, "tool_choice"},
		{`"text":{"format":{"type":"json_schema","name":"x"}}`, "text.format.schema"},
		{`"text":{"verbosity":"low"}`, "text.verbosity"},
	} {
		_, err := MessagesFromResponses([]byte(`{"model":"m",`+input+`,`+c.extra+`}`), Target{Model: "up"})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: error %v, want a FieldError naming %q", c.extra, err, c.field)
		}
	}
	for _, ok := range []string{`"store":false`, `"store":true`, `"include":[]`, `"truncation":"disabled"`, `"service_tier":"auto"`,
		`"metadata":{}`, `"reasoning":{}`, `"previous_response_id":null`, `"text":{}`, `"text":{"format":{"type":"text"},"verbosity":null}`,
		`"top_logprobs":0`, `"temperature":1`, `"tool_choice":"required"`, `"top_k":5`} {
		if _, err := MessagesFromResponses([]byte(`{"model":"m",`+input+`,`+ok+`}`), Target{Model: "up"}); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, c := range []struct{ input, field string }{
		{`[{"type":"item_reference","id":"msg_1"}]`, "input[0].type"},
		{`[{"type":"reasoning","id":"rs_1","summary":[]}]`, "input[0].type"},
		{`[{"type":"web_search_call","id":"ws_1"}]`, "input[0].type"},
		{`[{"role":"user","content":[{"type":"input_file","file_id":"file_1"}]}]`, "input[0].content[0].type"},
		{`[{"role":"user","content":[{"type":"input_image","file_id":"file_1"}]}]`, "input[0].content[0].image_url"},
		{`[{"role":"user","content":[{"type":"input_image","image_url":"http://example.com/a.png"}]}]`, "input[0].content[0].image_url"},
		{`[{"role":"assistant","content":[{"type":"input_image","image_url":"https://example.com/a.png"}]}]`, "input[0].content[0].type"},
		{`[{"role":"tool","content":"x"}]`, "input[0].role"},
		{`[{"type":"function_call","name":"f","arguments":"{}"}]`, "input[0].call_id"},
		{`[{"type":"function_call","call_id":"c","name":"f","arguments":"[1]"}]`, "input[0].arguments"},
		{`[{"type":"function_call_output","output":"x"}]`, "input[0].call_id"},
		{`[{"content":"no role, no type"}]`, "input[0].type"},
		{`[{"role":"system","content":"only a system message"}]`, "input"},
		{`[]`, "input"},
		{`42`, "input"},
	} {
		_, err := MessagesFromResponses([]byte(`{"model":"m","input":`+c.input+`}`), Target{Model: "up"})
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: error %v, want a FieldError naming %q", c.input, err, c.field)
		}
	}
	if _, err := MessagesFromResponses([]byte(`{"model":"m"}`), Target{Model: "up"}); err == nil || !strings.HasPrefix(err.Error(), "input:") {
		t.Errorf("no input: error %v, want one naming input", err)
	}
}

func TestResponsesMaxTokensDefault(t *testing.T) {
	for _, c := range []struct {
		body      string
		def, want int
	}{
		{`{"model":"m","input":"hi"}`, 64000, 64000},
		{`{"model":"m","input":"hi"}`, 0, FallbackMaxTokens},
		{`{"model":"m","input":"hi","max_output_tokens":10}`, 64000, 10},
	} {
		r, err := MessagesFromResponses([]byte(c.body), Target{Model: "up", MaxTokens: c.def})
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

var testEcho = ResponsesEcho{"tool_choice": "auto", "tools": []any{}, "parallel_tool_calls": true}

func TestGoldenResponsesAnswer(t *testing.T) {
	eachCaseAs(t, "message_response", ".json", ".responses", func(t *testing.T, in []byte) []byte {
		out, u, err := ResponsesFromMessage(in, testEcho, 1700000000, nil)
		if err != nil {
			t.Fatal(err)
		}
		if u == nil || u.Prompt == 0 || u.Completion == 0 {
			t.Errorf("usage not read: %+v", u)
		}
		return pretty(t, out)
	})
}

func TestGoldenResponsesStream(t *testing.T) {
	eachCaseAs(t, "message_stream", ".sse", ".responses", func(t *testing.T, in []byte) []byte {
		s := NewResponsesStream(testEcho, 1700000000, nil)
		var out []byte
		var usage *Usage
		finished := false
		for _, d := range sseData(in) {
			o, err := s.Event(d)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, o.Data...)
			finished = finished || o.Finished
			if o.Usage != nil {
				usage = o.Usage
			}
		}
		if !finished || usage == nil || usage.Completion == 0 {
			t.Errorf("the stream never finished with its usage: finished %v, usage %+v", finished, usage)
		}
		return out
	})
}

// responsesEvents is a translated stream's events: their event-line types, data and the sequence
// numbers, checked against each other.
func responsesEvents(t *testing.T, out []byte) (types []string, data []map[string]any) {
	t.Helper()
	for _, ev := range bytes.Split(bytes.TrimSuffix(out, []byte("\n\n")), []byte("\n\n")) {
		typ, d, ok := bytes.Cut(ev, []byte("\ndata: "))
		if !ok || !bytes.HasPrefix(typ, []byte("event: ")) {
			t.Fatalf("not an event line and a data line: %q", ev)
		}
		var m map[string]any
		if err := json.Unmarshal(d, &m); err != nil {
			t.Fatalf("data not JSON: %v: %s", err, d)
		}
		name := string(typ[len("event: "):])
		if m["type"] != name {
			t.Errorf("event %s carries type %v", name, m["type"])
		}
		if m["sequence_number"] != float64(len(types)) {
			t.Errorf("event %d (%s): sequence_number %v", len(types), name, m["sequence_number"])
		}
		types, data = append(types, name), append(data, m)
	}
	return types, data
}

// TestResponsesStreamOrder: text then a tool call come out as the SDKs accumulate them: every
// item added before its deltas, the deltas adding up to the done events, the completed response
// holding the items as they were done; nothing before the first content.
func TestResponsesStreamOrder(t *testing.T) {
	events := []string{
		`{"type":"message_start","message":{"id":"msg_01","model":"claude-x","usage":{"input_tokens":12,"cache_read_input_tokens":3,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"ping"}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hel"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"lo \"<you>\""}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_7","name":"lookup","input":{}}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"query\":"}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"cats\"}"}}`,
		`{"type":"content_block_stop","index":2}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`,
		`{"type":"message_stop"}`,
	}
	s := NewResponsesStream(ResponsesEcho{"instructions": "be brief"}, 1700000000, nil)
	var out []byte
	var usage *Usage
	for i, e := range events {
		o, err := s.Event([]byte(e))
		if err != nil {
			t.Fatal(err)
		}
		if i < 6 && len(o.Data) > 0 {
			t.Errorf("event %d sent %s before any content", i, o.Data)
		}
		if o.Usage != nil {
			usage = o.Usage
		}
		if o.Finished != (i >= len(events)-2) {
			t.Errorf("event %d: finished %v", i, o.Finished)
		}
		out = append(out, o.Data...)
	}
	if usage == nil || *usage != (Usage{Prompt: 15, Completion: 9}) {
		t.Errorf("usage %+v, want 15 prompt and 9 completion tokens", usage)
	}
	types, data := responsesEvents(t, out)
	want := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done",
		"response.completed",
	}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(types, "\n"), strings.Join(want, "\n"))
	}
	msgID := data[2]["item"].(map[string]any)["id"]
	for _, i := range []int{3, 4, 5, 6, 7} {
		if data[i]["item_id"] != msgID || data[i]["output_index"] != 0.0 {
			t.Errorf("%s: item_id %v output_index %v, want %v at 0", types[i], data[i]["item_id"], data[i]["output_index"], msgID)
		}
	}
	if text := data[6]["text"]; text != data[4]["delta"].(string)+data[5]["delta"].(string) || text != `Hello "<you>"` {
		t.Errorf("output_text.done %q, deltas %q %q", text, data[4]["delta"], data[5]["delta"])
	}
	call := data[9]["item"].(map[string]any)
	if call["call_id"] != "toolu_7" || call["name"] != "lookup" || call["arguments"] != "" || data[9]["output_index"] != 1.0 {
		t.Errorf("function_call added: %v at %v", call, data[9]["output_index"])
	}
	if args := data[12]["arguments"]; args != `{"query":"cats"}` || data[12]["item_id"] != call["id"] {
		t.Errorf("function_call_arguments.done %v for %v", args, data[12]["item_id"])
	}
	resp := data[14]["response"].(map[string]any)
	if resp["status"] != "completed" || resp["id"] != data[0]["response"].(map[string]any)["id"] || resp["instructions"] != "be brief" {
		t.Errorf("completed response: %v", resp)
	}
	output := resp["output"].([]any)
	if len(output) != 2 || output[0].(map[string]any)["id"] != msgID || output[1].(map[string]any)["call_id"] != "toolu_7" ||
		output[1].(map[string]any)["arguments"] != `{"query":"cats"}` {
		t.Errorf("completed output: %v", output)
	}
	u := resp["usage"].(map[string]any)
	if u["input_tokens"] != 15.0 || u["output_tokens"] != 9.0 || u["total_tokens"] != 24.0 ||
		u["input_tokens_details"].(map[string]any)["cached_tokens"] != 3.0 {
		t.Errorf("usage: %v", u)
	}
}

// TestResponsesStreamIncomplete: an answer cut at max_tokens ends with response.incomplete, its
// open items done first; a tool without input has "{}" for arguments, in a delta too.
func TestResponsesStreamIncomplete(t *testing.T) {
	s := NewResponsesStream(nil, 1, nil)
	var out []byte
	for _, e := range []string{
		`{"type":"message_start","message":{"id":"msg_02","model":"claude-x","usage":{"input_tokens":5}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"now","input":{}}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"It is"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":4}}`,
	} {
		o, err := s.Event([]byte(e))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Data...)
	}
	types, data := responsesEvents(t, out)
	want := "response.created response.in_progress response.output_item.added response.function_call_arguments.delta " +
		"response.function_call_arguments.done response.output_item.done response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.incomplete"
	if strings.Join(types, " ") != want {
		t.Fatalf("events: %s", strings.Join(types, " "))
	}
	if data[3]["delta"] != "{}" || data[4]["arguments"] != "{}" {
		t.Errorf("arguments of a tool without input: delta %v, done %v", data[3]["delta"], data[4]["arguments"])
	}
	resp := data[12]["response"].(map[string]any)
	if resp["status"] != "incomplete" || resp["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" || len(resp["output"].([]any)) != 2 {
		t.Errorf("incomplete response: %v", resp)
	}
}

// TestResponsesAnswerIncomplete: max_tokens makes an incomplete response, as OpenAI's.
func TestResponsesAnswerIncomplete(t *testing.T) {
	out, _, err := ResponsesFromMessage([]byte(`{"id":"msg_3","model":"claude-x","content":[{"type":"text","text":"It"}],"stop_reason":"max_tokens","usage":{"input_tokens":3,"output_tokens":1}}`), nil, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Status            string `json:"status"`
		IncompleteDetails struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Status != "incomplete" || r.IncompleteDetails.Reason != "max_output_tokens" {
		t.Errorf("%s: %v", out, err)
	}
}

// TestResponsesStreamWithoutStopReason: a stream that reaches message_stop without a
// message_delta's stop_reason still completes the response (once), with its text.
func TestResponsesStreamWithoutStopReason(t *testing.T) {
	s := NewResponsesStream(nil, 1, nil)
	var out []byte
	finished := false
	for _, e := range []string{
		`{"type":"message_start","message":{"id":"msg_03","model":"claude-x","usage":{"input_tokens":5}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
		`{"type":"message_stop"}`,
	} {
		o, err := s.Event([]byte(e))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Data...)
		finished = o.Finished
	}
	types, data := responsesEvents(t, out)
	if !finished || len(types) == 0 || types[len(types)-1] != "response.completed" || strings.Count(strings.Join(types, " "), "response.completed") != 1 {
		t.Fatalf("finished %v, events: %s", finished, strings.Join(types, " "))
	}
	resp := data[len(data)-1]["response"].(map[string]any)
	if resp["status"] != "completed" || len(resp["output"].([]any)) != 1 {
		t.Errorf("response: %v", resp)
	}
}
