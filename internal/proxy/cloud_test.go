package proxy

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

// The cloud channels' credentials: tests assert they never reach a client.
const (
	cloudAccessKey = "AKIDCLOUDTEST"
	cloudSecret    = "cloud-test-secret-4b1d"
	cloudEmail     = "switchyard@my-project.iam.gserviceaccount.com"
	bedrockModel   = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
	vertexModel    = "claude-sonnet-4-5@20250929"
)

var (
	cloudKeyOnce sync.Once
	cloudKey     *rsa.PrivateKey
)

func cloudRSAKey(t *testing.T) *rsa.PrivateKey {
	cloudKeyOnce.Do(func() {
		var err error
		if cloudKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			t.Fatal(err)
		}
	})
	return cloudKey
}

// cloudRig is a proxy in front of a mock Anthropic (anth), a mock Bedrock that verifies every
// SigV4 signature, and a mock Vertex that checks every bearer token against its own token
// endpoint. claude-sonnet fails over anthropic → bedrock → vertex; claude-b is bedrock first,
// claude-v vertex first.
type cloudRig struct {
	*rig
	anth    *mockprovider.Server
	bedrock *mockprovider.Bedrock
	vertex  *mockprovider.Vertex
	render  func(saKeyID string) string
}

func newCloudRig(t *testing.T) *cloudRig {
	t.Helper()
	r := &rig{t: t, clock: &fakeClock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}, logs: &testutil.SyncBuffer{}, accessLog: &testutil.SyncBuffer{}}
	c := &cloudRig{rig: r}
	c.anth = mockprovider.New(mockprovider.Options{Name: "anthropic", APIKey: keyA})
	c.bedrock = mockprovider.NewBedrock(mockprovider.BedrockOptions{Name: "bedrock", Region: "eu-west-1",
		Credentials: []aws.Credentials{{AccessKeyID: cloudAccessKey, SecretAccessKey: cloudSecret}}})
	key := cloudRSAKey(t)
	c.vertex = mockprovider.NewVertex(mockprovider.VertexOptions{Name: "vertex", Project: "my-project", Location: "us-east5",
		ServiceAccounts: map[string]*rsa.PublicKey{cloudEmail: &key.PublicKey}})
	as, bs, vs := httptest.NewServer(c.anth), httptest.NewServer(c.bedrock), httptest.NewServer(c.vertex)
	r.srv = New(Options{Clock: r.clock, Logger: slog.New(slog.NewJSONHandler(r.logs, nil)), AccessLog: r.accessLog, Replica: "test"})
	r.api = httptest.NewServer(r.srv.Handler())
	r.admin = httptest.NewServer(r.srv.AdminHandler())
	r.dir = t.TempDir()
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	c.render = func(saKeyID string) string {
		sa, _ := json.Marshal(map[string]string{"type": "service_account", "project_id": "my-project", "private_key_id": saKeyID,
			"client_email": cloudEmail, "private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "token_uri": vs.URL + "/token"})
		return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: keys}
stringData: {a: %[4]s}
---
apiVersion: v1
kind: Secret
metadata: {name: aws}
stringData: {accessKeyId: %[5]s, secretAccessKey: %[6]s}
---
apiVersion: v1
kind: Secret
metadata: {name: gcp}
stringData:
  serviceAccountJSON: '%[7]s'
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: claude-anthropic}
spec:
  provider: anthropic
  baseURL: %[1]s/v1
  credentialsRef: {name: keys, key: a}
  models: [{name: claude-sonnet, upstreamModel: claude-sonnet-4-5-20250929}]
  failureDomain: {region: a}
  %[8]s
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: claude-bedrock}
spec:
  provider: bedrock
  region: eu-west-1
  baseURL: %[2]s
  credentialsRef: {name: aws}
  models:
    - {name: claude-sonnet, upstreamModel: %[9]s}
    - {name: claude-b, upstreamModel: %[9]s}
    - {name: claude-v, upstreamModel: %[9]s}
  failureDomain: {region: b}
  %[8]s
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: claude-vertex}
spec:
  provider: vertex
  region: us-east5
  project: my-project
  baseURL: %[3]s/v1
  credentialsRef: {name: gcp}
  models:
    - {name: claude-sonnet, upstreamModel: %[10]s}
    - {name: claude-b, upstreamModel: %[10]s}
    - {name: claude-v, upstreamModel: %[10]s}
  failureDomain: {region: c}
  %[8]s
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: claude}
spec:
  models: [claude-sonnet]
  channels: [{name: claude-anthropic}, {name: claude-bedrock}, {name: claude-vertex}]
  strategy: Priority
  rateLimit: {maxRetryAfterWait: 1s}
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: bedrock-first}
spec:
  models: [claude-b]
  channels: [{name: claude-bedrock}, {name: claude-vertex}]
  contextOverflowModels: [claude-sonnet]
  strategy: Priority
  rateLimit: {maxRetryAfterWait: 1s}
  streamRecovery: Error  # TestCloudStreamCut: the in-band error; recovery is recovery_test.go's
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: vertex-first}
spec:
  models: [claude-v]
  channels: [{name: claude-vertex}, {name: claude-bedrock}]
  strategy: Priority
  rateLimit: {maxRetryAfterWait: 1s}
