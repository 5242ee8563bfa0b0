// Package testutil holds the few helpers several test suites share: golden files, a free
// loopback address, a log buffer safe for many goroutines, a clock that moves when told.
package testutil

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/procs"
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

// Bytes is a copy of what was written so far.
func (s *SyncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// Clock is a proxy's clock in a test: it moves only when the test moves it (Set, Advance) or when
// the proxy waits out a back-off through it (Sleep, the proxy's Sleeper), so an access log's
// times are the plan's. Safe for many goroutines.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Sleep moves the clock by d at once; false when ctx is done.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) bool {
	c.Advance(d)
	return ctx.Err() == nil
}
