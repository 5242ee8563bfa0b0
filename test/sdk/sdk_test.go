// Package sdk runs the OpenAI and Anthropic Node SDKs, unchanged and at the versions pinned in
// package-lock.json, against the gateway in front of mock Anthropic, Bedrock and Vertex channels
// (and one mock OpenAI channel), over loopback: answers, streams, tools, failover, and streams
// broken after their first text and recovered by the gateway.
//
// The SDKs are installed with `npm ci` on first use into ~/.cache/switchyard/npm/<hash of the
// lock> (about 6 s cold), outside the repository, so that a changed lock gets a fresh install and
// an unchanged one none. Without node or npm the test is skipped, except under CI=true, where it
// fails: CI must run it.
package sdk

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/switchyard-io/switchyard/internal/audit"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

// recoveredText is the answer of the streams cut after their first text (claude-broken,
// claude-cloud-broken): the SDKs must read it whole, once.
const recoveredText = "A broken stream, finished: every byte once — and in order."

// clientKey is the SDKs' key: the gateway runs with client keys required and its audit log on.
const clientKey = "sk-sdk-client-8d41c07e5b2f96a3e1d0"

func TestNodeSDKs(t *testing.T) {
	modules := testutil.NPMInstall(t)

	a := mockprovider.New(mockprovider.Options{Name: "claude-a", APIKey: "sk-ant-a"})
	b := mockprovider.New(mockprovider.Options{Name: "claude-b", APIKey: "sk-ant-b"})
	c := mockprovider.New(mockprovider.Options{Name: "openai-c", APIKey: "sk-openai-c"})
	a.SetBehavior("claude-flaky-up", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 529})
	a.SetBehavior("claude-cut-up", mockprovider.Behavior{Mode: mockprovider.ModeErrorEvent, After: 0})
	a.SetBehavior("chain-up", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 529})
	// Stream recovery: claude-broken's stream on claude-a is cut after its first text and
	// continued on claude-b (the text sent as the assistant prefill); claude-cloud-broken's on
	// Bedrock ends with a modelStreamErrorException after its first text and goes on on Vertex.
	a.SetBehavior("broken-up", mockprovider.Behavior{Mode: mockprovider.ModeCut, After: 2, Splits: "6,12", Text: recoveredText})
	b.SetBehavior("broken-up", mockprovider.Behavior{Mode: mockprovider.ModeContinue, Text: recoveredText})
	as, bs, cs := httptest.NewServer(a), httptest.NewServer(b), httptest.NewServer(c)
	defer as.Close()
	defer bs.Close()
	defer cs.Close()
	defer a.Close()
	defer b.Close()
	defer c.Close()

	// Claude on the clouds: a Bedrock mock that verifies every SigV4 signature, a Vertex mock
	// that checks every bearer token against its own token endpoint (token_uri below).
	bedrock := mockprovider.NewBedrock(mockprovider.BedrockOptions{Name: "bedrock", Region: "us-east-1",
		Credentials: []aws.Credentials{{AccessKeyID: "AKIDSDKTEST", SecretAccessKey: "sdk-test-secret"}}})
	bedrock.SetBehavior("chain-up", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503}})
	bedrock.SetBehavior("bcut-up", mockprovider.CloudBehavior{StreamError: "modelStreamErrorException"})
	bedrock.SetBehavior("bbroken-up", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{After: 2, Splits: "6,12", Text: recoveredText},
		StreamError: "modelStreamErrorException"})
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	const email = "switchyard@sdk-project.iam.gserviceaccount.com"
	vertex := mockprovider.NewVertex(mockprovider.VertexOptions{Name: "vertex", Project: "sdk-project", Location: "us-east5",
		ServiceAccounts: map[string]*rsa.PublicKey{email: &key.PublicKey}})
	vertex.SetBehavior("vbroken-up", mockprovider.CloudBehavior{Behavior: mockprovider.Behavior{Mode: mockprovider.ModeContinue, Text: recoveredText}})
	brs, vrs := httptest.NewServer(bedrock), httptest.NewServer(vertex)
	defer brs.Close()
	defer vrs.Close()
	defer bedrock.Close()
	defer vertex.Close()
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	sa, _ := json.Marshal(map[string]string{"type": "service_account", "project_id": "sdk-project", "client_email": email,
		"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "token_uri": vrs.URL + "/token"})

	dir := t.TempDir()
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: keys}
stringData: {a: sk-ant-a, b: sk-ant-b, c: sk-openai-c}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: claude-a}
spec:
  provider: anthropic
  baseURL: %[1]s/v1
  credentialsRef: {name: keys, key: a}
  models: [{name: claude-sonnet}, {name: claude-flaky, upstreamModel: claude-flaky-up}, {name: claude-cut, upstreamModel: claude-cut-up}, {name: claude-chain, upstreamModel: chain-up}, {name: claude-broken, upstreamModel: broken-up}]
  failureDomain: {region: a}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: claude-b}
spec:
  provider: anthropic
  baseURL: %[2]s/v1
  credentialsRef: {name: keys, key: b}
  models: [{name: claude-sonnet}, {name: claude-flaky, upstreamModel: claude-flaky-up}, {name: claude-cut, upstreamModel: claude-cut-up}, {name: claude-broken, upstreamModel: broken-up}]
  failureDomain: {region: b}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: openai-c}
