package mockprovider

import (
	"bytes"
	"strings"
	"testing"
)

// TestEcho: ModeEcho answers with the text the request carried, streamed or not, on every
// endpoint that answers text, cut where the behaviour says; the last body is recorded as sent.
func TestEcho(t *testing.T) {
	mock, ts, c := start(t, Options{Name: "echo"})
	mock.SetDefault(Behavior{Mode: ModeEcho})
	const text = "write to ann@example.com"
	chatReq := map[string]any{"model": "gpt-4o", "messages": []any{
		map[string]any{"role": "system", "content": "be brief"},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "write to "}, map[string]any{"type": "text", "text": "ann@example.com"}}},
		map[string]any{"role": "assistant", "content": "ok"},
	}}

	t.Run("chat, not streamed", func(t *testing.T) {
		_, data := mustDo(t, c, ts, reqOpts{body: chatReq})
		msg := decode(t, data)["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
		if msg["content"] != text {
			t.Errorf("content %q, want %q", msg["content"], text)
		}
		if !bytes.Contains(mock.LastBody(), []byte(`"ann@example.com"`)) {
			t.Errorf("LastBody does not hold the request: %s", mock.LastBody())
		}
	})

	for _, b := range []struct {
		name   string
		header string
		pieces []string
	}{
		{"one chunk by default", "echo", []string{text}},
		{"chunk_bytes=1", "echo;chunk_bytes=1", strings.Split(text, "")},
		{"chunk_bytes=10", "echo;chunk_bytes=10", []string{"write to a", "nn@example", ".com"}},
		{"splits", "echo;splits=5,15,100", []string{"write", " to ann@ex", "ample.com"}},
	} {
		t.Run("chat, streamed, "+b.name, func(t *testing.T) {
			body := map[string]any{"model": "gpt-4o", "stream": true, "messages": chatReq["messages"]}
			resp, err := do(t, c, ts, reqOpts{body: body, headers: map[string]string{BehaviorHeader: b.header}})
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			evs, err := readSSE(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			chunks, garbage, done := parseChunks(t, evs)
			if garbage != 0 || !done || !finished(chunks) {
				t.Fatalf("stream: %d garbage, done=%v, finished=%v", garbage, done, finished(chunks))
			}
			var got []string
			for _, ch := range chunks[:len(chunks)-1] {
				got = append(got, ch.Choices[0].Delta.Content)
			}
			if strings.Join(got, "|") != strings.Join(b.pieces, "|") {
				t.Errorf("pieces %q, want %q", got, b.pieces)
			}
		})
	}

	t.Run("completions and responses", func(t *testing.T) {
		_, data := mustDo(t, c, ts, reqOpts{path: "/v1/completions", body: map[string]any{"model": "m", "prompt": text}})
		if got := decode(t, data)["choices"].([]any)[0].(map[string]any)["text"]; got != text {
			t.Errorf("completions text %q", got)
		}
		_, data = mustDo(t, c, ts, reqOpts{path: "/v1/responses", body: map[string]any{"model": "m", "input": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}}}}}})
		out := decode(t, data)["output"].([]any)[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]
		if out != text {
			t.Errorf("responses text %q", out)
		}
	})

	t.Run("after without a fault", func(t *testing.T) {
		body := map[string]any{"model": "gpt-4o", "stream": true, "messages": chatReq["messages"]}
		resp, err := do(t, c, ts, reqOpts{body: body, headers: map[string]string{BehaviorHeader: "mode=echo;chunk_bytes=1;after=5"}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		evs, _ := readSSE(resp.Body)
		// after= only matters with cut, stall and garbage: the echo is whole.
		if chunks, _, done := parseChunks(t, evs); !done || contentOf(chunks) != text {
			t.Errorf("echo with after=5: done=%v content %q", done, contentOf(chunks))
		}
	})

	if _, err := ParseBehavior("echo;splits=5,3"); err == nil {
		t.Error("decreasing splits accepted")
	}
	if _, err := ParseBehavior("echo;chunk_bytes=-1"); err == nil {
		t.Error("negative chunk_bytes accepted")
	}
}

// TestCutAtAByteOffset: ChunkBytes cuts the mock's own answer too, and After counts its pieces.
func TestCutAtAByteOffset(t *testing.T) {
	_, ts, c := start(t, Options{Name: "a"})
	resp, err := do(t, c, ts, reqOpts{body: chatBody("gpt-4o", true), headers: map[string]string{BehaviorHeader: "cut;chunk_bytes=2;after=4"}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	evs, _ := readSSE(resp.Body)
	chunks, _, done := parseChunks(t, evs)
	if done || contentOf(chunks) != "Hello fr" {
		t.Errorf("cut after 4 pieces of 2 bytes: done=%v content %q, want %q", done, contentOf(chunks), "Hello fr")
	}
}
