// Package clients runs the clients people use with OpenAI-compatible gateways — the Vercel AI SDK
// (ai with @ai-sdk/openai), LangChain JS (@langchain/openai) and the openai SDK's own helpers —
// unchanged and at the versions pinned in package-lock.json, against the gateway on `make run`'s
// own config (config/samples/standalone) in front of two mock providers, over loopback, with
// client keys required and the audit log on: chat streamed and not, tools, structured output,
// embeddings and the Responses API, streamed and not (clients.test.mjs); and the AI SDK's
// Anthropic provider (@ai-sdk/anthropic) and LangChain's ChatAnthropic (@langchain/anthropic) on
// /v1/messages, to an Anthropic channel added beside the sample's and to the sample's gpt-4o
// (anthropic.test.mjs). TestStandaloneSample checks the README's first steps on the same config
// without node.
//
// The clients are installed as test/sdk's are (npm ci into ~/.cache/switchyard/npm/<hash of the
// lock>). Without node or npm, or when npm cannot reach its registry, the test is skipped and
// says why, except under CI=true, where it fails.
package clients

import (
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/audit"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
)

// clientKey is the clients' key: the gateway requires keys, as every cluster install does.
const clientKey = "sk-clients-4b7e19d2c08a56f3e9d1a7c5f02b"

// gateway is `make run`'s setup: the standalone sample's channels on two mock providers.
type gateway struct {
	url        string
	a, b       *mockprovider.Server // the sample's provider-a and provider-b
	claude     *mockprovider.Server // an Anthropic channel's
	auditPath  string
	close      func()
	auditClose func() error
}

// startSample serves config/samples/standalone, its baseURLs pointed at two mocks that take the
// sample's keys (as hack/run-local.sh starts them), with extra manifests appended; with keys,
// clients must send clientKey and every request is written to an audit log.
func startSample(t *testing.T, keys bool) *gateway {
	t.Helper()
	sample, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "standalone", "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{
		a:      mockprovider.New(mockprovider.Options{Name: "provider-a", APIKey: "sk-local-provider-a"}),
		b:      mockprovider.New(mockprovider.Options{Name: "provider-b", APIKey: "local-provider-b-key"}),
		claude: mockprovider.New(mockprovider.Options{Name: "claude-a", APIKey: "sk-ant-local"}),
	}
	as, bs, cs := httptest.NewServer(g.a), httptest.NewServer(g.b), httptest.NewServer(g.claude)
	manifest := string(sample)
	for from, to := range map[string]string{"http://127.0.0.1:9101": as.URL, "http://127.0.0.1:9102": bs.URL} {
		if !strings.Contains(manifest, from) {
			t.Fatalf("the sample no longer points at %s (hack/run-local.sh's mock)", from)
		}
		manifest = strings.ReplaceAll(manifest, from, to)
	}
	// Beside the sample's channels, Claude on an Anthropic channel, for the Anthropic clients.
	manifest += fmt.Sprintf(`---
apiVersion: v1
kind: Secret
metadata: {name: anthropic-key}
stringData: {apiKey: sk-ant-local}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: anthropic}
spec:
  provider: anthropic
  baseURL: %s/v1
  credentialsRef: {name: anthropic-key, key: apiKey}
  models: [{name: claude-sonnet}]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: claude}
spec:
  models: [claude-sonnet]
  channels: [{name: anthropic}]
`, cs.URL)
	opts := proxy.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Replica: "clients"}
	if keys {
		manifest += fmt.Sprintf(`---
apiVersion: v1
kind: Secret
metadata: {name: client-keys}
stringData: {k: %s}
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: clients}
spec:
  keysSecretRef: {name: client-keys}
  models: ["*"]
`, clientKey)
		g.auditPath = filepath.Join(t.TempDir(), "audit.log")
		log, err := audit.Open(audit.Options{Path: g.auditPath})
		if err != nil {
			t.Fatal(err)
		}
		opts.RequireClientKey, opts.Audit, g.auditClose = true, log, log.Close
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := proxy.New(opts)
	src := &source.FileSource{Path: dir, Getenv: func(string) string { return "" }}
	if err := src.Load(srv); err != nil {
		t.Fatalf("the sample does not load: %v", err)
	}
	gw := httptest.NewServer(srv.Handler())
	g.url = gw.URL
	g.close = func() {
		g.a.Close()
		g.b.Close()
		g.claude.Close()
		gw.Close()
		as.Close()
		bs.Close()
		cs.Close()
	}
	t.Cleanup(g.close)
	return g
}