`, as.URL, bs.URL, vs.URL, keyA, cloudAccessKey, cloudSecret, sa, defaultTimeouts, bedrockModel, vertexModel)
	}
	c.writeConfig("k1")
	r.src = &source.FileSource{Path: r.dir, Getenv: func(string) string { return "" }}
	if err := r.src.Load(r.srv); err != nil {
		t.Fatalf("config does not load: %v", err)
	}
	t.Cleanup(func() {
		r.api.Close()
		r.admin.Close()
		c.anth.Close()
		c.bedrock.Close()
		c.vertex.Close()
		as.Close()
		bs.Close()
		vs.Close()
		r.srv.WaitProbes()
	})
	return c
}

func (c *cloudRig) writeConfig(saKeyID string) {
	c.t.Helper()
	if err := os.WriteFile(filepath.Join(c.dir, "gateway.yaml"), []byte(c.render(saKeyID)), 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// noCloudSecrets: no credential, and none of the provider's text about the account, reached the client.
func noCloudSecrets(t *testing.T, r reply) {
	t.Helper()
	for _, s := range []string{keyA, cloudSecret, "PRIVATE KEY", "ya29.", "leaky", "arn:aws", "iam.gserviceaccount.com"} {
		if strings.Contains(r.body, s) || strings.Contains(fmt.Sprint(r.header), s) {
			t.Errorf("%q reached the client: %s", s, r.body)
		}
	}
}

// chatText is the assistant text of a chat completion, streamed or not.
func chatText(t *testing.T, body string, stream bool) string {
	t.Helper()
	if !stream {
		var m struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(body), &m) != nil || len(m.Choices) == 0 {
			t.Fatalf("not a chat completion: %s", body)
		}
		return m.Choices[0].Message.Content
	}
	text := ""
	for _, line := range strings.Split(body, "\n") {
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
	return text
}

// TestCloudChatCompletions: OpenAI chat completions to a model on a bedrock or a vertex channel,
// JSON and streamed, text and tools, are translated to the Messages API, carried by the channel's
// adapter (signed with SigV4, authorized with a token from the service account) and translated
// back.
func TestCloudChatCompletions(t *testing.T) {
	c := newCloudRig(t)
	for _, tc := range []struct{ model, channel, name string }{{"claude-b", "claude-bedrock", "bedrock"}, {"claude-v", "claude-vertex", "vertex"}} {
		t.Run(tc.channel, func(t *testing.T) {
			for _, stream := range []bool{false, true} {
				rep := c.post("/v1/chat/completions", fmt.Sprintf(`{"model":%q,"stream":%v,"stream_options":{"include_usage":%v},"messages":[{"role":"system","content":"terse"},{"role":"user","content":"hello"}]}`, tc.model, stream, stream),
					"Authorization", "Bearer client-token", "Anthropic-Beta", "context-1m-2025-08-07")
				if rep.status != 200 || rep.header.Get("X-Switchyard-Channel") != tc.channel || rep.header.Get("X-Switchyard-Attempts") != "1" {
					t.Fatalf("stream=%v: %d via %s\n%s", stream, rep.status, rep.header.Get("X-Switchyard-Channel"), rep.body)
				}
				if got := chatText(t, rep.body, stream); got != "Hello from "+tc.name {
					t.Errorf("stream=%v: text %q\n%s", stream, got, rep.body)
				}
				if stream && (!strings.HasSuffix(rep.body, "data: [DONE]\n\n") || !strings.Contains(rep.body, `"finish_reason":"stop"`) ||
					!strings.Contains(rep.body, `"usage":{`) || strings.Contains(rep.body, "event:") || strings.Contains(rep.header.Get("Content-Type"), "amazon")) {
					t.Errorf("stream: %s\n%s", rep.header.Get("Content-Type"), rep.body)
				}
				noCloudSecrets(t, rep)
			}
			// Tools: a tool_use answer is OpenAI tool_calls, streamed or not.
			for _, stream := range []bool{false, true} {
				rep := c.post("/v1/chat/completions", fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"weather in Almaty"}],
					"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}]}`, tc.model, stream))
				if rep.status != 200 || !strings.Contains(rep.body, `"finish_reason":"tool_calls"`) || !strings.Contains(rep.body, `get_weather`) {
					t.Errorf("tools stream=%v: %d\n%s", stream, rep.status, rep.body)
				}
			}
		})
	}
	// What went upstream: the Messages body in the cloud's form, the client's headers left behind.
	b := decode(t, string(c.bedrock.LastBody()))
	if b["anthropic_version"] != "bedrock-2023-05-31" || b["model"] != nil || b["stream"] != nil || b["max_tokens"] != float64(4096) || b["tools"] == nil {
		t.Errorf("bedrock body: %s", c.bedrock.LastBody())
	}
	if h := c.bedrock.LastHeaders(); !strings.HasPrefix(h.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+cloudAccessKey+"/") || h.Get("X-Request-Id") == "" || h.Get("Anthropic-Version") != "" {
		t.Errorf("bedrock headers: %v", h)
	}
	if c.bedrock.Refused() != 0 {
		t.Errorf("the Bedrock mock refused %d signatures", c.bedrock.Refused())
	}
	v := decode(t, string(c.vertex.LastBody()))
	if v["anthropic_version"] != "vertex-2023-10-16" || v["model"] != nil || v["stream"] != true {
		t.Errorf("vertex body: %s", c.vertex.LastBody())
	}
	if h := c.vertex.LastHeaders(); !strings.HasPrefix(h.Get("Authorization"), "Bearer ya29.mock-") {
		t.Errorf("vertex headers: %v", h)
	}
	if n := c.vertex.TokensIssued(); n != 1 {
		t.Errorf("vertex: %d tokens issued for one channel, want 1 (cached)", n)
	}
}

