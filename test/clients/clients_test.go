package clients

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/audit"
)

// TestNodeClients runs clients.test.mjs and anthropic.test.mjs with node --test against the
// gateway on the standalone sample (and an Anthropic channel), keys required and the audit log on.
func TestNodeClients(t *testing.T) {
	modules := requireClients(t)
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

// requireClients returns the installed clients' node_modules, or skips the test (see the package
// doc).
func requireClients(t *testing.T) string {
	t.Helper()
	_, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node and npm are required in CI (node: %v, npm: %v)", errNode, errNpm)
		}
		t.Skip("node or npm not installed")
	}
	return install(t, npm)
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

// cacheRoot is where test/sdk, hack/envtest.sh and hack/node.sh keep their builds too:
// $SWITCHYARD_CACHE, else $XDG_CACHE_HOME/switchyard, else ~/.cache/switchyard.
func cacheRoot(t *testing.T) string {
	if d := os.Getenv("SWITCHYARD_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "switchyard")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(home, ".cache", "switchyard")
}

// unreachable matches npm's errors for a registry it cannot reach.
var unreachable = regexp.MustCompile(`ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|network request .* failed`)

// install returns the node_modules of package-lock.json, installed with npm ci into the cache
// when it is not there yet (as test/sdk does). The install goes to a temporary directory renamed
// into place, so an interrupted one is never taken for complete. When npm cannot reach its
// registry the test is skipped, naming the error, except under CI.
func install(t *testing.T, npm string) string {
	t.Helper()
	lock, err := os.ReadFile("package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	cache := filepath.Join(cacheRoot(t), "npm", hex.EncodeToString(sum[:8]))
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
		if unreachable.Match(out) && os.Getenv("CI") == "" {
			t.Skipf("npm cannot reach its registry to install the pinned clients: %s", unreachable.Find(out))
		}
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
