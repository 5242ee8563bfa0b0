package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/anthropic"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy/clientapi"
	"github.com/switchyard-io/switchyard/internal/routing"
)

const (
	tripSchemaJSON = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"],"additionalProperties":false}`
	strictTrip     = `{"type":"json_schema","json_schema":{"name":"trip","strict":true,"schema":` + tripSchemaJSON + `}}`
)

// chatFinish is a chat completion's finish_reason, streamed or not ("" for none).
func chatFinish(t *testing.T, body string, stream bool) string {
	t.Helper()
	var finish string
	if !stream {
		var m struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(body), &m) != nil || len(m.Choices) == 0 {
			t.Fatalf("not a chat completion: %s", body)
		}
		return m.Choices[0].FinishReason
	}
	for _, line := range strings.Split(body, "\n") {
		var c struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(d), &c) == nil {
			for _, ch := range c.Choices {
				if ch.FinishReason != "" {
					finish = ch.FinishReason
				}
			}
		}
	}
	return finish
}

// formatTool is the forced tool of an upstream Messages body, if it has one.
func formatTool(t *testing.T, body []byte) bool {
	t.Helper()
	var m struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		ToolChoice struct {
			Type, Name string
		} `json:"tool_choice"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("upstream body: %v: %s", err, body)
	}
	return len(m.Tools) > 0 && m.Tools[len(m.Tools)-1].Name == anthropic.FormatTool && m.ToolChoice.Type == "tool" && m.ToolChoice.Name == anthropic.FormatTool
}

// TestStructuredOnClaude: response_format over HTTP on an Anthropic channel (Claude Sonnet 4.5:
// output_config.format) and on a Vertex one (the forced tool), answered and streamed: the
// answer's text is the JSON, finished as a stop; json_object alike; a strict answer that
// violates the schema is a 502 schema_violation naming the path, or the stream's in-band error
// at its end, and neither fails over.
func TestStructuredOnClaude(t *testing.T) {
	c := newCloudRig(t)
	for _, tc := range []struct {
		name, model, format string
		tool                bool   // the format goes as the forced tool
		want                string // the answer's text ("" for a violation)
		path                string // the violation's path in the error
	}{
		{"anthropic, json_schema strict", "claude-sonnet", strictTrip, false, `{"city":"Paris","days":1}`, ""},
		{"anthropic, json_object", "claude-sonnet", `{"type":"json_object"}`, true, `{"query":"Paris"}`, ""},
		{"vertex, json_object", "claude-v", `{"type":"json_object"}`, true, `{"query":"Paris"}`, ""},
		{"vertex, json_schema", "claude-v", `{"type":"json_schema","json_schema":{"name":"trip","schema":` + tripSchemaJSON + `}}`, true, `{"query":"Paris"}`, ""},
		// The Vertex mock calls its tool with {"query": ...}, whatever the schema: a violation.
		{"vertex, json_schema strict", "claude-v", strictTrip, true, "", "at /: missing properties 'city', 'days'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, stream := range []bool{false, true} {
				before := c.vertex.Requests(vertexModel) + c.bedrock.Requests(bedrockModel)
				rep := c.post("/v1/chat/completions", fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"Paris"}],"response_format":%s}`, tc.model, stream, tc.format))
				noCloudSecrets(t, rep)
				up := c.anth.LastBody()
				if tc.model == "claude-v" {
					up = c.vertex.LastBody()
				}
				if got := formatTool(t, up); got != tc.tool {
					t.Errorf("stream=%v: the forced tool went upstream: %v, want %v: %s", stream, got, tc.tool, up)
				}
				if !tc.tool && !strings.Contains(string(up), `"output_config":{"format":{"schema":`+tripSchemaJSON+`,"type":"json_schema"}}`) {
					t.Errorf("stream=%v: no output_config.format upstream: %s", stream, up)
				}
				if tc.want == "" {
					if c.vertex.Requests(vertexModel)+c.bedrock.Requests(bedrockModel) != before+1 {
						t.Errorf("stream=%v: a violation was failed over", stream)
					}
					if !stream {
						if rep.status != 502 || !strings.Contains(rep.body, `"code":"schema_violation"`) || !strings.Contains(rep.body, tc.path) {
							t.Errorf("violation: %d %s", rep.status, rep.body)
						}
						continue
					}
					if rep.status != 200 || !strings.Contains(rep.body, `"code":"schema_violation"`) || !strings.Contains(rep.body, tc.path) ||
						strings.Contains(rep.body, "[DONE]") || chatFinish(t, rep.body, true) != "" {
						t.Errorf("streamed violation: %d %s", rep.status, rep.body)
					}
					continue
				}
				if rep.status != 200 {
					t.Fatalf("stream=%v: %d %s", stream, rep.status, rep.body)
				}
				if got := chatText(t, rep.body, stream); got != tc.want {
					t.Errorf("stream=%v: text %q, want %q\n%s", stream, got, tc.want, rep.body)
				}
				if f := chatFinish(t, rep.body, stream); f != "stop" || strings.Contains(rep.body, "tool_calls") {
					t.Errorf("stream=%v: finish %q, tool calls in %s", stream, f, rep.body)
				}
			}
		})
	}

	// The Responses API's text.format alike: json_object on Bedrock, a message of output_text.
	for _, stream := range []bool{false, true} {
		rep := c.post("/v1/responses", fmt.Sprintf(`{"model":"claude-b","stream":%v,"input":"Paris","text":{"format":{"type":"json_object"}}}`, stream))
		if rep.status != 200 || !formatTool(t, c.bedrock.LastBody()) {
			t.Fatalf("responses stream=%v: %d %s\nupstream %s", stream, rep.status, rep.body, c.bedrock.LastBody())
		}
		if stream {
			deltas, completed, types := responsesStreamText(t, rep.body)
			if deltas != `{"query":"Paris"}` || completed != deltas || types[len(types)-1] != "response.completed" || strings.Contains(rep.body, "function_call") {
				t.Errorf("responses stream: %s", rep.body)
			}
			continue
		}
		out := decode(t, rep.body)["output"].([]any)
		item := out[0].(map[string]any)
		if len(out) != 1 || item["type"] != "message" || item["content"].([]any)[0].(map[string]any)["text"] != `{"query":"Paris"}` {
			t.Errorf("responses: %s", rep.body)
		}
	}

	// The client's own tools and json_object on a channel where the format is a forced tool: a
	// 400 naming the field, before any attempt.
	rep := c.post("/v1/chat/completions", `{"model":"claude-v","messages":[{"role":"user","content":"Paris"}],"response_format":{"type":"json_object"},"tools":[{"type":"function","function":{"name":"lookup"}}]}`)
	if rep.status != 400 || !strings.Contains(rep.body, "response_format: on this channel the format goes as a forced tool") {
		t.Errorf("json_object with tools: %d %s", rep.status, rep.body)
	}
}