// TestCloudMessages: /v1/messages to bedrock and vertex channels goes without translation (the
// Messages body and events as they are), the client's betas in the cloud's own way, never its key.
func TestCloudMessages(t *testing.T) {
	c := newCloudRig(t)
	body := `{"model":"%s","max_tokens":100,"stream":%v,"metadata":{"user_id":"u-1"},"top_k":5,"messages":[{"role":"user","content":"hello"}]}`
	for _, tc := range []struct{ model, channel string }{{"claude-b", "claude-bedrock"}, {"claude-v", "claude-vertex"}} {
		rep := c.post("/v1/messages", fmt.Sprintf(body, tc.model, false), "X-Api-Key", "client-key", "Anthropic-Version", "2023-06-01", "Anthropic-Beta", "tools-2024, context-1m")
		m := decode(t, rep.body)
		if rep.status != 200 || m["type"] != "message" || m["stop_reason"] != "end_turn" || rep.header.Get("X-Switchyard-Channel") != tc.channel {
			t.Errorf("%s: %d %s", tc.channel, rep.status, rep.body)
		}
		before := c.metrics()
		rep = c.post("/v1/messages", fmt.Sprintf(body, tc.model, true), "X-Api-Key", "client-key", "Anthropic-Beta", "tools-2024, context-1m")
		// A streamed answer counts its tokens as a whole one does: the input from message_start,
		// the output from the final message_delta.
		after := c.metrics()
		for _, typ := range []string{"prompt", "completion"} {
			if modelTokens(t, after, tc.channel, tc.model, typ) <= modelTokens(t, before, tc.channel, tc.model, typ) {
				t.Errorf("%s stream: switchyard_tokens_total{type=%q} did not grow:\n%s", tc.channel, typ, grepLines(after, "tokens_total"))
			}
		}
		if rep.status != 200 || !strings.HasPrefix(rep.body, "event: message_start\n") || !strings.Contains(rep.body, `"text":"Hello"`) ||
			!strings.HasSuffix(rep.body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") || strings.Contains(rep.body, "invocationMetrics") ||
			!strings.HasPrefix(rep.header.Get("Content-Type"), "text/event-stream") {
			t.Errorf("%s stream: %d %s\n%s", tc.channel, rep.status, rep.header.Get("Content-Type"), rep.body)
		}
		noCloudSecrets(t, rep)
	}
	b := decode(t, string(c.bedrock.LastBody()))
	if b["top_k"] != float64(5) || b["metadata"] == nil || fmt.Sprint(b["anthropic_beta"]) != "[tools-2024 context-1m]" {
		t.Errorf("bedrock body: %s", c.bedrock.LastBody())
	}
	if h := c.bedrock.LastHeaders(); h.Get("X-Api-Key") != "" || h.Get("Anthropic-Beta") != "" {
		t.Errorf("bedrock headers: %v", h)
	}
	if h := c.vertex.LastHeaders(); h.Get("X-Api-Key") != "" || h.Get("Anthropic-Beta") != "tools-2024,context-1m" {
		t.Errorf("vertex headers: %v", h)
	}
	// count_tokens is the Anthropic API's alone: for a model only on clouds the gateway
	// estimates it, and the cloud is not asked.
	rep := c.post("/v1/messages/count_tokens", `{"model":"claude-b","messages":[{"role":"user","content":"hello"}]}`)
	if rep.status != 200 || !strings.Contains(rep.body, `"input_tokens":`) || rep.header.Get("X-Switchyard-Token-Count") == "" || c.bedrock.Requests(bedrockModel) != 2 {
		t.Errorf("count_tokens: %d %s", rep.status, rep.body)
	}
}

// TestCloudErrorClasses: each cloud error class fails over to the other cloud, unseen by the
// client, and counts as its class; the provider's text about the account never reaches a client.
func TestCloudErrorClasses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		model    string // claude-b: bedrock first; claude-v: vertex first
		behavior mockprovider.CloudBehavior
		stream   bool
		outcome  string
	}{
		{"bedrock ThrottlingException", "claude-b", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeRateLimit, RetryAfter: 30}}, false, "rate_limited"},
		{"bedrock AccessDeniedException", "claude-b", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 403}}, false, "server_error"},
		{"bedrock ServiceUnavailableException", "claude-b", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503}}, true, "server_error"},
		{"bedrock throttlingException as the first event", "claude-b", mockprovider.CloudBehavior{StreamError: "throttlingException"}, true, "rate_limited"},
		{"bedrock modelStreamErrorException before content", "claude-b", mockprovider.CloudBehavior{StreamError: "modelStreamErrorException"}, true, "server_error"},
		{"bedrock reset", "claude-b", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeReset}}, true, "connection_error"},
		{"vertex RESOURCE_EXHAUSTED", "claude-v", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeRateLimit, RetryAfter: 30}}, false, "rate_limited"},
		{"vertex overloaded 529", "claude-v", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 529}}, true, "server_error"},
		{"vertex PERMISSION_DENIED", "claude-v", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 403}}, false, "server_error"},
		{"vertex overloaded_error event before content", "claude-v", mockprovider.CloudBehavior{StreamError: "overloaded_error"}, true, "server_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCloudRig(t)
			first, second := "claude-bedrock", "claude-vertex"
			if tc.model == "claude-v" {
				first, second = second, first
				c.vertex.SetBehavior("", tc.behavior)
			} else {
				c.bedrock.SetBehavior("", tc.behavior)
			}
			for i, path := range []string{"/v1/chat/completions", "/v1/messages"} {
				rep := c.post(path, fmt.Sprintf(`{"model":%q,"stream":%v,"max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`, tc.model, tc.stream))
				attempts := "2"
				if i > 0 && tc.behavior.RetryAfter > 0 {
					attempts = "1" // the channel asked for 30 s: no request goes to it meanwhile
				}
				if i > 0 && tc.outcome == "rate_limited" && tc.behavior.RetryAfter == 0 && rep.header.Get("X-Switchyard-Attempts") == "1" {
					attempts = "1" // a rate-limited channel's traffic share is cut: the next request may skip it
				}
				if rep.status != 200 || rep.header.Get("X-Switchyard-Channel") != second || rep.header.Get("X-Switchyard-Attempts") != attempts || strings.Contains(rep.body, "error") {
					t.Errorf("%s: %d via %s (attempts %s)\n%s", path, rep.status, rep.header.Get("X-Switchyard-Channel"), rep.header.Get("X-Switchyard-Attempts"), rep.body)
				}
				noCloudSecrets(t, rep)
			}
			lines := accessLines(t, c.accessLog.String())
			want := 4
			if tc.outcome == "rate_limited" && (tc.behavior.RetryAfter > 0 || len(lines) == 3) {
				want = 3
			}
			if len(lines) != want || lines[0]["channel"] != first || lines[0]["outcome"] != tc.outcome || lines[1]["outcome"] != "success" {
				t.Errorf("access log: %v", lines)
			}
			if tc.outcome == "rate_limited" && tc.behavior.RetryAfter > 0 {
				if ch := c.channel(first, tc.model); ch["retryAfterUntil"] == nil {
					t.Errorf("Retry-After not honoured: %v", ch)
				}
			}
		})
	}
}

func accessLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		if l != "" {
			out = append(out, decode(t, l))
		}
	}
	return out
}

// TestCloudCredentialsWithheld: when every channel refuses the channel's credentials, the 503
// names the error class, never the provider's text (account, role and service-account names).
func TestCloudCredentialsWithheld(t *testing.T) {
	c := newCloudRig(t)
	c.bedrock.SetBehavior("", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 403}})
	c.vertex.SetBehavior("", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 403}})
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		for _, model := range []string{"claude-b", "claude-v"} {
			rep := c.post(path, fmt.Sprintf(`{"model":%q,"max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`, model))
			if rep.status != 503 || (!strings.Contains(rep.body, "AccessDeniedException") && !strings.Contains(rep.body, "PERMISSION_DENIED")) {
				t.Errorf("%s %s: %d %s", path, model, rep.status, rep.body)
			}
			noCloudSecrets(t, rep)
		}
	}
	if !strings.Contains(c.accessLog.String(), "AccessDeniedException") {
		t.Errorf("the access log does not say what happened:\n%s", c.accessLog)
	}
}

// TestCloudStreamCut: a modelStreamErrorException after content reached the client is a cut
// stream: the client's in-band error (its text the gateway's, not the provider's), never a
// complete answer, and stream_cut against the channel.
func TestCloudStreamCut(t *testing.T) {
	c := newCloudRig(t)
	c.bedrock.SetBehavior("", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{After: 2, Message: "leaky internal detail"}, StreamError: "modelStreamErrorException"})
	rep := c.post("/v1/chat/completions", `{"model":"claude-b","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
	if !strings.Contains(rep.body, `"content":"Hello"`) || !strings.Contains(rep.body, `"stream_interrupted"`) || strings.Contains(rep.body, "[DONE]") || strings.Contains(rep.body, "event:") {
		t.Errorf("chat client:\n%s", rep.body)
	}
	noCloudSecrets(t, rep)
	rep = c.post("/v1/messages", `{"model":"claude-b","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`)
	if !strings.Contains(rep.body, `"text":"Hello"`) || !strings.Contains(rep.body, "event: error\ndata: {") || strings.Contains(rep.body, "message_stop") {
		t.Errorf("messages client:\n%s", rep.body)
	}
	noCloudSecrets(t, rep)
	for _, l := range accessLines(t, c.accessLog.String()) {
		if l["outcome"] != "stream_cut" || l["channel"] != "claude-bedrock" || !strings.Contains(fmt.Sprint(l["error"]), "ModelStreamErrorException") {
			t.Errorf("access log: %v", l)
		}
	}

	// A stream closed without message_stop is cut too; one garbage chunk is passed over.
	c.bedrock.SetBehavior("", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeGarbage, After: 1}})
	rep = c.post("/v1/messages", `{"model":"claude-b","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`)
	if rep.header.Get("X-Switchyard-Channel") != "claude-bedrock" || strings.Contains(rep.body, "not json") || !strings.HasSuffix(rep.body, "data: {\"type\":\"message_stop\"}\n\n") {
		t.Errorf("garbage chunk: via %s\n%s", rep.header.Get("X-Switchyard-Channel"), rep.body)
	}
}

