package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchyard-io/switchyard/internal/audit"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy/clientapi"
	"github.com/switchyard-io/switchyard/internal/proxy/clients"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Client keys of the tests: they must never reach a provider, a log, a metric or an answer.
const (
	clientKeyOne = "sk-client-team-one-5b1e0c94d7a2f6e18b3c"
	clientKeyTwo = "sk-client-team-one-rotated-88a03f1c6e9d"
	clientKeyOff = "sk-client-disabled-7c22b5e90a4f1d38"
	clientKeyOld = "sk-client-expired-0d9f61b8c3e2a57d4"
)

func clientsManifest(secretData, extra string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: team-keys}
stringData: {%s}
---
apiVersion: v1
kind: Secret
metadata: {name: other-keys}
stringData: {off: %s, old: %s}
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: team}
spec:
  keysSecretRef: {name: team-keys}
  models: ["gpt-4o*"]
%s
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: off}
spec:
  keysSecretRef: {name: off-keys}
  models: ["*"]
  disabled: true
---
apiVersion: v1
kind: Secret
metadata: {name: off-keys}
stringData: {k: %s}
---
apiVersion: v1
kind: Secret
metadata: {name: old-keys}
stringData: {k: %s}
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: old}
spec:
  keysSecretRef: {name: old-keys}
  models: ["*"]
  expiresAt: "2026-11-01T00:00:00Z"
`, secretData, "unused-1", "unused-2", indent(extra), clientKeyOff, clientKeyOld)
}

// writeClients puts the GatewayClients beside the rig's manifests and reloads.
func (r *rig) writeClients(manifest string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, "clients.yaml"), []byte(manifest), 0o600); err != nil {
		r.t.Fatal(err)
	}
	if err := r.src.Load(r.srv); err != nil {
		r.t.Fatalf("clients do not load: %v", err)
	}
}

func (r *rig) adminDoc() map[string]any {
	r.t.Helper()
	resp, err := http.Get(r.admin.URL + "/admin/v1/channels")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		r.t.Fatal(err)
	}
	return doc
}

func errorCode(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Error struct {
			Code string `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("not an OpenAI error: %s", body)
	}
	return e.Error.Code
}

// Open without clients, closed with them: every status code of the client layer, each in
// OpenAI's error shape, and the key never anywhere but the request.
func TestClientKeys(t *testing.T) {
	r := newRig(t, rigConfig{})
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false)); got.status != 200 {
		t.Fatalf("open proxy: %d %s", got.status, got.body)
	}
	if auth := r.adminDoc()["clientAuth"].(map[string]any); auth["required"] != false || !strings.Contains(auth["reason"].(string), "anyone") {
		t.Fatalf("admin clientAuth %v", auth)
	}
	if v := testutil.ToFloat64(r.srv.clients.metrics.required); v != 0 {
		t.Fatalf("switchyard_client_auth_required %v, want 0", v)
	}
	if !strings.Contains(r.logs.String(), "Serving without client keys") {
		t.Fatal("the open mode is not logged")
	}

	r.writeClients(clientsManifest("one: "+clientKeyOne, ""))
	if v := testutil.ToFloat64(r.srv.clients.metrics.required); v != 1 {
		t.Fatalf("switchyard_client_auth_required %v, want 1", v)
	}
	for _, tc := range []struct {
		name    string
		headers []string
		model   string
		status  int
		code    string
	}{
		{"no key", nil, "gpt-4o", 401, "missing_api_key"},
		{"unknown key", []string{"Authorization", "Bearer sk-not-a-client"}, "gpt-4o", 401, "invalid_api_key"},
		{"basic auth is no key", []string{"Authorization", "Basic " + clientKeyOne}, "gpt-4o", 401, "missing_api_key"},
		{"bearer", []string{"Authorization", "Bearer " + clientKeyOne}, "gpt-4o", 200, ""},
		{"azure api-key", []string{"api-key", clientKeyOne}, "gpt-4o-mini", 200, ""},
		{"anthropic x-api-key", []string{"x-api-key", clientKeyOne}, "gpt-4o", 200, ""},
		{"model not allowed", []string{"Authorization", "Bearer " + clientKeyOne}, "gpt-4.1", 403, "model_not_allowed"},
		{"disabled client", []string{"Authorization", "Bearer " + clientKeyOff}, "gpt-4o", 403, "client_disabled"},
		{"expired client", []string{"Authorization", "Bearer " + clientKeyOld}, "gpt-4o", 403, "client_expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := r.post("/v1/chat/completions", chat(tc.model, false), tc.headers...)
			if got.status != tc.status {
				t.Fatalf("status %d, want %d: %s", got.status, tc.status, got.body)
			}
			if tc.code != "" && errorCode(t, got.body) != tc.code {
				t.Fatalf("code %q, want %q: %s", errorCode(t, got.body), tc.code, got.body)
			}
			if strings.Contains(got.body, "sk-client") {
				t.Fatalf("the answer echoes a key: %s", got.body)
			}
		})
	}
	for _, m := range []*mockprovider.Server{r.A, r.B} {
		if h := m.LastHeaders(); h != nil {
			for k, vv := range h {
				if strings.Contains(strings.Join(vv, " "), "sk-client") {
					t.Fatalf("the client key went upstream in %s", k)
				}
			}
		}
	}
	metrics, _ := r.srv.Registry().Gather()
	b, _ := json.Marshal(metrics)
	for _, where := range []string{r.logs.String(), r.accessLog.String(), string(b)} {
		if strings.Contains(where, "sk-client") {
			t.Fatal("a client key is in the logs or the metrics")
		}
	}
	if v := testutil.ToFloat64(r.srv.clients.metrics.requests.WithLabelValues("", "team", "200")); v != 3 {
		t.Fatalf("switchyard_client_requests_total{client=team,code=200} = %v, want 3", v)
	}
	if v := testutil.ToFloat64(r.srv.clients.metrics.authFailures.WithLabelValues("unknown_key")); v != 1 {
		t.Fatalf("auth failures %v", v)
	}
}

