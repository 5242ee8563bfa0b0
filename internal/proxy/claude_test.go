package proxy

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/provider"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

const keyClaudeC = "sk-test-provider-c-openai-31aa"

// newClaudeRig is a proxy in front of two mock Anthropic channels (A, B) serving claude-sonnet,
// and a mock OpenAI channel (C) serving gpt-4o. claude-tiny (contextWindow 100) overflows to
// claude-sonnet; claude-blind is served only by a channel without vision, claude-notools only by
// one without tools.
func newClaudeRig(t *testing.T, claudePolicy ...string) (*rig, *mockprovider.Server) {
	t.Helper()
	return newClaudeRigOpts(t, nil, claudePolicy...)
}

// newClaudeRigOpts is newClaudeRig with the proxy's Options adjusted by opt (client keys, audit).
func newClaudeRigOpts(t *testing.T, opt func(*Options), claudePolicy ...string) (*rig, *mockprovider.Server) {
	t.Helper()
	r := &rig{t: t, clock: &fakeClock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}, logs: &testutil.SyncBuffer{}, accessLog: &testutil.SyncBuffer{}}
	r.A = mockprovider.New(mockprovider.Options{Name: "a", APIKey: keyA})
	r.B = mockprovider.New(mockprovider.Options{Name: "b", APIKey: keyB})
	C := mockprovider.New(mockprovider.Options{Name: "c", APIKey: keyClaudeC})
	as, bs, cs := httptest.NewServer(r.A), httptest.NewServer(r.B), httptest.NewServer(C)
	opts := Options{Clock: r.clock, Logger: slog.New(slog.NewJSONHandler(r.logs, nil)), AccessLog: r.accessLog, Replica: "test"}
	if opt != nil {
		opt(&opts)
	}
	r.srv = New(opts)
	r.api = httptest.NewServer(r.srv.Handler())
	r.admin = httptest.NewServer(r.srv.AdminHandler())
	r.dir = t.TempDir()
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: keys}
stringData: {a: %[4]s, b: %[5]s, c: %[6]s}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: claude-a}
spec:
  provider: anthropic
  baseURL: %[1]s/v1
  credentialsRef: {name: keys, key: a}
  models:
    - {name: claude-sonnet, upstreamModel: claude-sonnet-4-5-20250929, capabilities: {maxOutputTokens: 64000}}
    - {name: claude-tiny, capabilities: {contextWindow: 100, maxOutputTokens: 50}}
  failureDomain: {region: a}
  %[7]s
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: claude-b}
spec:
  provider: anthropic
  baseURL: %[2]s/v1
  credentialsRef: {name: keys, key: b}
  models:
    - {name: claude-sonnet}
    - {name: claude-blind, capabilities: {vision: false}}
    - {name: claude-notools, capabilities: {tools: false}}
  failureDomain: {region: b}
  %[7]s
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: gpt}
spec:
  provider: openai
  baseURL: %[3]s/v1
  credentialsRef: {name: keys, key: c}
  models: [{name: gpt-4o}]
  %[7]s
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: claude}
spec:
  models: [claude-sonnet]
  channels: [{name: claude-a}, {name: claude-b}]
  strategy: Priority
  rateLimit: {maxRetryAfterWait: 1s}
%[8]s
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: small}
spec:
  models: [claude-tiny, claude-blind, claude-notools]
  channels: [{name: claude-a}, {name: claude-b}]
  contextOverflowModels: [claude-sonnet]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: gpt}
spec:
  models: [gpt-4o]
  channels: [{name: gpt}]