// TestCloudFailoverChain: anthropic overloaded, bedrock unavailable: vertex answers, and the
// client sees a plain answer, JSON or streamed, on both APIs.
func TestCloudFailoverChain(t *testing.T) {
	c := newCloudRig(t)
	c.anth.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 529})
	c.bedrock.SetBehavior("", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503}})
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		for _, stream := range []bool{false, true} {
			rep := c.post(path, fmt.Sprintf(`{"model":"claude-sonnet","stream":%v,"max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`, stream))
			if rep.status != 200 || rep.header.Get("X-Switchyard-Channel") != "claude-vertex" || rep.header.Get("X-Switchyard-Attempts") != "3" || strings.Contains(rep.body, "error") || !strings.Contains(rep.body, "vertex") {
				t.Errorf("%s stream=%v: %d via %s\n%s", path, stream, rep.status, rep.header.Get("X-Switchyard-Channel"), rep.body)
			}
		}
	}
}

// TestCloudClientErrors: a request the cloud refuses as the caller's goes back in the client's
// error shape with the provider's message; Bedrock's "input is too long" is a context overflow.
func TestCloudClientErrors(t *testing.T) {
	c := newCloudRig(t)
	c.bedrock.SetBehavior("", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeContentPolicy}})
	rep := c.post("/v1/chat/completions", chat("claude-b", false))
	if e := decode(t, rep.body); rep.status != 400 || e["error"] == nil || !strings.Contains(rep.body, "content filter") || c.vertex.Requests(vertexModel) != 0 {
		t.Errorf("chat client: %d %s", rep.status, rep.body)
	}
	rep = c.post("/v1/messages", `{"model":"claude-b","max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`)
	if e := decode(t, rep.body); rep.status != 400 || e["type"] != "error" || e["error"].(map[string]any)["type"] != "invalid_request_error" || !strings.Contains(rep.body, "content filter") {
		t.Errorf("messages client: %d %s", rep.status, rep.body)
	}
	c.bedrock.SetBehavior("", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeContextLength}})
	rep = c.post("/v1/chat/completions", chat("claude-b", false))
	if rep.status != 200 || rep.header.Get("X-Switchyard-Model") != "claude-sonnet" || c.vertex.Requests(vertexModel) != 0 {
		t.Errorf("context overflow: %d model %s\n%s", rep.status, rep.header.Get("X-Switchyard-Model"), rep.body)
	}
}