// Rotation: a key added to the Secret works at the next reload, the old one keeps working until
// it is removed, and then it is refused. No restart, and the limiter's minute goes on.
func TestClientKeyRotation(t *testing.T) {
	r := newRig(t, rigConfig{})
	bearer := func(k string) []string { return []string{"Authorization", "Bearer " + k} }
	r.writeClients(clientsManifest("one: "+clientKeyOne, ""))
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false), bearer(clientKeyTwo)...); got.status != 401 {
		t.Fatalf("new key before it is added: %d", got.status)
	}
	r.writeClients(clientsManifest("one: "+clientKeyOne+", two: "+clientKeyTwo, ""))
	for _, k := range []string{clientKeyOne, clientKeyTwo} {
		if got := r.post("/v1/chat/completions", chat("gpt-4o", false), bearer(k)...); got.status != 200 {
			t.Fatalf("during rotation: %d %s", got.status, got.body)
		}
	}
	r.writeClients(clientsManifest("two: "+clientKeyTwo, ""))
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false), bearer(clientKeyOne)...); got.status != 401 {
		t.Fatalf("old key after removal: %d", got.status)
	}
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false), bearer(clientKeyTwo)...); got.status != 200 {
		t.Fatalf("new key after rotation: %d", got.status)
	}
}

// --require-client-key: closed even with no GatewayClient.
func TestRequireClientKeyWithoutClients(t *testing.T) {
	r := newRigOpts(t, rigConfig{}, func(o *Options) { o.RequireClientKey = true })
	got := r.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status != 401 || errorCode(t, got.body) != "missing_api_key" {
		t.Fatalf("%d %s", got.status, got.body)
	}
	if auth := r.adminDoc()["clientAuth"].(map[string]any); auth["required"] != true {
		t.Fatalf("admin clientAuth %v", auth)
	}
}

// The request limit: 429 with Retry-After at the limit, admitted again as the minute moves on.
func TestClientRequestLimit(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.writeClients(clientsManifest("one: "+clientKeyOne, "limits: {requestsPerMinute: 3}"))
	auth := []string{"Authorization", "Bearer " + clientKeyOne}
	for i := 0; i < 3; i++ {
		if got := r.post("/v1/chat/completions", chat("gpt-4o", false), auth...); got.status != 200 {
			t.Fatalf("request %d: %d", i, got.status)
		}
	}
	got := r.post("/v1/chat/completions", chat("gpt-4o", false), auth...)
	if got.status != 429 || errorCode(t, got.body) != "client_rate_limit_exceeded" || got.header.Get("Retry-After") != "60" {
		t.Fatalf("at the limit: %d Retry-After %q %s", got.status, got.header.Get("Retry-After"), got.body)
	}
	r.clock.Advance(61 * time.Second)
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false), auth...); got.status != 200 {
		t.Fatalf("a minute later: %d", got.status)
	}
	if v := testutil.ToFloat64(r.srv.clients.metrics.limited.WithLabelValues("", "team", clients.LimitRequestsPerMinute)); v != 1 {
		t.Fatalf("limited %v", v)
	}
}

