package mockprovider

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

// responseItem is an output item as the SDKs accumulate it.
type responseItem struct {
	Type      string         `json:"type"`
	ID        string         `json:"id"`
	Status    string         `json:"status"`
	CallID    string         `json:"call_id"`
	Name      string         `json:"name"`
	Arguments string         `json:"arguments"`
	Content   []responsePart `json:"content"`
}

type responsePart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type responseObject struct {
	ID     string         `json:"id"`
	Object string         `json:"object"`
	Status string         `json:"status"`
	Model  string         `json:"model"`
	Output []responseItem `json:"output"`
	Usage  *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// responseEvent is one event of a Responses stream.
type responseEvent struct {
	Type           string          `json:"type"`
	SequenceNumber *int            `json:"sequence_number"`
	OutputIndex    *int            `json:"output_index"`
	ContentIndex   int             `json:"content_index"`
	ItemID         string          `json:"item_id"`
	Item           *responseItem   `json:"item"`
	Part           *responsePart   `json:"part"`
	Delta          string          `json:"delta"`
	Text           string          `json:"text"`
	Arguments      string          `json:"arguments"`
	Response       *responseObject `json:"response"`
}

// accumulateResponse replays a Responses stream under the rules openai-node's response
// accumulator and ResponseStream enforce (src/internal/responses/response-accumulator.ts,
// src/lib/responses/ResponseStream.ts): lifecycle events carry a response whose id never
// changes; an item is added at the next output index before any event names it; item_id is the
// item's id and the item has the event's type; a content part is appended at the next content
// index; done events hold what the deltas built; response.completed holds every item as
// accumulated. sequence_number counts from 0. It returns the final response and the text and
// arguments the deltas built, or the first rule broken.
func accumulateResponse(evs []sse) (final *responseObject, err error) {
	var output []responseItem
	var id string
	for i, raw := range evs {
		var ev responseEvent
		if err := json.Unmarshal([]byte(raw.data), &ev); err != nil {
			return nil, fmt.Errorf("event %d is not JSON: %q", i, raw.data)
		}
		if ev.Type != raw.event {
			return nil, fmt.Errorf("event %d: SSE event %q, type %q", i, raw.event, ev.Type)
		}
		if ev.SequenceNumber == nil || *ev.SequenceNumber != i {
			return nil, fmt.Errorf("event %d (%s): sequence_number %v", i, ev.Type, ev.SequenceNumber)
		}
		if final != nil {
			return nil, fmt.Errorf("event %d (%s) after response.completed", i, ev.Type)
		}
		item := func(typ string) (*responseItem, error) {
			if ev.OutputIndex == nil || *ev.OutputIndex < 0 || *ev.OutputIndex >= len(output) {
				return nil, fmt.Errorf("%s: missing output at index %v", ev.Type, ev.OutputIndex)
			}
			it := &output[*ev.OutputIndex]
			if ev.ItemID != "" && ev.ItemID != it.ID {
				return nil, fmt.Errorf("%s: expected item_id %q, got %q", ev.Type, it.ID, ev.ItemID)
			}
			if it.Type != typ {
				return nil, fmt.Errorf("%s: expected output item type %q, got %q", ev.Type, typ, it.Type)
			}
			return it, nil
		}
		text := func(it *responseItem) (*string, error) {
			if ev.ContentIndex < 0 || ev.ContentIndex >= len(it.Content) || it.Content[ev.ContentIndex].Type != "output_text" {
				return nil, fmt.Errorf("%s: missing content at index %d", ev.Type, ev.ContentIndex)
			}
			return &it.Content[ev.ContentIndex].Text, nil
		}
		switch ev.Type {
		case "response.created", "response.in_progress", "response.completed":
			if ev.Response == nil || ev.Response.ID == "" || (id != "" && ev.Response.ID != id) {
				return nil, fmt.Errorf("%s: lifecycle response %+v (id %q)", ev.Type, ev.Response, id)
			}
			id = ev.Response.ID
			if ev.Type != "response.completed" {
				if ev.Response.Status != "in_progress" || len(ev.Response.Output) != 0 {
					return nil, fmt.Errorf("%s: response %+v", ev.Type, ev.Response)
				}
				continue
			}
			if ev.Response.Status != "completed" || ev.Response.Usage == nil {
				return nil, fmt.Errorf("response.completed: status %q usage %v", ev.Response.Status, ev.Response.Usage)
			}
			got, _ := json.Marshal(ev.Response.Output)
			want, _ := json.Marshal(output)
			if string(got) != string(want) {
				return nil, fmt.Errorf("response.completed output %s, accumulated %s", got, want)
			}
			final = ev.Response
		case "response.output_item.added":
			if ev.OutputIndex == nil || *ev.OutputIndex != len(output) || ev.Item == nil || ev.Item.ID == "" {
				return nil, fmt.Errorf("output_item.added: missing output at index %v (%d items), item %+v", ev.OutputIndex, len(output), ev.Item)
			}
			if ev.Item.Type == "function_call" && (ev.Item.CallID == "" || ev.Item.Name == "" || ev.Item.Arguments != "") {
				return nil, fmt.Errorf("output_item.added: function_call %+v", ev.Item)
			}
			for _, o := range output {
				if o.ID == ev.Item.ID {
					return nil, fmt.Errorf("duplicate output item identity %q", o.ID)
				}
			}
			output = append(output, *ev.Item)
		case "response.output_item.done":
			if ev.OutputIndex == nil || ev.Item == nil {
				return nil, fmt.Errorf("output_item.done without index or item")
			}
			it, err := item(ev.Item.Type)
			if err != nil {
				return nil, err
			}
			if ev.Item.ID != it.ID || ev.Item.CallID != it.CallID || ev.Item.Status != "completed" {
				return nil, fmt.Errorf("output_item.done %+v replaces %+v", ev.Item, it)
			}
			done, _ := json.Marshal(ev.Item.Content)
			built, _ := json.Marshal(it.Content)
			if string(done) != string(built) || ev.Item.Arguments != it.Arguments {
				return nil, fmt.Errorf("output_item.done %+v, accumulated %+v", ev.Item, it)
			}
			*it = *ev.Item
		case "response.content_part.added":
			it, err := item("message")
			if err != nil {
				return nil, err
			}
			if ev.Part == nil || ev.ContentIndex != len(it.Content) {
				return nil, fmt.Errorf("content_part.added: missing content at index %d", ev.ContentIndex)
			}
			it.Content = append(it.Content, *ev.Part)
		case "response.output_text.delta", "response.output_text.done", "response.content_part.done":
			it, err := item("message")
			if err != nil {
				return nil, err
			}
			t, err := text(it)
			if err != nil {
				return nil, err
			}
			switch {
			case ev.Type == "response.output_text.delta":
				*t += ev.Delta
			case ev.Type == "response.output_text.done" && ev.Text != *t,
				ev.Type == "response.content_part.done" && (ev.Part == nil || ev.Part.Text != *t):
				return nil, fmt.Errorf("%s: %+v, accumulated %q", ev.Type, ev, *t)
			}
		case "response.function_call_arguments.delta", "response.function_call_arguments.done":
			it, err := item("function_call")
			if err != nil {
				return nil, err
			}
			if ev.Type == "response.function_call_arguments.delta" {
				it.Arguments += ev.Delta
			} else if ev.Arguments != it.Arguments {
				return nil, fmt.Errorf("function_call_arguments.done %q, accumulated %q", ev.Arguments, it.Arguments)
			}
		default:
			return nil, fmt.Errorf("event %d: unknown type %q", i, ev.Type)
		}
	}
	if final == nil {
		return nil, fmt.Errorf("the stream ended without response.completed")
	}
	return final, nil
}

func TestResponsesStreamAccumulates(t *testing.T) {
	_, ts, c := start(t, Options{Name: "m"})
	tools := []any{map[string]any{"type": "function", "name": "lookup", "parameters": map[string]any{"type": "object"}}}
	for _, tc := range []struct {
		name     string
		body     map[string]any
		behavior string
		text     string // "" for no message item
		call     string // the function called, "" for none
	}{
		{name: "text", body: map[string]any{"input": "hi"}, text: "Hello from m"},
		{name: "tools offered", body: map[string]any{"input": "find cats", "tools": tools}, text: "Hello from m", call: "lookup"},
		{name: "call alone", body: map[string]any{"input": []any{map[string]any{"role": "user", "content": "find cats"}}}, behavior: "tool_call=search", call: "search"},
		{name: "tool answered", body: map[string]any{"tools": tools, "input": []any{
			map[string]any{"role": "user", "content": "find cats"},
			map[string]any{"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": `{"query":"find cats"}`},
			map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "three cats"}}}, text: "Hello from m"},
		{name: "echo, cut in pieces", body: map[string]any{"input": "hello world"}, behavior: "echo;chunk_bytes=3", text: "hello world"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, stream := range []bool{true, false} {
				body := map[string]any{"model": "gpt-4o", "stream": stream}
				for k, v := range tc.body {
					body[k] = v
				}
				o := reqOpts{path: "/v1/responses", body: body}
				if tc.behavior != "" {
					o.headers = map[string]string{BehaviorHeader: tc.behavior}
				}
				var r *responseObject
				if stream {
					resp, err := do(t, c, ts, o)
					if err != nil {
						t.Fatal(err)
					}
					evs, err := readSSE(resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
						t.Fatalf("status %d, %v", resp.StatusCode, err)
					}
					for _, ev := range evs {
						if ev.data == "[DONE]" {
							t.Fatal("a Responses stream ends with response.completed, not [DONE]")
						}
					}
					if r, err = accumulateResponse(evs); err != nil {
						t.Fatalf("the SDKs would refuse this stream: %v\n%+v", err, evs)
					}
				} else {
					resp, data := mustDo(t, c, ts, o)
					r = &responseObject{}
					if err := json.Unmarshal(data, r); err != nil || resp.StatusCode != 200 || r.Object != "response" || r.Status != "completed" {
						t.Fatalf("status %d: %s", resp.StatusCode, data)
					}
				}
				var items []string
				for _, it := range r.Output {
					items = append(items, it.Type)
					switch it.Type {
					case "message":
						if len(it.Content) != 1 || it.Content[0].Type != "output_text" || it.Content[0].Text != tc.text {
							t.Errorf("stream=%v: message %+v, want text %q", stream, it, tc.text)
						}
					case "function_call":
						var args map[string]string
						if it.Name != tc.call || !strings.HasPrefix(it.CallID, "call_") || !strings.HasPrefix(it.ID, "fc_") ||
							json.Unmarshal([]byte(it.Arguments), &args) != nil || args["query"] != "find cats" {
							t.Errorf("stream=%v: function_call %+v", stream, it)
						}
					}
				}
				var want []string
				if tc.text != "" {
					want = append(want, "message")
				}
				if tc.call != "" {
					want = append(want, "function_call")
				}
				if strings.Join(items, ",") != strings.Join(want, ",") || r.Usage == nil || r.Usage.OutputTokens <= 0 {
					t.Errorf("stream=%v: output %v (want %v), usage %+v", stream, items, want, r.Usage)
				}
			}
		})
	}
}