// TestCloudProbes: an ejected bedrock channel is probed through its adapter (signed, a one-token
// Messages request) and comes back; a reload that leaves a channel as it was keeps its adapter
// (the Vertex token survives), one that changes its credentials builds a new one.
func TestCloudProbes(t *testing.T) {
	c := newCloudRig(t)
	c.bedrock.SetBehavior("", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 500}})
	for range 5 {
		if rep := c.post("/v1/chat/completions", chat("claude-b", false)); rep.status != 200 {
			t.Fatalf("failover: %d %s", rep.status, rep.body)
		}
	}
	c.step(0)
	if p := c.phase("claude-bedrock", "claude-b"); p != "Ejected" {
		t.Fatalf("after 5 server errors claude-bedrock is %s, want Ejected", p)
	}
	c.bedrock.SetBehavior("", mockprovider.CloudBehavior{})
	before := c.bedrock.Requests(bedrockModel)
	c.step(5 * time.Minute)
	for range 5 {
		c.step(10 * time.Second)
	}
	if p := c.phase("claude-bedrock", "claude-b"); p != "RampingUp" && p != "Healthy" {
		t.Errorf("after its probes claude-bedrock is %s, want RampingUp", p)
	}
	if n := c.bedrock.Requests(bedrockModel) - before; n < 2 || c.bedrock.Refused() != 0 {
		t.Errorf("claude-bedrock got %d probes, %d refused signatures", n, c.bedrock.Refused())
	}
	if probe := decode(t, string(c.bedrock.LastBody())); probe["max_tokens"] != float64(1) || probe["anthropic_version"] != "bedrock-2023-05-31" {
		t.Errorf("probe body: %s", c.bedrock.LastBody())
	}

	if rep := c.post("/v1/chat/completions", chat("claude-v", false)); rep.status != 200 || c.vertex.TokensIssued() != 1 {
		t.Fatalf("vertex: %d, %d tokens", rep.status, c.vertex.TokensIssued())
	}
	before1 := c.srv.cfg.Load().adapters["claude-vertex"]
	c.writeConfig("k1") // the same file again
	if err := c.src.Load(c.srv); err != nil {
		t.Fatal(err)
	}
	if c.srv.cfg.Load().adapters["claude-vertex"] != before1 {
		t.Error("an unchanged channel got a new adapter on reload")
	}
	if rep := c.post("/v1/chat/completions", chat("claude-v", false)); rep.status != 200 || c.vertex.TokensIssued() != 1 {
		t.Errorf("after a reload: %d, %d tokens issued (want the cached one)", rep.status, c.vertex.TokensIssued())
	}
	c.writeConfig("k2") // another service-account key
	if err := c.src.Load(c.srv); err != nil {
		t.Fatal(err)
	}
	if rep := c.post("/v1/chat/completions", chat("claude-v", false)); rep.status != 200 || c.vertex.TokensIssued() != 2 {
		t.Errorf("after new credentials: %d, %d tokens issued (want a new one)", rep.status, c.vertex.TokensIssued())
	}
}