// Token limits count the providers' usage, streams included: the proxy asks for the usage of a
// stream and drops the usage event from the answer when the client did not ask for it.
func TestClientTokenLimitCountsStreams(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.A.SetDefault(mockprovider.Behavior{SeparateUsage: true})
	r.writeClients(clientsManifest("one: "+clientKeyOne, "limits: {tokensPerMinute: 20, tokensPerDay: 30}"))
	auth := []string{"Authorization", "Bearer " + clientKeyOne}
	got := r.post("/v1/chat/completions", chat("gpt-4o", true), auth...)
	if got.status != 200 || !strings.Contains(got.body, "[DONE]") {
		t.Fatalf("stream: %d %s", got.status, got.body)
	}
	if strings.Contains(got.body, `"prompt_tokens"`) {
		t.Fatalf("the usage event the client did not ask for reached it: %s", got.body)
	}
	if !strings.Contains(string(r.A.LastBody()), `"include_usage":true`) {
		t.Fatalf("the upstream was not asked for the usage: %s", r.A.LastBody())
	}
	e, _ := r.srv.cfg.Load().auth.Lookup(clientKeyOne)
	_, _, streamed, _ := e.Limiter.Usage(r.clock.Now())
	if streamed == 0 {
		t.Fatal("the stream's tokens were not counted")
	}
	// A client that asks gets the usage event.
	asked := `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	if got := r.post("/v1/chat/completions", asked, auth...); got.status != 200 || !strings.Contains(got.body, `"prompt_tokens"`) {
		t.Fatalf("asked for usage: %d %s", got.status, got.body)
	}
	// Under 20 tokens a minute, one or two requests pass; then 429 until the minute moves.
	n := 0
	for ; n < 10; n++ {
		if got := r.post("/v1/chat/completions", chat("gpt-4o", false), auth...); got.status == 429 {
			if errorCode(t, got.body) != "client_rate_limit_exceeded" || got.header.Get("Retry-After") == "" {
				t.Fatalf("%s %v", got.body, got.header)
			}
			break
		}
	}
	if n == 10 {
		t.Fatal("the token limit never applied")
	}
	// The day's limit holds after the minute has passed, until the next UTC day.
	r.clock.Advance(2 * time.Minute)
	for i := 0; i < 5; i++ {
		if got := r.post("/v1/chat/completions", chat("gpt-4o", false), auth...); got.status == 429 {
			ra := got.header.Get("Retry-After")
			if ra == "" || ra == "60" {
				t.Fatalf("day limit Retry-After %q", ra)
			}
			r.clock.Advance(24 * time.Hour)
			if got := r.post("/v1/chat/completions", chat("gpt-4o", false), auth...); got.status != 200 {
				t.Fatalf("next day: %d", got.status)
			}
			return
		}
	}
	t.Fatal("the day limit never applied")
}

// Two proxy replicas behind one address, each enforcing half of the client's limits: the total
// admitted stays within 10% of the limit, for requests and for tokens.
func TestClientLimitsAcrossTwoReplicas(t *testing.T) {
	for _, tc := range []struct {
		name, limits string
		limit        int64
		measure      func(status int, tokens int64) int64
	}{
		{"requests", "limits: {requestsPerMinute: 100}", 100, func(status int, _ int64) int64 {
			if status == 200 {
				return 1
			}
			return 0
		}},
		{"tokens", "limits: {tokensPerMinute: 600}", 600, func(_ int, tokens int64) int64 { return tokens }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigConfig{})
			r.writeClients(clientsManifest("one: "+clientKeyOne, tc.limits))
			tbl := *r.srv.cfg.Load().table
			tbl.ProxyReplicas = 2
			second := New(Options{Clock: r.clock, Replica: "second"})
			r.srv.Apply(&tbl, "test")
			second.Apply(&tbl, "test")
			api2 := httptest.NewServer(second.Handler())
			defer api2.Close()
			urls := []string{r.api.URL, api2.URL}
			var total atomic.Int64
			for i := 0; i < 400; i++ {
				req, _ := http.NewRequest(http.MethodPost, urls[i%2]+"/v1/chat/completions", strings.NewReader(chat("gpt-4o", false)))
				req.Header.Set("Authorization", "Bearer "+clientKeyOne)
				resp, err := http.DefaultClient.Do(req.WithContext(context.Background()))
				if err != nil {
					t.Fatal(err)
				}
				var body struct {
					Usage struct {
						Total int64 `json:"total_tokens"`
					} `json:"usage"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&body)
				resp.Body.Close()
				total.Add(tc.measure(resp.StatusCode, body.Usage.Total))
			}
			got := total.Load()
			if lo, hi := tc.limit*9/10, tc.limit*11/10; got < lo || got > hi {
				t.Fatalf("admitted %d across two replicas, want within 10%% of %d", got, tc.limit)
			}
			t.Logf("admitted %d of a limit of %d across two replicas", got, tc.limit)
		})
	}
}

