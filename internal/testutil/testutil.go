// Package testutil holds the few helpers several test suites share: golden files, a free
// loopback address, a log buffer safe for many goroutines.
package testutil

import (
	"bytes"
	"github.com/switchyard-io/switchyard/internal/procs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Golden compares got with testdata/name, or writes it there when update is set (each package
// passes its own -update flag).
func Golden(t testing.TB, update bool, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update if the change is intended)\n--- got\n%s", path, got)
	}
}

// FreeAddrs returns n distinct loopback addresses whose ports were free a moment ago
// (procs.FreeAddrs: all picked at once, so no two are the same).
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	addrs, err := procs.FreeAddrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// SyncBuffer collects output written from many goroutines (logs, access logs).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
