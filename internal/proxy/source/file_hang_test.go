package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Tests of the parts of FileSource that need a seam: a read that hangs (a dead mount cannot be
// made in a test) and direct calls of one poll.

// hangingRead replaces a FileSource's read: while hang is set, a read blocks until released.
type hangingRead struct {
	mu      sync.Mutex
	reads   int
	hang    bool
	entered chan struct{} // a read started hanging
	release chan struct{}
}

func newHangingRead(t *testing.T) *hangingRead {
	h := &hangingRead{entered: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(h.unblock)
	return h
}

func (h *hangingRead) read(path string) ([]routing.ManifestFile, error) {
	h.mu.Lock()
	h.reads++
	hang := h.hang
	h.mu.Unlock()
	if hang {
		h.entered <- struct{}{}
		<-h.release
	}
	return routing.ReadManifestFiles(path)
}

func (h *hangingRead) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reads
}

func (h *hangingRead) set(hang bool) {
	h.mu.Lock()
	h.hang = hang
	h.mu.Unlock()
}

func (h *hangingRead) unblock() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hang = false
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

func (h *hangingRead) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-h.entered:
	case <-time.After(waitLimit):
		t.Fatalf("no read started within %s", waitLimit)
	}
}

// TestAHungReadDoesNotBlockSIGHUP: a read hung on a dead mount is reported after the bound
// (config.error, switchyard_config_stale 1); SIGHUPs are still taken meanwhile and coalesce into
// one read once the hung one returns, which clears the report.
func TestAHungReadDoesNotBlockSIGHUP(t *testing.T) {
	r := newHarness(t)
	h := newHangingRead(t)
	r.src.read, r.src.stuckAfter = h.read, 50*time.Millisecond
	sighup := r.watch(time.Hour)

	h.set(true)
	sighup()
	h.waitEntered(t)
	eventually(t, "the hung read to be reported", func() bool {
		return strings.Contains(r.configError(), "has not finished after 50ms")
	})
	if got := r.metric("switchyard_config_stale"); got != "1" {
		t.Errorf("switchyard_config_stale = %q while a read hangs", got)
	}
	sighup() // both taken while the read hangs
	sighup()

	h.unblock()
	eventually(t, "the report to clear after the hung read returns", func() bool {
		return r.configError() == "" && h.count() == 2
	})
	if got := r.metric("switchyard_config_stale"); got != "0" {
		t.Errorf("switchyard_config_stale = %q after a good load", got)
	}
	if n := h.count(); n != 2 {
		t.Errorf("%d reads: the SIGHUPs taken during the hang should make exactly one", n)
	}
}

// TestWatchStopsWhileAReadHangs: shutdown does not wait for a hung read.
func TestWatchStopsWhileAReadHangs(t *testing.T) {
	r := newHarness(t)
	h := newHangingRead(t)
	r.src.read = h.read
	reload := make(chan struct{}, 1)
	r.src.Interval, r.src.Reload = time.Hour, reload
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		r.src.Watch(ctx, r.srv)
	}()
	h.set(true)
	reload <- struct{}{}
	h.waitEntered(t)
	cancel()
	select {
	case <-stopped:
	case <-time.After(waitLimit):
		t.Fatalf("Watch did not return within %s of its context ending while a read hangs", waitLimit)
	}
}

// TestStartGivesUpWhenTheContextEnds: the first load at start-up hangs (a dead mount); SIGTERM
// (the context) ends the wait with an error that says so.
func TestStartGivesUpWhenTheContextEnds(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, testConfig)
	h := newHangingRead(t)
	h.set(true)
	src := &FileSource{Path: dir, Getenv: func(string) string { return "" }, read: h.read}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Start(ctx, proxy.New(proxy.Options{})) }()
	h.waitEntered(t)
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "reading the config had not finished") {
			t.Fatalf("want an error saying the read had not finished, got %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatalf("Start did not return within %s of its context ending", waitLimit)
	}
}

// TestPollDoesNotRereadUnchangedFiles: a poll over unchanged files reads nothing; a changed mtime
// makes it read once, and identical bytes are not applied again.
func TestPollDoesNotRereadUnchangedFiles(t *testing.T) {
	r := newHarness(t)
	h := newHangingRead(t)
	r.src.read = h.read
	for range 50 {
		r.src.work(r.srv, workCheck)
	}
	if n := h.count(); n != 0 {
		t.Fatalf("50 polls of unchanged files read them %d times", n)
	}
	p := filepath.Join(r.dir, "gateway.yaml")
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	loads := strings.Count(r.logs.String(), "Loaded routing config")
	for range 50 {
		r.src.work(r.srv, workCheck)
	}
	if n := h.count(); n != 1 {
		t.Fatalf("after a touch, 50 polls read the files %d times, want 1", n)
	}
	if got := strings.Count(r.logs.String(), "Loaded routing config"); got != loads {
		t.Errorf("the same bytes were applied again (%d loads logged, was %d)", got, loads)
	}
}

// TestPersistentReadErrorIsRecordedOnce: a read error that persists is retried at every poll but
// recorded (logged, counted) once; a SIGHUP records it again.
func TestPersistentReadErrorIsRecordedOnce(t *testing.T) {
	r := newHarness(t)
	if err := syscall.Mkfifo(filepath.Join(r.dir, "pipe.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		r.src.work(r.srv, workCheck)
	}
	if n := strings.Count(r.logs.String(), "Rejected routing config"); n != 1 {
		t.Errorf("20 polls over the same read error logged it %d times, want 1", n)
	}
	r.src.work(r.srv, workForce)
	if n := strings.Count(r.logs.String(), "Rejected routing config"); n != 2 {
		t.Errorf("a SIGHUP did not record the error again (%d rejections logged)", n)
	}
}
