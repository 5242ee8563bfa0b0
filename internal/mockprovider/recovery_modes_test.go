package mockprovider

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// byteSplits is every byte offset inside s: each piece of the stream is one byte.
func byteSplits(s string) string {
	var out []string
	for i := 1; i < len(s); i++ {
		out = append(out, fmt.Sprint(i))
	}
	return strings.Join(out, ",")
}

// rawLiteral is a JSON string literal's bytes between its quotes as they came, or decoded when
// it has escapes (the test texts have nothing else JSON escapes).
func rawLiteral(t *testing.T, lit json.RawMessage) string {
	t.Helper()
	s := string(lit)
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		t.Fatalf("not a JSON string: %q", s)
	}
	if strings.Contains(s, `\`) {
		var d string
		if err := json.Unmarshal(lit, &d); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return d
	}
	return s[1 : len(s)-1]
}

// rawPieces reads a chat or Messages stream and returns its text pieces byte for byte, as a
// client reading the JSON raw gets them.
func rawPieces(t *testing.T, body io.Reader, messages bool) []string {
	t.Helper()
	evs, err := readSSE(body)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	var out []string
	for _, ev := range evs {
		if ev.data == "[DONE]" {
			continue
		}
		var e struct {
			Type    string `json:"type"`
			Choices []struct {
				Delta struct {
					Content json.RawMessage `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Delta struct {
				Type string          `json:"type"`
				Text json.RawMessage `json:"text"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			t.Fatalf("event %q: %v", ev.data, err)
		}
		if messages {
			if e.Type == "content_block_delta" && e.Delta.Type == "text_delta" {
				out = append(out, rawLiteral(t, e.Delta.Text))
			}
			continue
		}
		for _, c := range e.Choices {
			if len(c.Delta.Content) > 0 {
				out = append(out, rawLiteral(t, c.Delta.Content))
			}
		}
	}
	return out
}

// TestRawBytes: with raw_bytes, a character cut across events goes out as its raw bytes (as
// byte-level tokenizers stream it); without, the JSON encoder's U+FFFD.
func TestRawBytes(t *testing.T) {
	_, ts, c := start(t, Options{Name: "m"})
	const text = "aé中😀!"
	for _, messages := range []bool{false, true} {
		path, body := "/v1/chat/completions", any(chatBody("gpt-4o", true))
		if messages {
			path, body = "/v1/messages", map[string]any{"model": "claude", "max_tokens": 10, "stream": true,
				"messages": []any{map[string]any{"role": "user", "content": "hi"}}}
		}
		for _, raw := range []bool{true, false} {
			t.Run(fmt.Sprintf("messages %v, raw_bytes %v", messages, raw), func(t *testing.T) {
				b := "ok;splits=" + byteSplits(text) + ";text=" + text
				if raw {
					b += ";raw_bytes"
				}
				resp, err := do(t, c, ts, reqOpts{path: path, body: body, headers: map[string]string{BehaviorHeader: b}})
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				pieces := rawPieces(t, resp.Body, messages)
				if len(pieces) != len(text) {
					t.Fatalf("%d pieces, want one per byte (%d): %q", len(pieces), len(text), pieces)
				}
				if got := strings.Join(pieces, ""); raw && got != text {
					t.Fatalf("raw pieces assemble %q, want the bytes of %q", got, text)
				} else if !raw && (got == text || !strings.Contains(got, "\uFFFD")) {
					t.Fatalf("without raw_bytes the encoder writes U+FFFD, got %q", got)
				}
				invalid := 0
				for _, p := range pieces {
					if !utf8.ValidString(p) {
						invalid++
					}
				}
				if raw && invalid != len(text)-2 { // every byte of é, 中, 😀 alone is invalid
					t.Fatalf("%d pieces not valid UTF-8, want %d: %q", invalid, len(text)-2, pieces)
				}
			})
		}
	}
}

// TestBreakFirst: a cut (or an error event) on the first request only, then full answers; with
// prefill, the second continues the first's text: one channel that breaks and then continues.
func TestBreakFirst(t *testing.T) {
	mock, ts, c := start(t, Options{Name: "m"})
	const full = "Hello world"
	stream := func(body map[string]any, hdr string) (string, bool, error) {
		t.Helper()
		o := reqOpts{body: body}
		if hdr != "" {
			o.headers = map[string]string{BehaviorHeader: hdr}
		}
		resp, err := do(t, c, ts, o)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		evs, err := readSSE(resp.Body)
		chunks, _, done := parseChunks(t, evs)
		return contentOf(chunks), done, err
	}
	mock.SetDefault(Behavior{Mode: ModeCut, Prefill: true, BreakFirst: 1, After: 1, Splits: "5", Text: full})
	if got, done, err := stream(chatBody("gpt-4o", true), ""); got != "Hello" || done || err == nil {
		t.Fatalf("first request: %q done %v err %v, want a cut after %q", got, done, err, "Hello")
	}
	if got, done, err := stream(prefilled("gpt-4o", "Hello"), ""); got != " world" || !done || err != nil {
		t.Fatalf("second request: %q done %v err %v, want the rest after the prefill", got, done, err)
	}
	if got, done, _ := stream(chatBody("gpt-4o", true), ""); got != full || !done {
		t.Fatalf("third request: %q done %v, want the whole answer", got, done)
	}
	// Counted per model and per source, as FailFirst is, and after FailFirst's failures.
	hdr := "error_event;fail_first=1;break_first=1;after=1;splits=5;text=" + full
	if resp, _ := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o", true), headers: map[string]string{BehaviorHeader: hdr}}); resp.StatusCode != 500 {
		t.Fatalf("fail_first: %d", resp.StatusCode)
	}
	resp, err := do(t, c, ts, reqOpts{body: chatBody("gpt-4o", true), headers: map[string]string{BehaviorHeader: hdr}})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body) // the connection closes after the error event
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(data), `"error"`) || strings.Contains(string(data), "[DONE]") {
		t.Fatalf("break: %d %s", resp.StatusCode, data)
	}
	if got, done, _ := stream(chatBody("gpt-4o", true), hdr); got != full || !done {
		t.Fatalf("after the break: %q done %v", got, done)
	}
	if got, _, _ := stream(chatBody("gpt-4o-mini", true), ""); got != "Hello" {
		t.Fatalf("another model breaks on its own first request: %q", got)
	}
	// Reset restarts the progress; a non-streamed error_event is its status until then.
	mock.Reset()
	mock.SetDefault(Behavior{Mode: ModeErrorEvent, BreakFirst: 1, Status: 503})
	for i, want := range []int{503, 200, 200} {
		if resp, _ := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o", false)}); resp.StatusCode != want {
			t.Fatalf("non-streamed request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	if _, err := ParseBehavior("cut;break_first=-1"); err == nil {
		t.Fatal("a negative break_first was accepted")
	}
}

type toolChunk struct {
	Choices []struct {
		Delta struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string  `json:"name"`
					Arguments *string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

// TestToolCallStream: tool_call streams a call as OpenAI's chunks and Anthropic's tool_use block
// carry one (shapes from openai's ChatCompletionChunk.Choice.Delta.ToolCall and
// anthropic-sdk-go's ContentBlockStartEvent / InputJSONDelta), alone or after the text; After
// counts its events, so a cut falls inside the arguments.
func TestToolCallStream(t *testing.T) {
	_, ts, c := start(t, Options{Name: "m"})
	const args = `{"query":"Say hello"}`
	for _, tc := range []struct {
		name, behavior, text string
		cut                  bool
	}{
		{"alone", "ok;tool_call=lookup", "", false},
		{"after text", "ok;tool_call=lookup;splits=3;text=Hi there", "Hi there", false},
		{"alone, cut in the arguments", "cut;tool_call=lookup;after=2", "", true},
		{"after text, cut in the arguments", "cut;tool_call=lookup;splits=3;after=4;text=Hi there", "Hi there", true},
	} {
		t.Run("chat "+tc.name, func(t *testing.T) {
			resp, err := do(t, c, ts, reqOpts{body: chatBody("gpt-4o", true), headers: map[string]string{BehaviorHeader: tc.behavior}})
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			evs, _ := readSSE(resp.Body)
			var text, gotArgs, finish string
			calls, role := 0, ""
			for _, ev := range evs {
				if ev.data == "[DONE]" {
					continue
				}
				var ch toolChunk
				if err := json.Unmarshal([]byte(ev.data), &ch); err != nil {
					t.Fatalf("chunk %q: %v", ev.data, err)
				}
				for _, c := range ch.Choices {
					if role == "" {
						role = c.Delta.Role
					}
					var s string
					_ = json.Unmarshal(c.Delta.Content, &s)
					text += s
					for _, tcall := range c.Delta.ToolCalls {
						if tcall.Index == nil || *tcall.Index != 0 || tcall.Function.Arguments == nil {
							t.Fatalf("tool call delta without index 0 or arguments: %s", ev.data)
						}
						if tcall.ID != "" {
							calls++
							if tcall.Type != "function" || tcall.Function.Name != "lookup" || *tcall.Function.Arguments != "" || text != tc.text {
								t.Fatalf("the call's first delta: %s (after text %q)", ev.data, text)
							}
						}
						gotArgs += *tcall.Function.Arguments
					}
					if c.FinishReason != nil {
						finish = *c.FinishReason
					}
				}
			}
			if role != "assistant" || calls != 1 || text != tc.text {
				t.Fatalf("role %q, %d call starts, text %q", role, calls, text)
			}
			if tc.cut {
				if finish != "" || gotArgs == "" || len(gotArgs) >= len(args) || !strings.HasPrefix(args, gotArgs) {
					t.Fatalf("cut: arguments %q finish %q, want a part of %q and no finish", gotArgs, finish, args)
				}
				return
			}
			if gotArgs != args || finish != "tool_calls" {
				t.Fatalf("arguments %q finish %q", gotArgs, finish)
			}
		})
		t.Run("messages "+tc.name, func(t *testing.T) {
			body := map[string]any{"model": "claude", "max_tokens": 10, "stream": true, "messages": []any{map[string]any{"role": "user", "content": "Say hello"}}}
			resp, err := do(t, c, ts, reqOpts{path: "/v1/messages", body: body, headers: map[string]string{BehaviorHeader: tc.behavior}})
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			evs, _ := readSSE(resp.Body)
			var seq []string
			var text, gotArgs, stop string
			toolIndex := -1
			for _, ev := range evs {
				var e struct {
					Type         string `json:"type"`
					Index        int    `json:"index"`
					ContentBlock *struct {
						Type, ID, Name string
						Input          json.RawMessage
					} `json:"content_block"`
					Delta struct {
						Type        string `json:"type"`
						Text        string `json:"text"`
						PartialJSON string `json:"partial_json"`
						StopReason  string `json:"stop_reason"`
					} `json:"delta"`
				}
				if err := json.Unmarshal([]byte(ev.data), &e); err != nil || e.Type != ev.event {
					t.Fatalf("event %q %q: %v", ev.event, ev.data, err)
				}
				step := e.Type
				switch e.Type {
				case "content_block_start":
					step += ":" + e.ContentBlock.Type
					if e.ContentBlock.Type == "tool_use" {
						toolIndex = e.Index
						if e.ContentBlock.Name != "lookup" || e.ContentBlock.ID == "" || string(e.ContentBlock.Input) != "{}" {
							t.Fatalf("tool_use start: %s", ev.data)
						}
					}
				case "content_block_delta":
					step += ":" + e.Delta.Type
					text += e.Delta.Text
					if e.Delta.Type == "input_json_delta" {
						if e.Index != toolIndex {
							t.Fatalf("input_json_delta on block %d, the tool_use is %d", e.Index, toolIndex)
						}
						gotArgs += e.Delta.PartialJSON
					}
				case "message_delta":
					stop = e.Delta.StopReason
				}
				if len(seq) == 0 || seq[len(seq)-1] != step {
					seq = append(seq, step)
				}
			}
			want := "message_start ping content_block_start:tool_use content_block_delta:input_json_delta"
			if tc.text != "" {
				want = "message_start content_block_start:text ping content_block_delta:text_delta content_block_stop " + want[len("message_start ping "):]
			}
			if !tc.cut {
				want += " content_block_stop message_delta message_stop"
			}
			if got := strings.Join(seq, " "); got != want {
				t.Fatalf("events\n%s\nwant\n%s", got, want)
			}
			if wantIndex := map[bool]int{true: 1, false: 0}[tc.text != ""]; toolIndex != wantIndex || text != tc.text {
				t.Fatalf("tool_use block %d, text %q", toolIndex, text)
			}
			if tc.cut {
				if stop != "" || gotArgs == "" || len(gotArgs) >= len(args) || !strings.HasPrefix(args, gotArgs) {
					t.Fatalf("cut: arguments %q stop %q", gotArgs, stop)
				}
				return
			}
			if gotArgs != args || stop != "tool_use" {
				t.Fatalf("arguments %q stop %q", gotArgs, stop)
			}
		})
	}
	t.Run("chat non-streamed", func(t *testing.T) {
		_, data := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o", false), headers: map[string]string{BehaviorHeader: "ok;tool_call=lookup"}})
		var out struct {
			Choices []struct {
				Message struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						ID, Type string
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(data, &out); err != nil || len(out.Choices) != 1 {
			t.Fatalf("%s: %v", data, err)
		}
		ch := out.Choices[0]
		if ch.FinishReason != "tool_calls" || ch.Message.Content != nil || len(ch.Message.ToolCalls) != 1 ||
			ch.Message.ToolCalls[0].Function.Name != "lookup" || ch.Message.ToolCalls[0].Function.Arguments != args || ch.Message.ToolCalls[0].Type != "function" {
			t.Fatalf("non-streamed tool call: %s", data)
		}
	})
}

// TestPromptTokensCountText: the prompt's usage counts the text of the messages (a prefill
// included, and the system prompt), one token per 4 bytes plus one, in chat and Messages answers,
// streamed or not.
func TestPromptTokensCountText(t *testing.T) {
	_, ts, c := start(t, Options{Name: "m"})
	user := strings.Repeat("abcd", 10) // 40 bytes
	chat := func(prefill string) map[string]any {
		msgs := []any{map[string]any{"role": "system", "content": "1234"}, map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": user}}}}
		if prefill != "" {
			msgs = append(msgs, map[string]any{"role": "assistant", "content": prefill})
		}
		return map[string]any{"model": "gpt-4o", "messages": msgs, "stream": true, "stream_options": map[string]any{"include_usage": true}}
	}
	for _, tc := range []struct {
		prefill string
		want    int
	}{{"", 1 + 44/4}, {strings.Repeat("x", 20), 1 + 64/4}} {
		body := chat(tc.prefill)
		resp, err := do(t, c, ts, reqOpts{body: body})
		if err != nil {
			t.Fatal(err)
		}
		evs, _ := readSSE(resp.Body)
		resp.Body.Close()
		chunks, _, _ := parseChunks(t, evs)
		if u := chunks[len(chunks)-1].Usage; u == nil || u.PromptTokens != tc.want {
			t.Fatalf("streamed chat with prefill %q: usage %+v, want prompt_tokens %d", tc.prefill, u, tc.want)
		}
		body["stream"] = false
		_, data := mustDo(t, c, ts, reqOpts{body: body})
		if u := decode(t, data)["usage"].(map[string]any); u["prompt_tokens"] != float64(tc.want) {
			t.Fatalf("chat with prefill %q: usage %v, want prompt_tokens %d", tc.prefill, u, tc.want)
		}
	}
	// Messages: the system prompt and the prefill count; message_start and message_delta agree.
	body := map[string]any{"model": "claude", "max_tokens": 10, "stream": true, "system": "1234",
		"messages": []any{map[string]any{"role": "user", "content": user}, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": strings.Repeat("x", 20)}}}}}
	resp, err := do(t, c, ts, reqOpts{path: "/v1/messages", body: body})
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := readSSE(resp.Body)
	resp.Body.Close()
	const want = 1 + 64/4
	seen := 0
	for _, ev := range evs {
		var e struct {
			Message struct {
				Usage struct {
					InputTokens int `json:"input_tokens"`
				} `json:"usage"`
			} `json:"message"`
			Usage struct {
				InputTokens int `json:"input_tokens"`
			} `json:"usage"`
		}
		_ = json.Unmarshal([]byte(ev.data), &e)
		switch ev.event {
		case "message_start":
			seen++
			if e.Message.Usage.InputTokens != want {
				t.Fatalf("message_start input_tokens %d, want %d: %s", e.Message.Usage.InputTokens, want, ev.data)
			}
		case "message_delta":
			seen++
			if e.Usage.InputTokens != want {
				t.Fatalf("message_delta input_tokens %d, want %d (cumulative): %s", e.Usage.InputTokens, want, ev.data)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("saw %d of message_start and message_delta", seen)
	}
	body["stream"] = false
	_, data := mustDo(t, c, ts, reqOpts{path: "/v1/messages", body: body})
	if u := decode(t, data)["usage"].(map[string]any); u["input_tokens"] != float64(want) {
		t.Fatalf("messages: usage %v, want input_tokens %d", u, want)
	}
}