`, as.URL, bs.URL, cs.URL, keyA, keyB, keyClaudeC, defaultTimeouts, indent(strings.Join(claudePolicy, "\n")))
	if err := os.WriteFile(filepath.Join(r.dir, "gateway.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	r.src = &source.FileSource{Path: r.dir, Getenv: func(string) string { return "" }}
	if err := r.src.Load(r.srv); err != nil {
		t.Fatalf("config does not load: %v", err)
	}
	t.Cleanup(func() {
		r.api.Close()
		r.admin.Close()
		r.A.Close()
		r.B.Close()
		C.Close()
		as.Close()
		bs.Close()
		cs.Close()
		r.srv.WaitProbes()
	})
	return r, C
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return m
}

func noKeys(t *testing.T, r reply) {
	t.Helper()
	for _, k := range []string{keyA, keyB, keyClaudeC} {
		if strings.Contains(r.body, k) || strings.Contains(fmt.Sprint(r.header), k) {
			t.Errorf("a provider key reached the client: %s", r.body)
		}
	}
}

// TestClaudeBehindOpenAI: an OpenAI chat request to a model on Anthropic channels is translated
// to the Messages API (x-api-key, anthropic-version, max_tokens from maxOutputTokens) and back.
func TestClaudeBehindOpenAI(t *testing.T) {
	r, _ := newClaudeRig(t)
	rep := r.post("/v1/chat/completions", `{"model":"claude-sonnet","messages":[{"role":"system","content":"terse"},{"role":"user","content":"hello"}]}`,
		"Authorization", "Bearer client-token")
	if rep.status != 200 {
		t.Fatalf("status %d: %s", rep.status, rep.body)
	}
	m := decode(t, rep.body)
	choice := m["choices"].([]any)[0].(map[string]any)
	if m["object"] != "chat.completion" || choice["finish_reason"] != "stop" || choice["message"].(map[string]any)["content"] != "Hello from a" {
		t.Errorf("answer: %s", rep.body)
	}
	h := r.A.LastHeaders()
	if h.Get("X-Api-Key") != keyA || h.Get("Anthropic-Version") != "2023-06-01" || h.Get("Authorization") != "" {
		t.Errorf("upstream headers: x-api-key %q, anthropic-version %q, authorization %q", h.Get("X-Api-Key"), h.Get("Anthropic-Version"), h.Get("Authorization"))
	}
	up := decode(t, string(r.A.LastBody()))
	if up["model"] != "claude-sonnet-4-5-20250929" || up["max_tokens"] != float64(64000) || up["system"] == nil {
		t.Errorf("upstream body: %s", r.A.LastBody())
	}

	rep = r.post("/v1/chat/completions", `{"model":"claude-sonnet","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`)
	if rep.status != 200 || !strings.HasSuffix(rep.body, "data: [DONE]\n\n") || !strings.Contains(rep.body, `"finish_reason":"stop"`) || !strings.Contains(rep.body, `"usage":{"completion_tokens":3`) {
		t.Errorf("stream: %d\n%s", rep.status, rep.body)
	}
	if strings.Contains(rep.body, "event:") {
		t.Errorf("Anthropic events reached an OpenAI client:\n%s", rep.body)
	}

	rep = r.post("/v1/chat/completions", `{"model":"claude-sonnet","n":2,"messages":[{"role":"user","content":"hello"}]}`)
	if rep.status != 400 || !strings.Contains(rep.body, `n: has no equivalent`) {
		t.Errorf("n=2: %d %s", rep.status, rep.body)
	}
}