// The error shape follows the endpoint: Anthropic's on /v1/messages.
func TestEndpointErrorShape(t *testing.T) {
	w := httptest.NewRecorder()
	clientapi.WriteError(w, clientapi.ShapeFor("/messages"), 429, "rate_limit_error", "client_rate_limit_exceeded", "slow down", 2*time.Second)
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Type != "error" || e.Error.Type != "rate_limit_error" || e.Error.Message != "slow down" {
		t.Fatalf("anthropic shape: %s", w.Body)
	}
	if w.Code != 429 || w.Header().Get("Retry-After") != "2" {
		t.Fatalf("%d %v", w.Code, w.Header())
	}
	w = httptest.NewRecorder()
	clientapi.WriteError(w, clientapi.ShapeFor("/chat/completions"), 401, "authentication_error", "invalid_api_key", "no", 0)
	if errorCode(t, w.Body.String()) != "invalid_api_key" {
		t.Fatal(w.Body.String())
	}
}

// The audit log: one line per request with who, which key (by hash prefix), where it went and
// what it cost, never the prompt or the answer, chained; audit verify accepts it.
func TestAuditLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	log, err := audit.Open(audit.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	r := newRigOpts(t, rigConfig{}, func(o *Options) { o.Audit = log })
	r.writeClients(clientsManifest("one: "+clientKeyOne, ""))
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503})
	secret := `{"model":"gpt-4o","messages":[{"role":"user","content":"the secret plan is tangerine"}]}`
	if got := r.post("/v1/chat/completions", secret, "Authorization", "Bearer "+clientKeyOne); got.status != 200 {
		t.Fatalf("%d %s", got.status, got.body)
	}
	if got := r.post("/v1/chat/completions", secret); got.status != 401 {
		t.Fatalf("%d", got.status)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if strings.Contains(string(raw), "tangerine") || strings.Contains(string(raw), "sk-client") {
		t.Fatalf("the audit log holds prompt text or a key: %s", raw)
	}
	ls := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(ls) != 3 || !strings.Contains(ls[2], `"record":"end"`) {
		t.Fatalf("%d lines, want 2 and the end record: %s", len(ls), raw)
	}
	var first, second audit.Line
	_ = json.Unmarshal([]byte(ls[0]), &first)
	_ = json.Unmarshal([]byte(ls[1]), &second)
	if first.Client != "team" || first.KeyID != routing.KeyHash(clientKeyOne)[:8] || first.Model != "gpt-4o" || first.Policy != "chat" ||
		first.Status != 200 || len(first.Attempts) != 2 || first.Attempts[0].Status != 503 || first.Attempts[1].Outcome != "success" ||
		first.Tokens.Prompt == 0 || first.Tokens.Completion == 0 {
		t.Fatalf("first line %s", ls[0])
	}
	if second.Status != 401 || second.Client != "" || second.Reason != "missing_api_key" || second.Prev != audit.Sum([]byte(ls[0])) {
		t.Fatalf("second line %s", ls[1])
	}
	if rep, err := audit.Verify(path); err != nil || rep.Lines != 2 {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// A client that leaves the table takes its metric series with it, as a channel's do; a request
// still in flight on the old config cannot bring them back.
func TestClientSeriesRemovedWithTheClient(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.writeClients(clientsManifest("one: "+clientKeyOne, "limits: {requestsPerMinute: 1}"))
	auth := []string{"Authorization", "Bearer " + clientKeyOne}
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false), auth...); got.status != 200 {
		t.Fatalf("%d %s", got.status, got.body)
	}
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false), auth...); got.status != 429 {
		t.Fatalf("at the limit: %d", got.status)
	}
	m := r.srv.clients.metrics
	teamSeries := func() int {
		n := 0
		for _, name := range []string{"switchyard_client_requests_total", "switchyard_client_tokens_total", "switchyard_client_limited_total"} {
			families, err := r.srv.Registry().Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range families {
				if f.GetName() != name {
					continue
				}
				for _, s := range f.GetMetric() {
					for _, l := range s.GetLabel() {
						if l.GetName() == "client" && l.GetValue() == "team" {
							n++
						}
					}
				}
			}
		}
		return n
	}
	// requests 200 and 429, tokens prompt and completion, limited requestsPerMinute.
	if n := teamSeries(); n != 5 {
		t.Fatalf("%d series of client team before it leaves, want 5", n)
	}
	old, _ := r.srv.cfg.Load().auth.Lookup(clientKeyOne)

	// The table without "team" (the other clients stay: the proxy stays closed).
	manifest := clientsManifest("one: "+clientKeyOne, "")
	manifest = strings.Replace(manifest, "metadata: {name: team}", "metadata: {name: team-renamed}", 1)
	r.writeClients(manifest)
	if n := teamSeries(); n != 0 {
		t.Fatalf("%d series of client team after it left the table, want 0", n)
	}
	// What a request still in flight on the old config does at its end.
	old.Limiter.Count(m.requests, "200", 1)
	old.Limiter.Count(m.tokens, "completion", 7)
	if n := teamSeries(); n != 0 {
		t.Fatalf("a request of the old config brought back %d series of client team", n)
	}
	// The same client coming back counts afresh.
	r.writeClients(clientsManifest("one: "+clientKeyOne, ""))
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false), auth...); got.status != 200 {
		t.Fatalf("back in the table: %d %s", got.status, got.body)
	}
	if v := testutil.ToFloat64(m.requests.WithLabelValues("", "team", "200")); v != 1 {
		t.Fatalf("requests of the returned client %v, want 1", v)
	}
}

