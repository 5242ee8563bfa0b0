package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/audit"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
)

// messagesClientKey is a client key of the Messages tests, long enough for any key policy.
const messagesClientKey = "sk-client-messages-team-4f1d9b2e7a0c6358"

// tinyClientKey is the key of a client that may call claude-tiny alone.
const tinyClientKey = "sk-client-messages-tiny-0e6b1f7d93a24c85"

// messagesClients is one GatewayClient that may call every model, keyed by messagesClientKey,
// and one that may call claude-tiny alone, keyed by tinyClientKey.
const messagesClients = `apiVersion: v1
kind: Secret
metadata: {name: tiny-keys}
stringData: {k: ` + tinyClientKey + `}
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: tiny-team}
spec:
  keysSecretRef: {name: tiny-keys}
  models: [claude-tiny]
---
apiVersion: v1
kind: Secret
metadata: {name: messages-keys}
stringData: {k: ` + messagesClientKey + `}
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: messages-team}
spec:
  keysSecretRef: {name: messages-keys}
  models: ["*"]
`

// anthropicErrorOf decodes an error body in Anthropic's shape and returns error.type ("" and a
// test error when the body is in another shape).
func anthropicErrorOf(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string  `json:"type"`
			Message string  `json:"message"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Type != "error" || e.Error.Type == "" || e.Error.Message == "" || e.Error.Code != nil {
		t.Errorf("not Anthropic's error shape: %s", body)
		return ""
	}
	return e.Error.Type
}

// The gateway's own errors on /v1/messages and /v1/messages/count_tokens come in Anthropic's
// shape with client keys required and the audit log on, both of which wrap the ResponseWriter;
// the 503 of a request no channel could answer is overloaded_error. Each request gets its audit
// line.
func TestMessagesErrorsInAnthropicShapeWithKeysAndAudit(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "audit.log")
	log, err := audit.Open(audit.Options{Path: logPath})
	if err != nil {
		t.Fatal(err)
	}
	r, C := newClaudeRigOpts(t, func(o *Options) {
		o.RequireClientKey = true
		o.Audit = log
		o.BodyReadTimeout = 300 * time.Millisecond
		o.MaxBodyBytes = 4096
	}, piiMask)
	r.writeClients(messagesClients)
	C.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503})
	key := []string{"X-Api-Key", messagesClientKey}
	msg := func(model, content string) string {
		return fmt.Sprintf(`{"model":%q,"max_tokens":10,"messages":[{"role":"user","content":%s}]}`, model, content)
	}
	image := `[{"type":"text","text":"what?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]`
	cases := []struct {
		name, path, body string
		headers          []string
		status           int
		typ              string
	}{
		{"no key", "/v1/messages", msg("claude-tiny", `"hi"`), nil, 401, "authentication_error"},
		{"no key, count_tokens", "/v1/messages/count_tokens", msg("claude-tiny", `"hi"`), nil, 401, "authentication_error"},
		{"wrong key", "/v1/messages", msg("claude-tiny", `"hi"`), []string{"X-Api-Key", messagesClientKey + "x"}, 401, "authentication_error"},
		{"unknown model", "/v1/messages", msg("nope", `"hi"`), key, 404, "not_found_error"},
		{"unknown model, count_tokens", "/v1/messages/count_tokens", msg("nope", `"hi"`), key, 404, "not_found_error"},
		{"malformed body", "/v1/messages", `{"model":`, key, 400, "invalid_request_error"},
		{"malformed body, count_tokens", "/v1/messages/count_tokens", `{"model":`, key, 400, "invalid_request_error"},
		{"no channel can serve it", "/v1/messages", msg("claude-blind", image), key, 400, "invalid_request_error"},
		{"pii_unsupported", "/v1/messages", msg("claude-sonnet", `"hi"`), key, 400, "invalid_request_error"},
		{"every channel failed", "/v1/messages", msg("gpt-4o", `"hi"`), key, 503, "overloaded_error"},
		{"model not allowed", "/v1/messages", msg("claude-sonnet", `"hi"`), []string{"X-Api-Key", tinyClientKey}, 403, "permission_error"},
		{"model not allowed, count_tokens", "/v1/messages/count_tokens", msg("claude-sonnet", `"hi"`), []string{"X-Api-Key", tinyClientKey}, 403, "permission_error"},
		{"body too large", "/v1/messages", msg("claude-tiny", fmt.Sprintf("%q", strings.Repeat("x", 5000))), key, 413, "request_too_large"},
	}
	for _, tc := range cases {
		rep := r.post(tc.path, tc.body, tc.headers...)
		if rep.status != tc.status {
			t.Errorf("%s: status %d, want %d: %s", tc.name, rep.status, tc.status, rep.body)
			continue
		}
		if got := anthropicErrorOf(t, rep.body); got != tc.typ {
			t.Errorf("%s: error.type %q, want %q: %s", tc.name, got, tc.typ, rep.body)
		}
	}
	if rep := r.post("/v1/messages", msg("claude-sonnet", `"hi"`), key...); !strings.Contains(rep.body, "masks personal data") {
		t.Errorf("pii_unsupported: %s", rep.body)
	}

	// 408: the body does not arrive within the body read timeout.
	c := rawConn(t, r, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nX-Api-Key: "+messagesClientKey+
		"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":")
	resp := readStatus(t, c)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("stalled body: status %d, want 408", resp.StatusCode)
	} else if got := anthropicErrorOf(t, string(b)); got != "invalid_request_error" {
		t.Errorf("stalled body: error.type %q: %s", got, b)
	}

	// 405: the gateway answers before the client layer, in the same shape.
	req, _ := http.NewRequest(http.MethodGet, r.api.URL+"/v1/messages", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Error(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || anthropicErrorOf(t, string(b)) != "invalid_request_error" {
			t.Errorf("GET /v1/messages: %d %s", resp.StatusCode, b)
		}
	}

	// The OpenAI endpoints keep OpenAI's shape on the same gateway.
	if rep := r.post("/v1/chat/completions", chat("nope", false), "Authorization", "Bearer "+messagesClientKey); rep.status != 404 || errorCode(t, rep.body) != "model_not_found" {
		t.Errorf("chat completions: %d %s", rep.status, rep.body)
	}

	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if n, want := len(strings.Split(strings.TrimSpace(string(raw)), "\n")), len(cases)+3+1; n != want {
		t.Errorf("%d audit lines, want %d (one per request and the end record Close writes):\n%s", n, want, raw)
	}
}

// With client keys the proxy asks for a stream's usage on the client's behalf and drops the
// usage chunk the client did not ask for. A stream translated from an Anthropic channel carries
// that chunk in the same event as its finish_reason chunk (message_delta): the finish_reason
// still reaches the client (the OpenAI SDKs' stream helpers fail without it), the usage does not.
func TestClientKeyTranslatedStreamKeepsItsFinishReason(t *testing.T) {
	r, _ := newClaudeRigOpts(t, func(o *Options) { o.RequireClientKey = true })
	r.writeClients(messagesClients)
	auth := []string{"Authorization", "Bearer " + messagesClientKey}
	rep := r.post("/v1/chat/completions", `{"model":"claude-sonnet","stream":true,"messages":[{"role":"user","content":"hello"}]}`, auth...)
	if rep.status != 200 || !strings.Contains(rep.body, `"finish_reason":"stop"`) || strings.Contains(rep.body, `"usage"`) ||
		!strings.HasSuffix(rep.body, "data: [DONE]\n\n") {
		t.Errorf("stream without include_usage: %d\n%s", rep.status, rep.body)
	}
	rep = r.post("/v1/chat/completions", `{"model":"claude-sonnet","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`, auth...)
	if rep.status != 200 || !strings.Contains(rep.body, `"finish_reason":"stop"`) || !strings.Contains(rep.body, `"usage"`) {
		t.Errorf("stream with include_usage: %d\n%s", rep.status, rep.body)
	}
}