// TestResponsesStreamBreaks: the misbehaviour modes still break a Responses stream, inside the
// message or inside the call's arguments, before response.completed.
func TestResponsesStreamBreaks(t *testing.T) {
	_, ts, c := start(t, Options{Name: "m"})
	for _, behavior := range []string{"cut;after=1", "cut;tool_call=lookup;after=2", "error_event;after=2",
		"error_event;text=Hi;tool_call=lookup;after=2", "error_event;after=0", "garbage;after=1"} {
		resp, err := do(t, c, ts, reqOpts{path: "/v1/responses", body: map[string]any{"model": "gpt-4o", "input": "hi", "stream": true},
			headers: map[string]string{BehaviorHeader: behavior}})
		if err != nil {
			t.Fatal(err)
		}
		evs, _ := readSSE(resp.Body)
		resp.Body.Close()
		if _, err := accumulateResponse(evs); err == nil {
			t.Errorf("%s: the stream completed: %+v", behavior, evs)
		}
		if len(evs) < 3 {
			t.Errorf("%s: the stream broke before its first item: %+v", behavior, evs)
			continue
		}
		if !strings.HasPrefix(behavior, "error_event") {
			continue
		}
		// OpenAI's in-band error: an "error" event numbered after the last one sent.
		last := evs[len(evs)-1]
		var ev struct {
			Type           string `json:"type"`
			Code           string `json:"code"`
			Message        string `json:"message"`
			SequenceNumber *int   `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(last.data), &ev); err != nil || last.event != "error" || ev.Type != "error" || ev.Message == "" ||
			ev.SequenceNumber == nil || *ev.SequenceNumber != len(evs)-1 {
			t.Errorf("%s: the last event %+v", behavior, last)
		}
		if _, err := accumulateResponse(evs[:len(evs)-1]); err == nil || !strings.Contains(err.Error(), "without response.completed") {
			t.Errorf("%s: the events before the error: %v", behavior, err)
		}
	}
}

func TestEmbeddingsBase64(t *testing.T) {
	_, ts, c := start(t, Options{Name: "m"})
	decode := func(format string) [][]float32 {
		t.Helper()
		body := map[string]any{"model": "text-embedding-3-small", "input": []string{"a", "b"}, "dimensions": 5}
		if format != "" {
			body["encoding_format"] = format
		}
		resp, data := mustDo(t, c, ts, reqOpts{path: "/v1/embeddings", body: body})
		var out struct {
			Data []struct {
				Embedding json.RawMessage `json:"embedding"`
			} `json:"data"`
		}
		if err := json.Unmarshal(data, &out); err != nil || resp.StatusCode != 200 || len(out.Data) != 2 {
			t.Fatalf("status %d: %s", resp.StatusCode, data)
		}
		var vecs [][]float32
		for _, d := range out.Data {
			var vec []float32
			if format == "base64" {
				var s string
				if err := json.Unmarshal(d.Embedding, &s); err != nil {
					t.Fatalf("base64: the embedding is not a string: %s", d.Embedding)
				}
				// As openai-node's toFloat32Array: Buffer.from(s, 'base64') read as a Float32Array.
				raw, err := base64.StdEncoding.DecodeString(s)
				if err != nil || len(raw)%4 != 0 {
					t.Fatalf("base64 %q: %v, %d bytes", s, err, len(raw))
				}
				for i := 0; i < len(raw); i += 4 {
					vec = append(vec, math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])))
				}
			} else if err := json.Unmarshal(d.Embedding, &vec); err != nil {
				t.Fatalf("%q: %s", format, d.Embedding)
			}
			vecs = append(vecs, vec)
		}
		return vecs
	}
	floats, b64 := decode(""), decode("base64")
	if fmt.Sprint(decode("float")) != fmt.Sprint(floats) {
		t.Errorf("float %v, default %v", decode("float"), floats)
	}
	want := "[[0.01 -0.02 0.03 -0.04 0.05] [0.01 -0.02 0.03 -0.04 0.05]]"
	if fmt.Sprint(b64) != want || fmt.Sprint(floats) != want {
		t.Errorf("base64 decodes to %v, floats %v; want %v", b64, floats, want)
	}
}

// TestChatToolCalls: chat completions offered tools call the first one, streamed or not, until the
// conversation holds the tool's result; then they answer text.
func TestChatToolCalls(t *testing.T) {
	_, ts, c := start(t, Options{Name: "m"})
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "parameters": map[string]any{"type": "object"}}}}
	ask := []any{map[string]any{"role": "user", "content": "find cats"}}
	answered := append(append([]any{}, ask...),
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": "lookup", "arguments": `{"query":"find cats"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "three cats"})
	for _, tc := range []struct {
		name     string
		messages []any
		tools    []any
		call     bool
	}{{"tools offered", ask, tools, true}, {"tool answered", answered, tools, false}, {"no tools", ask, nil, false}} {
		for _, stream := range []bool{false, true} {
			body := map[string]any{"model": "gpt-4o", "messages": tc.messages, "stream": stream}
			if tc.tools != nil {
				body["tools"] = tc.tools
			}
			resp, data := mustDo(t, c, ts, reqOpts{body: body})
			var name, args, finish, text string
			if !stream {
				var out struct {
					Choices []struct {
						Message struct {
							Content   *string `json:"content"`
							ToolCalls []struct {
								ID       string `json:"id"`
								Function struct{ Name, Arguments string }
							} `json:"tool_calls"`
						} `json:"message"`
						FinishReason string `json:"finish_reason"`
					} `json:"choices"`
				}
				if err := json.Unmarshal(data, &out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
					t.Fatalf("%s: status %d: %s", tc.name, resp.StatusCode, data)
				}
				ch := out.Choices[0]
				finish = ch.FinishReason
				if ch.Message.Content != nil {
					text = *ch.Message.Content
				}
				for _, tcall := range ch.Message.ToolCalls {
					name, args = tcall.Function.Name, tcall.Function.Arguments
				}
			} else {
				evs, err := readSSE(strings.NewReader(string(data)))
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range evs {
					var ck struct {
						Choices []struct {
							Delta struct {
								Content   string `json:"content"`
								ToolCalls []struct {
									Function struct{ Name, Arguments string }
								} `json:"tool_calls"`
							} `json:"delta"`
							FinishReason *string `json:"finish_reason"`
						} `json:"choices"`
					}
					if ev.data == "[DONE]" || json.Unmarshal([]byte(ev.data), &ck) != nil {
						continue
					}
					for _, ch := range ck.Choices {
						text += ch.Delta.Content
						for _, tcall := range ch.Delta.ToolCalls {
							name += tcall.Function.Name
							args += tcall.Function.Arguments
						}
						if ch.FinishReason != nil {
							finish = *ch.FinishReason
						}
					}
				}
			}
			wantFinish, wantName, wantArgs := "stop", "", ""
			if tc.call {
				wantFinish, wantName, wantArgs = "tool_calls", "lookup", `{"query":"find cats"}`
			}
			if finish != wantFinish || name != wantName || args != wantArgs || text != "Hello from m" {
				t.Errorf("%s, stream=%v: finish %q, call %q(%s), text %q", tc.name, stream, finish, name, args, text)
			}
		}
	}
}
