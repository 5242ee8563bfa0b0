package mockprovider

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func prefilled(model, prefill string) map[string]any {
	b := chatBody(model, true)
	b["messages"] = append(b["messages"].([]any), map[string]any{"role": "assistant", "content": prefill})
	return b
}

// TestContinueMode: a prefilled request gets the rest of the answer after the prefill, as a model
// with prefill answers; without a prefill, the whole answer.
func TestContinueMode(t *testing.T) {
	mock, ts, c := start(t, Options{Name: "m"})
	const full = "Hello wörld, 中文 ok."
	for _, tc := range []struct {
		name, behavior, prefill, want string
	}{
		{"no prefill: the whole answer", "continue;text=" + full, "", full},
		{"after a word", "continue;text=" + full, "Hello", " wörld, 中文 ok."},
		{"mid-word", "continue;text=" + full, "Hel", "lo wörld, 中文 ok."},
		{"after a multi-byte character", "continue;text=" + full, "Hello wörld, 中", "文 ok."},
		{"trailing space kept", "continue;text=" + full, "Hello ", "wörld, 中文 ok."},
		{"trailing space re-emitted", "continue;reemit_space;text=" + full, "Hello ", " wörld, 中文 ok."},
		{"a prefill that does not begin the answer", "continue;text=" + full, "Goodbye", full},
		{"a cut that continues", "cut;prefill;after=1;splits=4;text=" + full, "Hello", " wö"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := chatBody("gpt-4o", true)
			if tc.prefill != "" {
				body = prefilled("gpt-4o", tc.prefill)
			}
			resp, err := do(t, c, ts, reqOpts{body: body, headers: map[string]string{BehaviorHeader: tc.behavior}})
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			evs, _ := readSSE(resp.Body)
			chunks, _, _ := parseChunks(t, evs)
			if got := contentOf(chunks); got != tc.want {
				t.Fatalf("content = %q, want %q", got, tc.want)
			}
		})
	}
	_ = mock
}

// TestContinueModeRefusals: Anthropic refuses a final assistant message ending in whitespace, and
// a model without prefill refuses any.
func TestContinueModeRefusals(t *testing.T) {
	_, ts, c := start(t, Options{Name: "m"})
	msgs := func(prefill string) map[string]any {
		return map[string]any{"model": "claude", "max_tokens": 100, "stream": true, "messages": []any{
			map[string]any{"role": "user", "content": "hi"}, map[string]any{"role": "assistant", "content": prefill}}}
	}
	resp, data := mustDo(t, c, ts, reqOpts{path: "/v1/messages", body: msgs("Hello "), headers: map[string]string{BehaviorHeader: "continue"}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "trailing whitespace") {
		t.Fatalf("trailing whitespace: %d %s", resp.StatusCode, data)
	}
	resp, data = mustDo(t, c, ts, reqOpts{path: "/v1/messages", body: msgs("Hello"), headers: map[string]string{BehaviorHeader: "continue"}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("prefill without whitespace: %d %s", resp.StatusCode, data)
	}
	resp, data = mustDo(t, c, ts, reqOpts{body: prefilled("gpt-4o", "Hello"), headers: map[string]string{BehaviorHeader: "continue;no_prefill"}})
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	_ = json.Unmarshal(data, &e)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Error.Message, "assistant message prefill") {
		t.Fatalf("no_prefill: %d %s", resp.StatusCode, data)
	}
}
