package piimask

import (
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/pii"
	"github.com/switchyard-io/switchyard/internal/proxy/sse"
)

func emailSession(t *testing.T) *pii.Session {
	t.Helper()
	sc, err := pii.Compile(pii.Config{Detectors: []string{pii.Email}})
	if err != nil {
		t.Fatal(err)
	}
	return sc.NewSession()
}

var placeholder = regexp.MustCompile(`\[EMAIL_\d+\]`)

// TestMaskRequestFields: the prompt text of each endpoint is masked wherever a client puts it,
// any other member (unknown ones included) keeps its bytes, and the result is valid JSON.
func TestMaskRequestFields(t *testing.T) {
	tests := []struct {
		name, path, body string
		// kept are substrings that must reach the upstream as they are.
		kept []string
	}{
		{"chat: string content, parts, tool calls, tool results, legacy function_call", "/chat/completions", `{"model":"gpt-4o", "x_vendor": {"a": [1, 2, {"b": null}]},
  "messages":[
    {"role":"system","content":"reply to a@example.com"},
    {"role":"user","content":[{"type":"text","text":"I am b@example.com"},{"type":"image_url","image_url":{"url":"https://img.example/x.png"}}],"name":"bob"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"send","arguments":"{\"to\":\"c@example.com\"}"}}]},
    {"role":"tool","tool_call_id":"call_1","content":"sent to c@example.com"},
    {"role":"assistant","function_call":{"name":"send","arguments":"{\"to\":\"d@example.com\"}"}},
    {"role":"user","Content":"case-folded e@example.com"},
    {"role":"user","content":"escaped f\u0040example.com"}
  ], "temperature": 0.5}`, []string{`"x_vendor": {"a": [1, 2, {"b": null}]}`, `"name":"bob"`, `"temperature": 0.5`, `"image_url":{"url":"https://img.example/x.png"}`}},
		{"responses: instructions, input string", "/responses", `{"model":"m","instructions":"cc a@example.com","input":"from b@example.com"}`, nil},
		{"responses: input items", "/responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a@example.com"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{\"x\":\"b@example.com\"}"},{"type":"function_call_output","call_id":"c","output":"c@example.com"}]}`, []string{`"call_id":"c"`}},
		{"responses: output parts, refusals", "/responses", `{"model":"m","input":[{"role":"assistant","content":[{"type":"refusal","refusal":"not for a@example.com"}]},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"b@example.com"}]}]}`, []string{`"call_id":"c"`}},
		{"completions: prompt strings and suffix", "/completions", `{"model":"m","prompt":["a@example.com","b@example.com"],"suffix":"c@example.com"}`, nil},
		{"embeddings: input strings, tokens left alone", "/embeddings", `{"model":"m","input":["a@example.com"],"dimensions":8}`, []string{`"dimensions":8`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := emailSession(t)
			out, err := MaskRequest(tt.path, []byte(tt.body), ss.Mask)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(out) {
				t.Fatalf("masked body is not JSON: %s", out)
			}
			if strings.Contains(string(out), "@example.com") || strings.Contains(string(out), `\u0040example.com`) {
				t.Errorf("an address reached the upstream body:\n%s", out)
			}
			if !placeholder.Match(out) {
				t.Errorf("no placeholder in %s", out)
			}
			for _, k := range tt.kept {
				if !strings.Contains(string(out), k) {
					t.Errorf("%s was not passed through as it was:\n%s", k, out)
				}
			}
			// Restoring the masked body gives the values back (in decoded form).
			var orig, back any
			_ = json.Unmarshal([]byte(tt.body), &orig)
			_ = json.Unmarshal(RestoreAll(out, ss), &back)
			ob, _ := json.Marshal(orig)
			bb, _ := json.Marshal(back)
			if string(ob) != string(bb) {
				t.Errorf("RestoreAll(mask(body)) differs from body:\n%s\n%s", ob, bb)
			}
		})
	}
}

// TestMaskRequestLeavesOtherTextAlone: what is not prompt text is not scanned, and a body
// without personal data comes back as the very same bytes.
func TestMaskRequestLeavesOtherTextAlone(t *testing.T) {
	body := `{"model":"gpt-4o","user":"a@example.com","metadata":{"owner":"b@example.com"},"tools":[{"type":"function","function":{"name":"f","description":"mail c@example.com"}}],"messages":[{"role":"user","content":"hello"}]}`
	out, err := MaskRequest("/chat/completions", []byte(body), emailSession(t).Mask)
	if err != nil || string(out) != body {
		t.Errorf("body changed (%v):\n%s", err, out)
	}
}

// TestRestoreAll: every string of an answer gets the session's originals back; placeholders of
// no session of this request stay as they are.
func TestRestoreAll(t *testing.T) {
	ss := emailSession(t)
	masked := ss.Mask("a@example.com b@example.com")
	answer := `{"choices":[{"index":0,"message":{"role":"assistant","content":"to ` + masked + ` [EMAIL_9]","tool_calls":[{"function":{"name":"f","arguments":"{\"to\":\"[EMAIL_1]\"}"}}]}}]}`
	got := string(RestoreAll([]byte(answer), ss))
	want := `{"choices":[{"index":0,"message":{"role":"assistant","content":"to a@example.com b@example.com [EMAIL_9]","tool_calls":[{"function":{"name":"f","arguments":"{\"to\":\"a@example.com\"}"}}]}}]}`
	if got != want {
		t.Errorf("RestoreAll:\n got %s\nwant %s", got, want)
	}
	if got := RestoreAll([]byte(`{not json`), ss); string(got) != `{not json` {
		t.Errorf("invalid JSON changed: %s", got)
	}
}

// relay runs a stream of events through a StreamRestore as the proxy's relay does.
func relay(t *testing.T, sr *StreamRestore, stream string) string {
	t.Helper()
	r := sse.NewReader(strings.NewReader(stream))
	var out []byte
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sr.Event(&ev)...)
	}
}

// TestStreamRestoreToolCallsAndHeldText: tool call argument deltas are restored per tool call,
// and text held back when a choice finishes goes out in an extra event before the finish.
func TestStreamRestoreToolCallsAndHeldText(t *testing.T) {
	ss := emailSession(t)
	ss.Mask("a@example.com")
	chunk := func(delta, finish string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + "}]}\n\n"
	}
	stream := chunk(`{"role":"assistant","content":"mail [EM"}`, "null") +
		chunk(`{"tool_calls":[{"index":0,"id":"t","type":"function","function":{"name":"send","arguments":"{\"to\":\"[EMA"}}]}`, "null") +
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"IL_1]\"}"}}]}`, "null") +
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"[EMAIL_"}}]}`, "null") +
		chunk(`{}`, `"tool_calls"`) +
		"data: [DONE]\n\n"
	got := relay(t, NewStreamRestore(ss, "/chat/completions"), stream)
	want := chunk(`{"role":"assistant","content":"mail "}`, "null") +
		chunk(`{"tool_calls":[{"index":0,"id":"t","type":"function","function":{"name":"send","arguments":"{\"to\":\""}}]}`, "null") +
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"a@example.com\"}"}}]}`, "null") +
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":""}}]}`, "null") +
		// held at the finish: the content's "[EM" and tool 1's "[EMAIL_", in the order they came
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"[EM"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"[EMAIL_"}}]},"finish_reason":null}]}` + "\n\n" +
		chunk(`{}`, `"tool_calls"`) +
		"data: [DONE]\n\n"
	if got != want {
		t.Errorf("restored stream:\n%s\nwant:\n%s", got, want)
	}
}

// TestStreamRestoreFlushesBeforeDoneAndResponses: held text left when the stream ends goes out
// before [DONE]; the Responses API's deltas are restored per item, the held tail goes out before
// the item's .done event, and whole-text events are restored as a whole.
func TestStreamRestoreFlushesBeforeDoneAndResponses(t *testing.T) {
	ss := emailSession(t)
	ss.Mask("a@example.com")
	got := relay(t, NewStreamRestore(ss, "/completions"),
		`data: {"id":"x","object":"text_completion","choices":[{"index":0,"text":"to [EMAIL_1","finish_reason":null}]}`+"\n\n"+"data: [DONE]\n\n")
	want := `data: {"id":"x","object":"text_completion","choices":[{"index":0,"text":"to ","finish_reason":null}]}` + "\n\n" +
		`data: {"id":"x","object":"text_completion","choices":[{"index":0,"text":"[EMAIL_1","finish_reason":null}]}` + "\n\n" + "data: [DONE]\n\n"
	if got != want {
		t.Errorf("completions:\n%s\nwant:\n%s", got, want)
	}

	ev := func(typ, body string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\"," + body + "}\n\n"
	}
	ids := `"item_id":"m1","output_index":0,"content_index":0,`
	got = relay(t, NewStreamRestore(ss, "/responses"),
		ev("response.output_text.delta", ids+`"delta":"to [EMAI"`)+
			ev("response.output_text.delta", ids+`"delta":"L_1"`)+
			ev("response.output_text.done", ids+`"text":"to [EMAIL_1"`)+
			ev("response.completed", `"response":{"output":[{"content":[{"text":"to [EMAIL_1]"}]}]}`))
	want = ev("response.output_text.delta", ids+`"delta":"to "`) +
		ev("response.output_text.delta", ids+`"delta":""`) +
		ev("response.output_text.delta", ids+`"delta":"[EMAIL_1"`) +
		ev("response.output_text.done", ids+`"text":"to [EMAIL_1"`) +
		ev("response.completed", `"response":{"output":[{"content":[{"text":"to a@example.com"}]}]}`)
	if got != want {
		t.Errorf("responses:\n%s\nwant:\n%s", got, want)
	}
}