// A keyHashes entry that is not 64 lower-case hex digits (a hand-edited table) is refused and
// logged without its value; the client's valid hashes keep working and nothing crashes.
func TestClientKeyHashMalformedIsRefused(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.writeClients(clientsManifest("one: "+clientKeyOne, ""))
	cur := r.srv.cfg.Load().table
	t2 := *cur
	t2.Clients = append([]routing.Client(nil), cur.Clients...)
	pasted := "sk-pasted-by-mistake-31ac"
	var team *routing.Client
	for i := range t2.Clients {
		if t2.Clients[i].Name == "team" {
			team = &t2.Clients[i]
		}
	}
	good := routing.KeyHash(clientKeyOne)
	team.KeyHashes = []string{
		"", pasted, strings.ToUpper(routing.KeyHash(clientKeyTwo)), routing.KeyHash(clientKeyTwo)[:63],
		routing.KeyHash(clientKeyTwo)[:63] + "g", routing.KeyHash(clientKeyTwo) + "0", good,
	}
	r.srv.Apply(&t2, "hand-edited")
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false), "Authorization", "Bearer "+clientKeyOne); got.status != 200 {
		t.Fatalf("the valid hash: %d %s", got.status, got.body)
	}
	for _, k := range []string{clientKeyTwo, pasted} {
		if got := r.post("/v1/chat/completions", chat("gpt-4o", false), "Authorization", "Bearer "+k); got.status != 401 {
			t.Fatalf("a key behind a malformed entry: %d %s", got.status, got.body)
		}
	}
	logs := r.logs.String()
	if n := strings.Count(logs, "not 64 lower-case hex digits"); n != 6 {
		t.Fatalf("%d log lines for the 6 malformed entries:\n%s", n, logs)
	}
	if strings.Contains(logs, pasted) || strings.Contains(logs, routing.KeyHash(clientKeyTwo)[:63]) {
		t.Fatal("a malformed entry's value is in the log")
	}
}
