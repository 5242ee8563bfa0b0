package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
)

// responsesStreamText reads a Responses stream: its output_text deltas joined, the text of the
// completed response, and the event types in order.
func responsesStreamText(t *testing.T, body string) (deltas, completed string, types []string) {
	t.Helper()
	for _, ev := range strings.Split(strings.TrimSpace(body), "\n\n") {
		_, data, ok := strings.Cut(ev, "data: ")
		if !ok {
			t.Fatalf("an event without data: %q", ev)
		}
		var e struct {
			Type     string `json:"type"`
			Delta    string `json:"delta"`
			Response struct {
				Output []struct {
					Content []struct{ Text string } `json:"content"`
				} `json:"output"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("responses event: %v: %s", err, data)
		}
		types = append(types, e.Type)
		switch e.Type {
		case "response.output_text.delta":
			deltas += e.Delta
		case "response.completed":
			if len(e.Response.Output) > 0 && len(e.Response.Output[0].Content) > 0 {
				completed = e.Response.Output[0].Content[0].Text
			}
		}
	}
	return deltas, completed, types
}

// TestResponsesOnClaude: the Responses API on a model of Anthropic channels is translated to the
// Messages API and back, answered and streamed; a member without equivalent is a 400 naming it,
// in OpenAI's shape.
func TestResponsesOnClaude(t *testing.T) {
	r, _ := newClaudeRig(t)
	rep := r.post("/v1/responses", `{"model":"claude-sonnet","instructions":"terse","input":"hello","store":false}`)
	if rep.status != 200 {
		t.Fatalf("status %d: %s", rep.status, rep.body)
	}
	m := decode(t, rep.body)
	out := m["output"].([]any)[0].(map[string]any)
	if m["object"] != "response" || m["status"] != "completed" || out["type"] != "message" ||
		out["content"].([]any)[0].(map[string]any)["text"] != "Hello from a" || m["instructions"] != "terse" {
		t.Errorf("answer: %s", rep.body)
	}
	up := decode(t, string(r.A.LastBody()))
	if up["model"] != "claude-sonnet-4-5-20250929" || up["max_tokens"] != float64(64000) || up["system"] == nil {
		t.Errorf("upstream body: %s", r.A.LastBody())
	}

	rep = r.post("/v1/responses", `{"model":"claude-sonnet","stream":true,"input":"hello"}`)
	deltas, completed, types := responsesStreamText(t, rep.body)
	if rep.status != 200 || deltas != "Hello from a" || completed != deltas || types[0] != "response.created" ||
		types[len(types)-1] != "response.completed" || strings.Contains(rep.body, "[DONE]") || strings.Contains(rep.body, "message_start") {
		t.Errorf("stream: %d\n%s", rep.status, rep.body)
	}

	rep = r.post("/v1/responses", `{"model":"claude-sonnet","previous_response_id":"resp_1","input":"hello"}`)
	if rep.status != 400 || !strings.Contains(rep.body, "previous_response_id: needs a stored response") || !strings.Contains(rep.body, `"type":"invalid_request_error"`) {
		t.Errorf("previous_response_id: %d %s", rep.status, rep.body)
	}
}

// TestResponsesOnClaudeErrors: an upstream failure before content fails over; one after content
// ends the stream with the Responses API's in-band error event, never response.completed; an
// upstream caller's error comes back in OpenAI's shape.
func TestResponsesOnClaudeErrors(t *testing.T) {
	r, _ := newClaudeRig(t, "streamRecovery: Error")
	r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeErrorEvent, After: 0})
	rep := r.post("/v1/responses", `{"model":"claude-sonnet","stream":true,"input":"hello"}`)
	if deltas, _, _ := responsesStreamText(t, rep.body); rep.status != 200 || rep.header.Get("X-Switchyard-Channel") != "claude-b" || deltas != "Hello from b" {
		t.Errorf("error before content: %d via %s\n%s", rep.status, rep.header.Get("X-Switchyard-Channel"), rep.body)
	}
	r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeErrorEvent, After: 2})
	rep = r.post("/v1/responses", `{"model":"claude-sonnet","stream":true,"input":"hello"}`)
	_, _, types := responsesStreamText(t, rep.body)
	if last := types[len(types)-1]; last != "error" || strings.Contains(rep.body, "response.completed") || !strings.Contains(rep.body, `"stream_interrupted"`) {
		t.Errorf("error after content:\n%s", rep.body)
	}
	r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 400, Message: "messages: bad"})
	rep = r.post("/v1/responses", `{"model":"claude-sonnet","input":"hello"}`)
	if rep.status != 400 || !strings.Contains(rep.body, `"error":{`) || strings.Contains(rep.body, `"type":"error"`) {
		t.Errorf("upstream 400: %d %s", rep.status, rep.body)
	}
}

// TestResponsesOnClaudePII: a masked request's originals come back in the translated stream,
// in its deltas and its done events, cut across events or not.
func TestResponsesOnClaudePII(t *testing.T) {
	r, _ := newClaudeRig(t, piiMask)
	r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeEcho, ChunkBytes: 3})
	const email = "jane.doe@example.com"
	want := "mail " + email + " now"
	for _, stream := range []bool{false, true} {
		rep := r.post("/v1/responses", fmt.Sprintf(`{"model":"claude-sonnet","stream":%v,"input":[{"role":"user","content":[{"type":"input_text","text":%q}]}]}`, stream, want))
		if rep.status != 200 || strings.Contains(string(r.A.LastBody()), email) {
			t.Fatalf("stream=%v: %d, upstream saw %s", stream, rep.status, r.A.LastBody())
		}
		if !stream {
			if !strings.Contains(rep.body, `"text":"`+want+`"`) {
				t.Errorf("answer: the original is not restored: %s", rep.body)
			}
			continue
		}
		deltas, completed, _ := responsesStreamText(t, rep.body)
		if deltas != want || completed != want || strings.Count(rep.body, email) < 4 {
			t.Errorf("stream: deltas %q, completed %q, want %q:\n%s", deltas, completed, want, rep.body)
		}
	}
}
