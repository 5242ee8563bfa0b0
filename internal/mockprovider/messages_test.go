package mockprovider

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestMessagesWireFormat(t *testing.T) {
	mock, ts, c := start(t, Options{Name: "claude", APIKey: "k"})
	post := func(path, body string, hdr map[string]string) (int, string) {
		t.Helper()
		resp, err := do(t, c, ts, reqOpts{path: path, body: body, headers: hdr})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	key := map[string]string{"x-api-key": "k"}
	const msg = `{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"hi"}]`

	status, body := post("/v1/messages", msg+`}`, nil)
	if status != 401 || !strings.Contains(body, `"type":"authentication_error"`) || !strings.Contains(body, `"type":"error"`) {
		t.Errorf("no key: %d %s", status, body)
	}
	status, body = post("/v1/messages", msg+`}`, key)
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil || status != 200 || m["type"] != "message" || m["stop_reason"] != "end_turn" {
		t.Errorf("answer: %d %s", status, body)
	}
	status, body = post("/v1/messages", msg+`,"tools":[{"name":"lookup","input_schema":{"type":"object"}}]}`, key)
	if status != 200 || !strings.Contains(body, `"type":"tool_use"`) || !strings.Contains(body, `"stop_reason":"tool_use"`) {
		t.Errorf("tools: %d %s", status, body)
	}
	status, body = post("/v1/messages", msg+`,"stream":true,"tools":[{"name":"lookup","input_schema":{"type":"object"}}]}`, key)
	if status != 200 {
		t.Errorf("stream with tools: %d %s", status, body)
	}
	for _, want := range []string{"event: message_start\n", "event: ping\n", `"type":"text_delta"`, `"type":"input_json_delta"`, `"stop_reason":"tool_use"`} {
		if !strings.Contains(body, want) {
			t.Errorf("stream lacks %q:\n%s", want, body)
		}
	}
	if !strings.HasSuffix(body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") || strings.Contains(body, "[DONE]") {
		t.Errorf("stream end:\n%s", body)
	}
	mock.SetDefault(Behavior{Mode: ModeErrorEvent, After: 1})
	_, body = post("/v1/messages", msg+`,"stream":true}`, key)
	if !strings.Contains(body, "event: error\n") || !strings.Contains(body, `"overloaded_error"`) || strings.Contains(body, "message_stop") {
		t.Errorf("error event:\n%s", body)
	}
	mock.SetDefault(Behavior{Mode: ModeStatus, Status: 529})
	status, body = post("/v1/messages", msg+`}`, key)
	if status != 529 || !strings.Contains(body, `"overloaded_error"`) {
		t.Errorf("529: %d %s", status, body)
	}
	mock.SetDefault(Behavior{Mode: ModeContextLength})
	status, body = post("/v1/messages", msg+`}`, key)
	if status != 400 || !strings.Contains(body, "prompt is too long") {
		t.Errorf("context: %d %s", status, body)
	}
	mock.SetDefault(Behavior{})
	status, body = post("/v1/messages/count_tokens", `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`, key)
	if status != 200 || !strings.Contains(body, `"input_tokens"`) {
		t.Errorf("count_tokens: %d %s", status, body)
	}
}
