package clients

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/audit"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

// TestNodeClients runs clients.test.mjs and anthropic.test.mjs with node --test against the
// gateway on the standalone sample (and an Anthropic channel), keys required and the audit log on.
func TestNodeClients(t *testing.T) {
	modules := testutil.NPMInstall(t)
	g := startSample(t, true)
	runClients(t, modules, g.url)
	g.close() // every request has finished, and written its audit line
	if err := g.auditClose(); err != nil {
		t.Fatal(err)
	}
	if rep, err := audit.Verify(g.auditPath); err != nil || rep.Lines == 0 {
		t.Errorf("the audit log of the run: %v, %+v", err, rep)
	}
	if g.a.Requests("gpt-4o-2024-08-06") == 0 || g.a.Requests("text-embedding-3-small") == 0 {
		t.Errorf("provider-a was not asked for chat and embeddings: %v", g.a.Counts())
	}
	if g.claude.Requests("claude-sonnet") == 0 {
		t.Errorf("the Anthropic channel was never asked: %v", g.claude.Counts())
	}
}

// runClients runs clients.test.mjs against the gateway at url with the environment env added
// (CHAT_MODEL and CHAT_MOCK name another chat model and the mock that answers it), and fails the
// test when a client test fails.
func runClients(t *testing.T, modules, url string, env ...string) {
	t.Helper()
	// The script runs from a directory whose node_modules is the cached install.
	run := t.TempDir()
	for _, f := range []string{"clients.test.mjs", "anthropic.test.mjs", "package.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(run, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(modules, filepath.Join(run, "node_modules")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "clients.test.mjs", "anthropic.test.mjs")
	cmd.Dir = run
	cmd.Env = append(append(os.Environ(), "SWITCHYARD_URL="+url, "SWITCHYARD_CLIENT_KEY="+clientKey, "NO_COLOR=1"), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("the client tests failed: %v", err)
	}
}

// TestNodeClientsOnClaude runs the same clients with the chat model on the Anthropic channel:
// the OpenAI clients' chat and Responses API requests, tools and structured output translated to
// the Messages API, every test run.
func TestNodeClientsOnClaude(t *testing.T) {
	modules := testutil.NPMInstall(t)
	g := startSample(t, true)
	runClients(t, modules, g.url, "CHAT_MODEL=claude-sonnet", "CHAT_MOCK=claude-a")
	if g.claude.Requests("claude-sonnet") == 0 {
		t.Errorf("the Anthropic channel was never asked: %v", g.claude.Counts())
	}
}