// TestStrictViolationOnClaude: a strict answer under output_config.format that violates the
// schema (the mock says what it is told) is the client's 502, in OpenAI's shape, and the stream's
// in-band error; the channel stays healthy and nothing fails over; the access log names the code.
func TestStrictViolationOnClaude(t *testing.T) {
	r, _ := newClaudeRig(t)
	r.A.SetDefault(mockprovider.Behavior{Text: `{"city":"Paris","days":"two"}`})
	rep := r.post("/v1/chat/completions", `{"model":"claude-sonnet","messages":[{"role":"user","content":"Paris"}],"response_format":`+strictTrip+`}`)
	if rep.status != 502 || rep.header.Get("X-Switchyard-Channel") != "claude-a" || rep.header.Get("X-Switchyard-Attempts") != "1" ||
		!strings.Contains(rep.body, `"code":"schema_violation"`) || !strings.Contains(rep.body, "schema at /days: got string, want integer") {
		t.Errorf("violation: %d via %s\n%s", rep.status, rep.header.Get("X-Switchyard-Channel"), rep.body)
	}
	if n := r.B.Requests("claude-sonnet"); n != 0 {
		t.Errorf("the violation failed over: claude-b asked %d times", n)
	}
	if !strings.Contains(r.accessLog.String(), "schema_violation") {
		t.Errorf("the access log does not name the violation: %s", r.accessLog.String())
	}
	rep = r.post("/v1/responses", `{"model":"claude-sonnet","stream":true,"input":"Paris","text":{"format":{"type":"json_schema","name":"trip","strict":true,"schema":`+tripSchemaJSON+`}}}`)
	_, _, types := responsesStreamText(t, rep.body)
	if rep.status != 200 || types[len(types)-1] != "error" || strings.Contains(rep.body, "response.completed") || !strings.Contains(rep.body, `"code":"schema_violation"`) {
		t.Errorf("streamed violation: %d %s", rep.status, rep.body)
	}
	// The streamed violation is the client's failure in the access log too, not a success.
	lines := strings.Split(strings.TrimSpace(r.accessLog.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, `"outcome":"client_error"`) || !strings.Contains(last, `"errorCode":"schema_violation"`) {
		t.Errorf("the streamed violation's access log line: %s", last)
	}
	if n := r.B.Requests("claude-sonnet"); n != 0 {
		t.Errorf("the streamed violation failed over: claude-b asked %d times", n)
	}
	// The same answer without strict passes as it came.
	rep = r.post("/v1/chat/completions", `{"model":"claude-sonnet","messages":[{"role":"user","content":"Paris"}],"response_format":{"type":"json_schema","json_schema":{"name":"trip","schema":`+tripSchemaJSON+`}}}`)
	if rep.status != 200 || chatText(t, rep.body, false) != `{"city":"Paris","days":"two"}` {
		t.Errorf("not strict: %d %s", rep.status, rep.body)
	}
}

// TestTranslationsAreByProvider: routing's translation of a request is kept per provider, not per
// API family: the same upstream model takes a json_schema as output_config.format on Anthropic's
// API and as the forced tool on Vertex, so a failover from one to the other must not reuse the
// first one's body.
func TestTranslationsAreByProvider(t *testing.T) {
	cr, err := clientapi.ParseRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"Paris"}],"response_format":{"type":"json_schema","json_schema":{"name":"trip","schema":` + tripSchemaJSON + `}}}`))
	if err != nil {
		t.Fatal(err)
	}
	rt := &routeState{req: cr, path: "/chat/completions", header: http.Header{}}
	channel := func(provider string) *routing.Channel {
		return &routing.Channel{Name: provider, Provider: provider, Models: []routing.ChannelModel{{Name: "m", Upstream: "claude-sonnet-4-5-20250929"}}}
	}
	anth, vert := channel("anthropic"), channel("vertex")
	ta, err := rt.translation(anth, &anth.Models[0])
	if err != nil {
		t.Fatal(err)
	}
	tv, err := rt.translation(vert, &vert.Models[0])
	if err != nil {
		t.Fatal(err)
	}
	if ta.output == nil || ta.output.Tool || tv.output == nil || !tv.output.Tool || !formatTool(t, tv.body) || formatTool(t, ta.body) {
		t.Errorf("anthropic %+v, vertex %+v: want output_config.format on anthropic, the forced tool on vertex\n%s\n%s", ta.output, tv.output, ta.body, tv.body)
	}
}