// TestCloudStreamRecovery: a stream that breaks on one cloud after text reached the client is
// finished on the other with the text sent as the assistant prefill (trimmed of trailing
// whitespace, which Anthropic's models refuse on every cloud): the client reads the whole answer
// once, on both APIs, for a cut and for a Bedrock exception mid-stream.
func TestCloudStreamRecovery(t *testing.T) {
	const full = "Hello from the clouds, twice."
	cut := mockprovider.Behavior{Mode: mockprovider.ModeCut, After: 2, Splits: "6,11", Text: full}
	cont := mockprovider.Behavior{Mode: mockprovider.ModeContinue, Text: full}
	for _, messages := range []bool{false, true} {
		path, body := "/v1/chat/completions", `{"model":"%s","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hello"}]}`
		if messages {
			path = "/v1/messages"
		}
		t.Run(fmt.Sprintf("vertex cut, bedrock continues, messages client %v", messages), func(t *testing.T) {
			c := newCloudRig(t)
			c.vertex.SetBehavior("", mockprovider.CloudBehavior{Behavior: cut})
			c.bedrock.SetBehavior("", mockprovider.CloudBehavior{Behavior: cont})
			rep := c.post(path, fmt.Sprintf(body, "claude-v"))
			readStream(t, rep, messages).mustBe(t, full)
			if p := prefillOf(t, c.bedrock.LastBody()); p != "Hello from" {
				t.Fatalf("bedrock's prefill %q, want the text sent without its trailing space", p)
			}
			noCloudSecrets(t, rep)
		})
		t.Run(fmt.Sprintf("bedrock exception mid-stream, vertex continues, messages client %v", messages), func(t *testing.T) {
			c := newCloudRig(t)
			c.anth.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 529})
			c.bedrock.SetBehavior("", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{After: 1, Splits: "6", Text: full, Message: "leaky internal detail"},
				StreamError: "modelStreamErrorException"})
			c.vertex.SetBehavior("", mockprovider.CloudBehavior{Behavior: cont})
			rep := c.post(path, fmt.Sprintf(body, "claude-sonnet"))
			readStream(t, rep, messages).mustBe(t, full)
			if p := prefillOf(t, c.vertex.LastBody()); p != "Hello" {
				t.Fatalf("vertex's prefill %q, want the text sent without its trailing space", p)
			}
			var outcomes []string
			for _, l := range accessLines(t, c.accessLog.String()) {
				outcomes = append(outcomes, fmt.Sprintf("%v:%v:%v", l["channel"], l["outcome"], l["continuation"]))
			}
			if got := strings.Join(outcomes, " "); got != "claude-anthropic:server_error:<nil> claude-bedrock:stream_cut:<nil> claude-vertex:success:1" {
				t.Fatalf("access log: %s", got)
			}
			noCloudSecrets(t, rep)
		})
	}
}
