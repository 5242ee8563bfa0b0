// Package sdk runs the OpenAI and Anthropic Node SDKs, unchanged and at the versions pinned in
// package-lock.json, against the gateway in front of mock Anthropic channels (and one mock
// OpenAI channel), over loopback.
//
// The SDKs are installed with `npm ci` on first use into ~/.cache/switchyard/npm/<hash of the
// lock> (about 6 s cold), outside the repository, so that a changed lock gets a fresh install and
// an unchanged one none. Without node or npm the test is skipped, except under CI=true, where it
// fails: CI must run it.
package sdk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy"
)

func TestNodeSDKs(t *testing.T) {
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node and npm are required in CI (node: %v, npm: %v)", errNode, errNpm)
		}
		t.Skip("node or npm not installed")
	}
	modules := install(t, npm)

	a := mockprovider.New(mockprovider.Options{Name: "claude-a", APIKey: "sk-ant-a"})
	b := mockprovider.New(mockprovider.Options{Name: "claude-b", APIKey: "sk-ant-b"})
	c := mockprovider.New(mockprovider.Options{Name: "openai-c", APIKey: "sk-openai-c"})
	a.SetBehavior("claude-flaky-up", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 529})
	a.SetBehavior("claude-cut-up", mockprovider.Behavior{Mode: mockprovider.ModeErrorEvent, After: 0})
	as, bs, cs := httptest.NewServer(a), httptest.NewServer(b), httptest.NewServer(c)
	defer as.Close()
	defer bs.Close()
	defer cs.Close()
	defer a.Close()
	defer b.Close()
	defer c.Close()

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
  models: [{name: claude-sonnet}, {name: claude-flaky, upstreamModel: claude-flaky-up}, {name: claude-cut, upstreamModel: claude-cut-up}]
  failureDomain: {region: a}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: claude-b}
spec:
  provider: anthropic
  baseURL: %[2]s/v1
  credentialsRef: {name: keys, key: b}
  models: [{name: claude-sonnet}, {name: claude-flaky, upstreamModel: claude-flaky-up}, {name: claude-cut, upstreamModel: claude-cut-up}]
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
  models: [claude-sonnet, claude-flaky, claude-cut]
  channels: [{name: claude-a}, {name: claude-b}]
  strategy: Priority
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: gpt}
spec:
  models: [gpt-4o]
  channels: [{name: openai-c}]
`, as.URL, bs.URL, cs.URL)
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := proxy.New(proxy.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Replica: "sdk"})
	src := &proxy.FileSource{Path: dir, Getenv: func(string) string { return "" }}
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
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "sdk.test.mjs")
	cmd.Dir = run
	cmd.Env = append(os.Environ(), "SWITCHYARD_URL="+gw.URL, "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("the SDK tests failed: %v", err)
	}
	if a.Requests("claude-flaky-up") == 0 || a.Requests("claude-cut-up") == 0 {
		t.Error("the failover models never reached their failing channel")
	}
}

// install returns the node_modules of package-lock.json, installed with npm ci into the cache
// when it is not there yet. The install goes to a temporary directory renamed into place, so an
// interrupted one is never taken for complete.
func install(t *testing.T, npm string) string {
	t.Helper()
	lock, err := os.ReadFile("package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(home, ".cache", "switchyard", "npm", hex.EncodeToString(sum[:8]))
	modules := filepath.Join(cache, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, ".package-lock.json")); err == nil {
		return modules
	}
	if err := os.MkdirAll(filepath.Dir(cache), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(cache), "install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	for _, f := range []string{"package.json", "package-lock.json", ".npmrc"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci failed: %v\n%s", err, out)
	}
	_ = os.RemoveAll(cache) // a half-written one from an older run
	if err := os.Rename(tmp, cache); err != nil && !os.IsExist(err) {
		if _, statErr := os.Stat(modules); statErr != nil {
			t.Fatalf("failed to move the install into the cache: %v", err)
		}
	}
	return modules
}