// TestMessagesEndpoint: /v1/messages goes to Anthropic channels as it is (the client's
// anthropic-version, never its key), to OpenAI channels translated, and answers errors in
// Anthropic's shape.
func TestMessagesEndpoint(t *testing.T) {
	r, C := newClaudeRig(t)
	body := `{"model":"claude-sonnet","max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`
	rep := r.post("/v1/messages", body, "X-Api-Key", "client-key", "Anthropic-Version", "2023-01-01", "Anthropic-Beta", "tools-2024")
	if rep.status != 200 {
		t.Fatalf("status %d: %s", rep.status, rep.body)
	}
	m := decode(t, rep.body)
	if m["type"] != "message" || m["stop_reason"] != "end_turn" {
		t.Errorf("answer: %s", rep.body)
	}
	h := r.A.LastHeaders()
	if h.Get("X-Api-Key") != keyA || h.Get("Anthropic-Version") != "2023-01-01" || h.Get("Anthropic-Beta") != "tools-2024" {
		t.Errorf("upstream headers: %v", h)
	}
	if !strings.Contains(string(r.A.LastBody()), `"max_tokens":100`) || !strings.Contains(string(r.A.LastBody()), `claude-sonnet-4-5-20250929`) {
		t.Errorf("upstream body: %s", r.A.LastBody())
	}

	before := r.metrics()
	rep = r.post("/v1/messages", strings.Replace(body, `"max_tokens"`, `"stream":true,"max_tokens"`, 1))
	for _, typ := range []string{"prompt", "completion"} {
		// A streamed answer counts its tokens as a whole one does (message_start's input, the final
		// message_delta's output): they are what client token limits and the audit log count.
		if after := r.metrics(); modelTokens(t, after, "claude-a", "claude-sonnet", typ) <= modelTokens(t, before, "claude-a", "claude-sonnet", typ) {
			t.Errorf("stream: switchyard_tokens_total{type=%q} did not grow:\n%s", typ, grepLines(after, "tokens_total"))
		}
	}
	if rep.status != 200 || !strings.Contains(rep.body, "event: message_start") || !strings.HasSuffix(rep.body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") || strings.Contains(rep.body, "[DONE]") {
		t.Errorf("stream: %d\n%s", rep.status, rep.body)
	}

	// gpt-4o is on an OpenAI channel: translated both ways.
	rep = r.post("/v1/messages", strings.Replace(body, "claude-sonnet", "gpt-4o", 1), "X-Api-Key", "client-key")
	m = decode(t, rep.body)
	if rep.status != 200 || m["type"] != "message" || m["content"].([]any)[0].(map[string]any)["text"] != "Hello from c" {
		t.Errorf("translated: %d %s", rep.status, rep.body)
	}
	if h := C.LastHeaders(); h.Get("Authorization") != "Bearer "+keyClaudeC || h.Get("X-Api-Key") != "" || h.Get("Anthropic-Version") != "" {
		t.Errorf("OpenAI channel headers: %v", h)
	}
	rep = r.post("/v1/messages", strings.Replace(strings.Replace(body, "claude-sonnet", "gpt-4o", 1), `"max_tokens"`, `"stream":true,"max_tokens"`, 1))
	if rep.status != 200 || !strings.Contains(rep.body, "event: message_start") || !strings.Contains(rep.body, `"text":"Hello"`) ||
		!strings.HasSuffix(rep.body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") || strings.Contains(rep.body, "[DONE]") {
		t.Errorf("translated stream: %d\n%s", rep.status, rep.body)
	}

	rep = r.post("/v1/messages", strings.Replace(body, "claude-sonnet", "nope", 1))
	if e := decode(t, rep.body); rep.status != 404 || e["type"] != "error" || e["error"].(map[string]any)["type"] != "not_found_error" {
		t.Errorf("unknown model: %d %s", rep.status, rep.body)
	}
	rep = r.post("/v1/messages", `{"model":"gpt-4o","max_tokens":10,"top_k":3,"messages":[{"role":"user","content":"hello"}]}`)
	if e := decode(t, rep.body); rep.status != 400 || e["type"] != "error" || !strings.Contains(rep.body, "top_k") {
		t.Errorf("top_k to an OpenAI channel: %d %s", rep.status, rep.body)
	}

	rep = r.post("/v1/messages/count_tokens", `{"model":"claude-sonnet","messages":[{"role":"user","content":"hello"}]}`)
	if m := decode(t, rep.body); rep.status != 200 || m["input_tokens"] == nil || rep.header.Get("X-Switchyard-Token-Count") != "" {
		t.Errorf("count_tokens: %d %v %s", rep.status, rep.header, rep.body)
	}
	// On a model no anthropic channel serves, the gateway's estimate (TestCountTokensOnOpenAIChannels).
	rep = r.post("/v1/messages/count_tokens", `{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]}`)
	if m := decode(t, rep.body); rep.status != 200 || m["input_tokens"] == nil || rep.header.Get("X-Switchyard-Token-Count") == "" {
		t.Errorf("count_tokens on an OpenAI channel: %d %s", rep.status, rep.body)
	}
}

