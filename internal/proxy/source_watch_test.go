package proxy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/proxy/source"
)

// waitLimit bounds every wait in these tests.
const waitLimit = 10 * time.Second

// eventually polls cond until it holds, failing after waitLimit with what was awaited.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: still waiting for %s", waitLimit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// watch runs r.src.Watch with the given poll interval until the test ends. SIGHUPs go in through
// the returned channel, unbuffered, so a send only completes when the watch loop takes it.
func (r *rig) watch(interval time.Duration) (sighup func()) {
	r.t.Helper()
	reload := make(chan struct{})
	r.src.Interval, r.src.Reload = interval, reload
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		r.src.Watch(ctx, r.srv)
	}()
	r.t.Cleanup(func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(waitLimit):
			r.t.Errorf("Watch did not return within %s of its context ending", waitLimit)
		}
	})
	return func() {
		r.t.Helper()
		select {
		case reload <- struct{}{}:
		case <-time.After(waitLimit):
			r.t.Fatalf("the watch loop did not take a SIGHUP within %s: the signal path is blocked", waitLimit)
		}
	}
}

func (r *rig) configError() string { return r.srv.ChannelsState().Config.Error }

// metric reads one unlabelled series from /metrics as a scraper would.
func (r *rig) metric(name string) string {
	r.t.Helper()
	for _, l := range strings.Split(r.metrics(), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	return ""
}

// TestWatchKeepsReloadingPastAFIFO: a named pipe dropped into the config directory is reported
// by name instead of hanging the watch; an on-call `disabled: true` still gets through while it
// is there; once it is gone the config is clean again.
func TestWatchKeepsReloadingPastAFIFO(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.watch(20 * time.Millisecond)
	fifo := filepath.Join(r.dir, "pipe.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "config.error to name the FIFO", func() bool {
		e := r.configError()
		return strings.Contains(e, fifo) && strings.Contains(e, "not a regular file")
	})
	r.write(rigConfig{channelA: "disabled: true\ndisabledReason: INC-7"})
	eventually(t, "the disabled: true to get through with the FIFO still there", func() bool {
		return r.phase("chan-a", "gpt-4o") == "Disabled"
	})
	if e := r.configError(); !strings.Contains(e, fifo) {
		t.Errorf("the FIFO is no longer reported while it is there: %q", e)
	}
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	eventually(t, "config.error to clear once the FIFO is gone", func() bool { return r.configError() == "" })
	// The gauge is set just after the load state the admin API shows: wait for it too (it was
	// read a moment too early once under -race).
	eventually(t, "switchyard_config_stale to be 0 after a good load", func() bool { return r.metric("switchyard_config_stale") == "0" })
}

// TestLoadRefusesAFIFOWithoutBlocking: at start-up (the first Load) a FIFO in the directory is an
// error naming it, at once, not a hang.
func TestLoadRefusesAFIFOWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, rigConfig{}.render("http://127.0.0.1:1", "http://127.0.0.1:2"))
	fifo := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := New(Options{})
	src := &source.FileSource{Path: dir, Getenv: func(string) string { return "" }}
	done := make(chan error, 1)
	go func() { done <- src.Load(srv) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), fifo) {
			t.Fatalf("want an error naming %s, got %v", fifo, err)
		}
	case <-time.After(waitLimit):
		t.Fatalf("Load still blocked on the FIFO after %s", waitLimit)
	}
}

// TestTransientReadErrorClearsWithoutSIGHUP: the config file goes away and comes back unchanged
// (same bytes, same inode); the error and switchyard_config_stale clear on the next poll.
func TestTransientReadErrorClearsWithoutSIGHUP(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.watch(20 * time.Millisecond)
	p := filepath.Join(r.dir, "gateway.yaml")
	if err := os.Rename(p, p+".away"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the missing file to be reported", func() bool { return r.configError() != "" })
	if got := r.metric("switchyard_config_stale"); got != "1" {
		t.Errorf("switchyard_config_stale = %q while the file is missing", got)
	}
	if err := os.Rename(p+".away", p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "config.error to clear without a SIGHUP", func() bool { return r.configError() == "" })
	if got := r.metric("switchyard_config_stale"); got != "0" {
		t.Errorf("switchyard_config_stale = %q after the file is back", got)
	}
}

// TestFileEventReloadsWithoutWaitingForThePoll: with the poll an hour away, edits are applied
// through file events.
func TestFileEventReloadsWithoutWaitingForThePoll(t *testing.T) {
	r := newRig(t, rigConfig{})
	r.watch(time.Hour)
	r.write(rigConfig{channelA: "disabled: true\ndisabledReason: INC-8"})
	eventually(t, "chan-a to be disabled by the edit", func() bool { return r.phase("chan-a", "gpt-4o") == "Disabled" })
	// By now the watch is in place (it is added before the first look at the files), so this
	// one can only be seen through an event.
	r.write(rigConfig{})
	eventually(t, "chan-a to be enabled again by the edit", func() bool { return r.phase("chan-a", "gpt-4o") != "Disabled" })
}

// TestConfigMapSwapIsSeenByFileEvents: kubelet updates a mounted ConfigMap by pointing the
// "..data" symlink at a new directory; the watch on the directory sees it.
func TestConfigMapSwapIsSeenByFileEvents(t *testing.T) {
	r := newRig(t, rigConfig{})
	dir := t.TempDir()
	version := func(name string, cfg rigConfig) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name), cfg.render(r.aURL, r.bURL))
		if err := os.Symlink(name, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_11_30_10_00_00.1", rigConfig{})
	if err := os.Symlink("..data/gateway.yaml", filepath.Join(dir, "gateway.yaml")); err != nil {
		t.Fatal(err)
	}
	r.src = &source.FileSource{Path: dir, Getenv: func(string) string { return "" }}
	if err := r.src.Load(r.srv); err != nil {
		t.Fatal(err)
	}
	r.watch(time.Hour)
	version("..2026_11_30_10_05_00.2", rigConfig{channelA: "disabled: true"})
	eventually(t, "the ConfigMap swap to disable chan-a", func() bool { return r.phase("chan-a", "gpt-4o") == "Disabled" })
	version("..2026_11_30_10_10_00.3", rigConfig{})
	eventually(t, "the next swap to enable chan-a again", func() bool { return r.phase("chan-a", "gpt-4o") != "Disabled" })
}