spec:
  provider: openai
  baseURL: %[3]s/v1
  credentialsRef: {name: keys, key: c}
  models: [{name: gpt-4o}]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: claude}
spec:
  models: [claude-sonnet, claude-flaky, claude-cut, claude-broken]
  channels: [{name: claude-a}, {name: claude-b}]
  strategy: Priority
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: gpt}
spec:
  models: [gpt-4o]
  channels: [{name: openai-c}]
---
apiVersion: v1
kind: Secret
metadata: {name: aws}
stringData: {accessKeyId: AKIDSDKTEST, secretAccessKey: sdk-test-secret}
---
apiVersion: v1
kind: Secret
metadata: {name: gcp}
stringData:
  serviceAccountJSON: '%[5]s'
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: claude-bedrock}
spec:
  provider: bedrock
  region: us-east-1
  baseURL: %[4]s
  credentialsRef: {name: aws}
  models:
    - {name: claude-on-bedrock, upstreamModel: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}
    - {name: claude-chain, upstreamModel: chain-up}
    - {name: claude-bedrock-cut, upstreamModel: bcut-up}
    - {name: claude-cloud-broken, upstreamModel: bbroken-up}
  failureDomain: {region: aws}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: claude-vertex}
spec:
  provider: vertex
  region: us-east5
  project: sdk-project
  baseURL: %[6]s/v1
  credentialsRef: {name: gcp}
  models:
    - {name: claude-on-vertex, upstreamModel: "claude-sonnet-4-5@20250929"}
    - {name: claude-chain, upstreamModel: "claude-sonnet-4-5@20250929"}
    - {name: claude-bedrock-cut, upstreamModel: "claude-sonnet-4-5@20250929"}
    - {name: claude-cloud-broken, upstreamModel: vbroken-up}
  failureDomain: {region: gcp}
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: claude-clouds}
spec:
  models: [claude-on-bedrock, claude-on-vertex]
  channels: [{name: claude-bedrock}, {name: claude-vertex}]
  strategy: Priority
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: claude-chain}
spec:
  models: [claude-chain]
  channels: [{name: claude-a}, {name: claude-bedrock}, {name: claude-vertex}]
  strategy: Priority
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: claude-bedrock-cut}
spec:
  models: [claude-bedrock-cut]
  channels: [{name: claude-bedrock}, {name: claude-vertex}]
  strategy: Priority
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: claude-cloud-broken}
spec:
  models: [claude-cloud-broken]
  channels: [{name: claude-bedrock}, {name: claude-vertex}]
  strategy: Priority
---
apiVersion: v1
kind: Secret
metadata: {name: sdk-client-keys}
stringData: {k: %[7]s}
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: sdk}
spec:
  keysSecretRef: {name: sdk-client-keys}
  models: ["*"]
`, as.URL, bs.URL, cs.URL, brs.URL, sa, vrs.URL, clientKey)
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	auditPath := filepath.Join(t.TempDir(), "audit.log")
	auditLog, err := audit.Open(audit.Options{Path: auditPath})
	if err != nil {
		t.Fatal(err)
	}
	srv := proxy.New(proxy.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Replica: "sdk",
		RequireClientKey: true, Audit: auditLog})
	src := &source.FileSource{Path: dir, Getenv: func(string) string { return "" }}
	if err := src.Load(srv); err != nil {
		t.Fatalf("config does not load: %v", err)
	}
	gw := httptest.NewServer(srv.Handler())
	defer gw.Close()

	// The script runs from a directory whose node_modules is the cached install.
	run := t.TempDir()
	script, err := os.ReadFile("sdk.test.mjs")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, "sdk.test.mjs"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"package.json"} {
		b, _ := os.ReadFile(f)
		_ = os.WriteFile(filepath.Join(run, f), b, 0o644)
	}
	if err := os.Symlink(modules, filepath.Join(run, "node_modules")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "sdk.test.mjs")
	cmd.Dir = run
	cmd.Env = append(os.Environ(), "SWITCHYARD_URL="+gw.URL, "SWITCHYARD_CLIENT_KEY="+clientKey, "NO_COLOR=1", "RECOVERED_TEXT="+recoveredText)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("the SDK tests failed: %v", err)
	}
	gw.Close() // every request has finished, and written its audit line
	if err := auditLog.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := audit.Verify(auditPath); err != nil || rep.Lines == 0 {
		t.Errorf("the audit log of the SDK run: %v, %+v", err, rep)
	}
	if a.Requests("claude-flaky-up") == 0 || a.Requests("claude-cut-up") == 0 || a.Requests("chain-up") == 0 ||
		bedrock.Requests("chain-up") == 0 || bedrock.Requests("bcut-up") == 0 {
		t.Error("the failover models never reached their failing channel")
	}
	if b.Requests("broken-up") == 0 || vertex.Requests("vbroken-up") == 0 {
		t.Error("no continuation reached the channels that finish the broken streams")
	}
	if bedrock.Requests("us.anthropic.claude-sonnet-4-5-20250929-v1:0") == 0 || vertex.TokensIssued() == 0 || bedrock.Refused() != 0 {
		t.Errorf("the clouds: bedrock answered %d, refused %d signatures; vertex issued %d tokens",
			bedrock.Requests("us.anthropic.claude-sonnet-4-5-20250929-v1:0"), bedrock.Refused(), vertex.TokensIssued())
	}
}
