package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImageFromAStaticBinary builds an image around a small static program and verifies it; a
// dynamically linked binary is refused.
func TestImageFromAStaticBinary(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	os.WriteFile(src, []byte("package main\nfunc main() {}\n"), 0o600)
	bin := filepath.Join(dir, "prog")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	img, err := Build(bin)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	ref, _ := name.NewTag("switchyard:test")
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		t.Fatal(err)
	}
	if err := Verify(out); err != nil {
		t.Fatalf("a static image did not verify: %v", err)
	}

	// /bin/sh is dynamically linked on this machine's distribution: Verify must refuse it.
	img, err = Build("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.tar")
	if err := tarball.WriteToFile(bad, ref, img); err != nil {
		t.Fatal(err)
	}
	if err := Verify(bad); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("a dynamic binary verified: %v", err)
	}
}
