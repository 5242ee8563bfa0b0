package testutil

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
)

// CacheRoot is where hack/envtest.sh and hack/node.sh keep their builds and the Node suites
// their installs: $SWITCHYARD_CACHE, else $XDG_CACHE_HOME/switchyard, else ~/.cache/switchyard.
// Outside the clone, so a fresh clone in CI reuses them.
func CacheRoot(t testing.TB) string {
	t.Helper()
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

// npmUnreachable matches npm's errors for a registry it cannot reach.
var npmUnreachable = regexp.MustCompile(`ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|network request .* failed`)

// NPMInstall returns the node_modules of the package-lock.json in the current directory (a
// Node suite's package.json, package-lock.json and .npmrc), after `npm ci` into the cache when
// that lock file is not installed there yet; installs are keyed by the lock file's hash. Without
// node or npm, or when npm cannot reach its registry, the test is skipped naming why, except
// under CI ($CI set), where it fails. The install goes to a temporary directory renamed into
// place, so an interrupted one is never taken for complete.
func NPMInstall(t testing.TB) string {
	t.Helper()
	_, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node and npm are required in CI (node: %v, npm: %v)", errNode, errNpm)
		}
		t.Skip("node or npm not installed")
	}
	lock, err := os.ReadFile("package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	cache := filepath.Join(CacheRoot(t), "npm", hex.EncodeToString(sum[:8]))
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
		if npmUnreachable.Match(out) && os.Getenv("CI") == "" {
			t.Skipf("npm cannot reach its registry to install the pinned packages: %s", npmUnreachable.Find(out))
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
