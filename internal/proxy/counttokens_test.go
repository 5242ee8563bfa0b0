package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCountTokensOnOpenAIChannels: /v1/messages/count_tokens for a model only OpenAI-compatible
// channels serve is answered by the gateway (Claude Code calls it whatever the model): an
// estimate that grows with the text, the images, the tools and the turns, said to be one in its
// header, and no channel is asked. A body without messages is a 400 in Anthropic's shape.
func TestCountTokensOnOpenAIChannels(t *testing.T) {
	r := newRig(t, rigConfig{})
	count := func(body string) int {
		t.Helper()
		rep := r.post("/v1/messages/count_tokens", body)
		var out struct {
			InputTokens int `json:"input_tokens"`
		}
		if rep.status != 200 || json.Unmarshal([]byte(rep.body), &out) != nil || !strings.HasPrefix(rep.header.Get("X-Switchyard-Token-Count"), "estimate") {
			t.Fatalf("count_tokens %s: %d %v %s", body, rep.status, rep.header, rep.body)
		}
		return out.InputTokens
	}
	hi := count(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	long := count(`{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("the quick brown fox jumps over the lazy dog ", 100) + `"}]}`)
	if hi < 1 || hi > 10 || long < 900 || long > 1100 {
		t.Errorf("hi counts %d, 100 pangrams (900 words) %d", hi, long)
	}
	withSystem := count(`{"model":"gpt-4o","system":"You are terse.","messages":[{"role":"user","content":"hi"}]}`)
	turns := count(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"lookup","input":{"query":"cats"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"three cats"}]}]}`)
	image := count(`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"text","text":"hi"}]}]}`)
	tools := count(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"lookup","description":"Look something up in the catalogue","input_schema":{"type":"object","properties":{"query":{"type":"string"}}}}]}`)
	for name, n := range map[string]int{"a system prompt": withSystem, "tool turns": turns, "an image": image, "a tool": tools} {
		if n <= hi {
			t.Errorf("%s counts %d, no more than the bare %d", name, n, hi)
		}
	}
	if image < hi+tokensPerImage {
		t.Errorf("an image counts %d, want %d more than the bare %d", image, tokensPerImage, hi)
	}
	if n := r.A.Total() + r.B.Total(); n != 0 {
		t.Errorf("the channels were asked %d times for a count the gateway makes", n)
	}
	if rep := r.post("/v1/messages/count_tokens", `{"model":"gpt-4o"}`); rep.status != 400 || !strings.Contains(rep.body, `"type":"error"`) || !strings.Contains(rep.body, "messages") {
		t.Errorf("no messages: %d %s", rep.status, rep.body)
	}
}