// TestClaudeErrorClasses: overloaded (529), rate limits, a mid-stream error event before any
// content, credentials and billing failures all fail over to the other channel, unseen by the
// client; the provider's text for credentials never reaches it.
func TestClaudeErrorClasses(t *testing.T) {
	for _, c := range []struct {
		name     string
		behavior mockprovider.Behavior
		stream   bool
	}{
		{"overloaded 529", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 529}, false},
		{"rate limit", mockprovider.Behavior{Mode: mockprovider.ModeRateLimit, RetryAfter: 30}, false},
		{"credentials", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 401, Message: "invalid x-api-key " + keyA}, false},
		{"billing", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 402, Message: "credit balance too low"}, false},
		{"error event before content", mockprovider.Behavior{Mode: mockprovider.ModeErrorEvent, After: 0}, true},
		{"reset", mockprovider.Behavior{Mode: mockprovider.ModeReset}, true},
		{"server error on a stream", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 500}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, _ := newClaudeRig(t)
			r.A.SetDefault(c.behavior)
			for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
				body := fmt.Sprintf(`{"model":"claude-sonnet","stream":%v,"max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`, c.stream)
				rep := r.post(path, body)
				if rep.status != 200 || rep.header.Get("X-Switchyard-Channel") != "claude-b" || strings.Contains(rep.body, "error") {
					t.Errorf("%s: %d via %s\n%s", path, rep.status, rep.header.Get("X-Switchyard-Channel"), rep.body)
				}
				noKeys(t, rep)
			}
		})
	}
}

