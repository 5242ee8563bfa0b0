package routing

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const oneChannel = `apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: local}
spec:
  provider: openai
  baseURL: http://127.0.0.1:1/v1
  models: [{name: gpt-4o}]
`

// loadWithin runs LoadManifests, failing the test if it has not returned within 10s.
func loadWithin(t *testing.T, path string) (Inputs, error) {
	t.Helper()
	type result struct {
		in  Inputs
		err error
	}
	done := make(chan result, 1)
	go func() {
		in, err := LoadManifests(path)
		done <- result{in, err}
	}()
	select {
	case r := <-done:
		return r.in, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("LoadManifests(%s) still blocked after 10s", path)
		return Inputs{}, nil
	}
}

// TestLoadManifestsRefusesAFIFO: a named pipe in the config directory is refused at once, by
// name, instead of blocking the read forever waiting for a writer.
func TestLoadManifestsRefusesAFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(oneChannel), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadWithin(t, dir)
	if err == nil || !strings.Contains(err.Error(), fifo) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("want an error naming %s as not a regular file, got %v", fifo, err)
	}
	// The single-file form too.
	if _, err := loadWithin(t, fifo); err == nil || !strings.Contains(err.Error(), "named pipe") {
		t.Fatalf("--config pointing at a FIFO: want a named-pipe error, got %v", err)
	}
}

// TestLoadManifestsRefusesAFileOverTheCap: a manifest file over MaxManifestBytes is refused with
// an error naming the file and the limit, even when it is valid YAML (here, comments).
func TestLoadManifestsRefusesAFileOverTheCap(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(oneChannel), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	line := "# " + strings.Repeat("x", 77) + "\n"
	if err := os.WriteFile(big, []byte(strings.Repeat(line, MaxManifestBytes/len(line)+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadWithin(t, dir)
	if err == nil || !strings.Contains(err.Error(), big) || !strings.Contains(err.Error(), "4 MiB") {
		t.Fatalf("want an error naming %s and the 4 MiB limit, got %v", big, err)
	}
	// Exactly at the cap is fine.
	if err := os.Truncate(big, MaxManifestBytes); err != nil {
		t.Fatal(err)
	}
	if _, err := loadWithin(t, dir); err != nil {
		t.Fatalf("a file of exactly %d bytes: %v", MaxManifestBytes, err)
	}
}

// TestLoadManifestsReadsAConfigMapMount: the layout kubelet gives a mounted ConfigMap (each key a
// symlink through the "..data" symlink to a timestamped directory) loads, and a symlink to a
// directory is refused by name.
func TestLoadManifestsReadsAConfigMapMount(t *testing.T) {
	dir := t.TempDir()
	ts := filepath.Join(dir, "..2026_11_30_10_00_00.1")
	if err := os.Mkdir(ts, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, "gateway.yaml"), []byte(oneChannel), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{filepath.Base(ts), "..data"}, {"..data/gateway.yaml", "gateway.yaml"}} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	in, err := loadWithin(t, dir)
	if err != nil || len(in.Channels) != 1 {
		t.Fatalf("ConfigMap layout: %d channels, %v", len(in.Channels), err)
	}
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "dir.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := loadWithin(t, dir); err == nil || !strings.Contains(err.Error(), "dir.yaml is a directory") {
		t.Fatalf("a symlink to a directory: %v", err)
	}
}
