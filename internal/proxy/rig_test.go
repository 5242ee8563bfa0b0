package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

// fakeClock is the proxy's health clock in tests: it only moves when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Provider keys of the rig's two channels: tests assert they never leak.
const (
	keyA = "sk-test-provider-a-7f3c9e"
	keyB = "test-provider-b-key-19d2"
)

// rig is a proxy in front of two mock providers, A (openai) and B (azure-openai).
type rig struct {
	t         *testing.T
	A, B      *mockprovider.Server
	aURL      string
	bURL      string
	dir       string
	src       *source.FileSource
	srv       *Server
	api       *httptest.Server
	admin     *httptest.Server
	clock     *fakeClock
	logs      *testutil.SyncBuffer
	accessLog *testutil.SyncBuffer
}

// rigConfig is the manifest template: %[1]s and %[2]s are A's and B's base URLs; channelExtra
// and policyExtra are appended (indented) to channel A's spec and the policy's spec.
type rigConfig struct {
	channelA, channelB, policy, extra string
}

const defaultTimeouts = "timeouts: {request: 5s, fallbackRequest: 4s, firstByte: 400ms, streamIdle: 300ms}"

func (c rigConfig) render(aURL, bURL string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: keys}
stringData: {a: %[3]s, b: %[4]s}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: chan-a}
spec:
  provider: openai
  baseURL: %[1]s/v1
  credentialsRef: {name: keys, key: a}
  models: [{name: gpt-4o}, {name: gpt-4o-mini}, {name: gpt-4.1}]
  failureDomain: {region: a}
  %[5]s
%[6]s
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: chan-b}
spec:
  provider: azure-openai
  baseURL: %[2]s/openai/v1
  credentialsRef: {name: keys, key: b}
  models: [{name: gpt-4o}, {name: gpt-4o-mini}, {name: gpt-4.1}]
  failureDomain: {region: b}
  %[5]s
%[7]s
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: chan-a}, {name: chan-b}]
%[8]s
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: others}
spec:
  models: [gpt-4o-mini, gpt-4.1]
  channels: [{name: chan-a}, {name: chan-b}]
  strategy: Priority
%[9]s
`, aURL, bURL, keyA, keyB, defaultTimeouts, indent(c.channelA), indent(c.channelB), indent(policyWithStrategy(c.policy)), indent(c.extra))
}

// policyWithStrategy makes Priority the rig's default strategy, so tests know which channel is first.
func policyWithStrategy(p string) string {
	if strings.Contains(p, "strategy:") {
		return p
	}
	return "strategy: Priority\n" + p
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i := range lines {
		lines[i] = "  " + lines[i]
	}
	return strings.Join(lines, "\n")
}

func newRig(t *testing.T, cfg rigConfig) *rig { t.Helper(); return newRigOpts(t, cfg, nil) }

// newRigOpts is newRig with the proxy's Options adjusted by opt (limits, timeouts).
func newRigOpts(t *testing.T, cfg rigConfig, opt func(*Options)) *rig {
	t.Helper()
	r := &rig{t: t, clock: &fakeClock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}, logs: &testutil.SyncBuffer{}, accessLog: &testutil.SyncBuffer{}}
	r.A = mockprovider.New(mockprovider.Options{Name: "a", APIKey: keyA})
	r.B = mockprovider.New(mockprovider.Options{Name: "b", APIKey: keyB})
	as, bs := httptest.NewServer(r.A), httptest.NewServer(r.B)
	r.aURL, r.bURL = as.URL, bs.URL
	opts := Options{Clock: r.clock, Logger: slog.New(slog.NewJSONHandler(r.logs, nil)), AccessLog: r.accessLog, Replica: "test"}
	if opt != nil {
		opt(&opts)
	}
	r.srv = New(opts)
	r.api = httptest.NewServer(r.srv.Handler())
	r.admin = httptest.NewServer(r.srv.AdminHandler())
	r.dir = t.TempDir()
	r.src = &source.FileSource{Path: r.dir, Getenv: func(string) string { return "" }}
	r.write(cfg)
	if err := r.src.Load(r.srv); err != nil {
		t.Fatalf("config does not load: %v", err)
	}
	t.Cleanup(func() {
		r.api.Close()
		r.admin.Close()
		r.A.Close() // releases hung handlers before the servers wait for them
		r.B.Close()
		as.Close()
		bs.Close()
		r.srv.WaitProbes()
	})
	return r
}

func (r *rig) write(cfg rigConfig) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, "gateway.yaml"), []byte(cfg.render(r.aURL, r.bURL)), 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// reply is what a client saw.
type reply struct {
	status int
	header http.Header
	body   string
	err    error
}

func (r *rig) post(path, body string, headers ...string) reply {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.api.URL+path, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

func chat(model string, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hello"}]}`, model, stream)
}

// channels reads /admin/v1/channels as a user would.
func (r *rig) channel(channel, model string) map[string]any {
	r.t.Helper()
	resp, err := http.Get(r.admin.URL + "/admin/v1/channels")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Channels []map[string]any `json:"channels"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		r.t.Fatal(err)
	}
	for _, c := range doc.Channels {
		if c["channel"] == channel && c["model"] == model {
			return c
		}
	}
	r.t.Fatalf("admin API has no %s/%s", channel, model)
	return nil
}

func (r *rig) phase(channel, model string) string { return r.channel(channel, model)["phase"].(string) }

// step moves the health clock and runs the background work, waiting for any probe it starts.
func (r *rig) step(d time.Duration) {
	r.clock.Advance(d)
	r.srv.Step(context.Background())
	r.srv.WaitProbes()
}

func writeFile(t *testing.T, dir, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeFileErr(dir, content string) error {
	return os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(content), 0o600)
}