// TestClaudeStreamCutAfterContent: an error event after content reached the client ends the
// stream with an in-band error in the client's API, never as a complete answer.
func TestClaudeStreamCutAfterContent(t *testing.T) {
	r, _ := newClaudeRig(t, "streamRecovery: Error") // recovery (recovery_test.go) would finish the answer
	r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeErrorEvent, After: 2})
	rep := r.post("/v1/messages", `{"model":"claude-sonnet","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`)
	if !strings.Contains(rep.body, `"text":"Hello"`) || !strings.HasSuffix(rep.body, "\n\n") || !strings.Contains(rep.body, "event: error\ndata: {") || strings.Contains(rep.body, "message_stop") {
		t.Errorf("messages client:\n%s", rep.body)
	}
	rep = r.post("/v1/chat/completions", `{"model":"claude-sonnet","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	if !strings.Contains(rep.body, `"stream_interrupted"`) || strings.Contains(rep.body, "[DONE]") || strings.Contains(rep.body, "event:") {
		t.Errorf("chat client:\n%s", rep.body)
	}

	// One malformed event is passed over, not fatal: the answer completes on the same channel.
	r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeGarbage, After: 1})
	rep = r.post("/v1/messages", `{"model":"claude-sonnet","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`)
	if rep.header.Get("X-Switchyard-Channel") != "claude-a" || strings.Contains(rep.body, "{not json") || !strings.HasSuffix(rep.body, "data: {\"type\":\"message_stop\"}\n\n") {
		t.Errorf("garbage event: via %s\n%s", rep.header.Get("X-Switchyard-Channel"), rep.body)
	}
}

// TestCapabilityRouting: images go only to channels with vision (a 400 naming it when none has),
// and a prompt certainly over a model's contextWindow goes to the context-overflow model before
// any attempt.
func TestCapabilityRouting(t *testing.T) {
	r, _ := newClaudeRig(t)
	img := `{"model":"claude-blind","messages":[{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`
	rep := r.post("/v1/chat/completions", img)
	if rep.status != 400 || !strings.Contains(rep.body, "vision") || r.B.Total() != 0 {
		t.Errorf("image to a model without vision: %d %s (B got %d)", rep.status, rep.body, r.B.Total())
	}
	rep = r.post("/v1/chat/completions", strings.Replace(img, "claude-blind", "claude-sonnet", 1))
	if rep.status != 200 {
		t.Errorf("image to a model with vision: %d %s", rep.status, rep.body)
	}
	// A json_object format goes to Claude as a forced tool: not to a model without tools.
	toolless := `{"model":"claude-notools","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`
	before := r.B.Total()
	if rep = r.post("/v1/chat/completions", toolless); rep.status != 400 || !strings.Contains(rep.body, "tools capability") || r.B.Total() != before {
		t.Errorf("json_object to a model without tools: %d %s (B got %d)", rep.status, rep.body, r.B.Total()-before)
	}
	if rep = r.post("/v1/chat/completions", strings.Replace(toolless, "claude-notools", "claude-blind", 1)); rep.status != 200 {
		t.Errorf("json_object to a model with tools: %d %s", rep.status, rep.body)
	}
	// The same for the Responses API's input_image parts, and its prompt's size.
	respImg := `{"model":"claude-blind","input":[{"role":"user","content":[{"type":"input_text","text":"what?"},{"type":"input_image","image_url":"https://example.com/a.png"}]}]}`
	before = r.B.Total()
	if rep = r.post("/v1/responses", respImg); rep.status != 400 || !strings.Contains(rep.body, "vision") || r.B.Total() != before {
		t.Errorf("Responses image to a model without vision: %d %s (B got %d)", rep.status, rep.body, r.B.Total()-before)
	}

	long := strings.Repeat("lorem ipsum ", 200) // 2,400 bytes: at least 300 tokens, over claude-tiny's 100
	rep = r.post("/v1/chat/completions", fmt.Sprintf(`{"model":"claude-tiny","messages":[{"role":"user","content":%q}]}`, long))
	if rep.status != 200 || rep.header.Get("X-Switchyard-Model") != "claude-sonnet" || r.A.Requests("claude-tiny") != 0 {
		t.Errorf("overflow: %d model %s, claude-tiny asked %d times\n%s", rep.status, rep.header.Get("X-Switchyard-Model"), r.A.Requests("claude-tiny"), rep.body)
	}
	tinyAsked := r.A.Requests("claude-tiny")
	rep = r.post("/v1/responses", fmt.Sprintf(`{"model":"claude-tiny","input":%q}`, long))
	if rep.status != 200 || rep.header.Get("X-Switchyard-Model") != "claude-sonnet" || r.A.Requests("claude-tiny") != tinyAsked {
		t.Errorf("Responses overflow: %d model %s\n%s", rep.status, rep.header.Get("X-Switchyard-Model"), rep.body)
	}
	rep = r.post("/v1/chat/completions", `{"model":"claude-tiny","messages":[{"role":"user","content":"short"}]}`)
	if rep.status != 200 || rep.header.Get("X-Switchyard-Model") != "claude-tiny" {
		t.Errorf("short prompt: %d model %s", rep.status, rep.header.Get("X-Switchyard-Model"))
	}
}

// TestContextOverflowFromAnthropic: Anthropic's "prompt is too long" is context_length_exceeded.
func TestContextOverflowFromAnthropic(t *testing.T) {
	r, _ := newClaudeRig(t)
	r.A.SetBehavior("claude-tiny", mockprovider.Behavior{Mode: mockprovider.ModeContextLength})
	r.B.SetBehavior("claude-tiny", mockprovider.Behavior{Mode: mockprovider.ModeContextLength})
	rep := r.post("/v1/chat/completions", `{"model":"claude-tiny","messages":[{"role":"user","content":"short"}]}`)
	if rep.status != 200 || rep.header.Get("X-Switchyard-Model") != "claude-sonnet" {
		t.Errorf("%d model %s\n%s", rep.status, rep.header.Get("X-Switchyard-Model"), rep.body)
	}
}

func TestProviderErrorTable(t *testing.T) {
	for _, c := range []struct {
		provider string
		status   int
		body     string
		outcome  health.Outcome
		code     string
		matched  bool
	}{
		{"openai", 429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, health.OutcomeServerError, "", true},
		{"azure-openai", 429, `{"error":{"code":"insufficient_quota","message":"quota"}}`, health.OutcomeServerError, "", true},
		{"openai", 429, `{"error":{"code":"rate_limit_exceeded","message":"slow down"}}`, 0, "", false},
		{"anthropic", 402, `{"type":"error","error":{"type":"billing_error","message":"credit balance"}}`, health.OutcomeServerError, "", true},
		{"anthropic", 402, `Payment Required`, health.OutcomeServerError, "", true},
		{"anthropic", 504, `{"type":"error","error":{"type":"timeout_error","message":"Request timed out"}}`, health.OutcomeTimeout, "", true},
		{"anthropic", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`, health.OutcomeClientError, "context_length_exceeded", true},
		{"anthropic", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 0 < 1"}}`, health.OutcomeClientError, "invalid_request_error", true},
		// Where the classifier agrees with the status, the status's rule writes the failure.
		{"anthropic", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}`, 0, "", false},
		{"anthropic", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 0, "", false},
		{"anthropic", 502, `<html>Bad Gateway</html>`, 0, "", false},
	} {
		ad, err := newAdapter(&routing.Channel{Provider: c.provider}, "")
		if err != nil {
			t.Fatal(err)
		}
		got := ad.ClassifyError(c.status, http.Header{}, []byte(c.body))
		byStatus := provider.ClassifyStatus(c.status, http.Header{}, []byte(c.body), time.Now())
		if matched := !reflect.DeepEqual(got, byStatus); matched != c.matched {
			t.Errorf("%s %d %s: %+v, by its status alone %v (want %v)", c.provider, c.status, c.body, got, !matched, !c.matched)
			continue
		}
		a := &attempt{channel: &routing.Channel{Provider: c.provider}}
		r := failureResult(a, &got, c.status, http.Header{})
		if c.matched && (r.outcome != c.outcome || r.errCode != c.code) {
			t.Errorf("%s %d %s: %s %q", c.provider, c.status, c.body, r.outcome, r.errCode)
		}
	}
}

// TestClaudeProbes: an ejected Anthropic channel is probed in its own wire format (the probe's
// chat request translated to a one-token Messages request) and comes back.
func TestClaudeProbes(t *testing.T) {
	r, _ := newClaudeRig(t)
	r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 529})
	for range 5 {
		if rep := r.post("/v1/chat/completions", chat("claude-sonnet", false)); rep.status != 200 {
			t.Fatalf("failover: %d %s", rep.status, rep.body)
		}
	}
	r.step(0)
	if p := r.phase("claude-a", "claude-sonnet"); p != "Ejected" {
		t.Fatalf("after 5 overloaded answers claude-a is %s, want Ejected", p)
	}
	r.A.SetDefault(mockprovider.Behavior{})
	r.A.Reset()
	r.step(5 * time.Minute)
	for range 5 {
		r.step(10 * time.Second)
	}
	if p := r.phase("claude-a", "claude-sonnet"); p != "RampingUp" && p != "Healthy" {
		t.Errorf("after its probes claude-a is %s, want RampingUp", p)
	}
	if r.A.Requests("claude-sonnet-4-5-20250929") < 3 {
		t.Errorf("claude-a got %d probes", r.A.Requests("claude-sonnet-4-5-20250929"))
	}
	probe := decode(t, string(r.A.LastBody()))
	if probe["max_tokens"] != float64(1) || probe["messages"] == nil {
		t.Errorf("probe body: %s", r.A.LastBody())
	}
	if h := r.A.LastHeaders(); h.Get("X-Api-Key") != keyA {
		t.Errorf("probe headers: %v", h)
	}
}

// TestClaudePII: masking applies before the translation, and the originals come back into the
// translated answer, streamed or not; /v1/messages refuses a masking policy rather than skip it.
func TestClaudePII(t *testing.T) {
	r, _ := newClaudeRig(t, piiMask)
	r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeEcho, ChunkBytes: 3})
	const email = "jane.doe@example.com"
	for _, stream := range []bool{false, true} {
		rep := r.post("/v1/chat/completions", fmt.Sprintf(`{"model":"claude-sonnet","stream":%v,"messages":[{"role":"user","content":"mail %s now"}]}`, stream, email))
		if rep.status != 200 || strings.Contains(string(r.A.LastBody()), email) {
			t.Errorf("stream=%v: %d, upstream saw %s", stream, rep.status, r.A.LastBody())
		}
		text := rep.body
		if stream {
			text = ""
			for _, line := range strings.Split(rep.body, "\n") {
				var c struct {
					Choices []struct {
						Delta struct {
							Content string `json:"content"`
						} `json:"delta"`
					} `json:"choices"`
				}
				if d, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(d), &c) == nil && len(c.Choices) > 0 {
					text += c.Choices[0].Delta.Content
				}
			}
		}
		if !strings.Contains(text, email) {
			t.Errorf("stream=%v: the original is not restored: %s", stream, rep.body)
		}
	}
	rep := r.post("/v1/messages", `{"model":"claude-sonnet","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	if rep.status != 400 || !strings.Contains(rep.body, "masks personal data") || !strings.Contains(rep.body, `"type":"error"`) {
		t.Errorf("/v1/messages with masking: %d %s", rep.status, rep.body)
	}
}
