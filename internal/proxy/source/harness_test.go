package source

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

// The Sink is what package proxy's Server offers.
var _ Sink = (*proxy.Server)(nil)

// waitLimit bounds every wait in these tests.
const waitLimit = 10 * time.Second

// testConfig is a config that compiles; nothing is sent to its channel.
const testConfig = `apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: chan-a}
spec:
  provider: openai
  baseURL: http://127.0.0.1:1/v1
  models: [{name: gpt-4o}]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec: {models: [gpt-4o], channels: [{name: chan-a}]}
`

// harness is a FileSource over a directory, feeding a real proxy Server.
type harness struct {
	t    *testing.T
	dir  string
	src  *FileSource
	srv  *proxy.Server
	logs *testutil.SyncBuffer
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), logs: &testutil.SyncBuffer{}}
	h.srv = proxy.New(proxy.Options{Logger: slog.New(slog.NewJSONHandler(h.logs, nil)), Replica: "test"})
	writeConfig(t, h.dir, testConfig)
	h.src = &FileSource{Path: h.dir, Getenv: func(string) string { return "" }}
	if err := h.src.Load(h.srv); err != nil {
		t.Fatalf("config does not load: %v", err)
	}
	return h
}

func writeConfig(t *testing.T, dir, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// watch runs h.src.Watch with the given poll interval until the test ends. SIGHUPs go in through
// the returned function, unbuffered, so a send only completes when the watch loop takes it.
func (h *harness) watch(interval time.Duration) (sighup func()) {
	h.t.Helper()
	reload := make(chan struct{})
	h.src.Interval, h.src.Reload = interval, reload
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		h.src.Watch(ctx, h.srv)
	}()
	h.t.Cleanup(func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(waitLimit):
			h.t.Errorf("Watch did not return within %s of its context ending", waitLimit)
		}
	})
	return func() {
		h.t.Helper()
		select {
		case reload <- struct{}{}:
		case <-time.After(waitLimit):
			h.t.Fatalf("the watch loop did not take a SIGHUP within %s: the signal path is blocked", waitLimit)
		}
	}
}

func (h *harness) configError() string { return h.srv.ChannelsState().Config.Error }

// metric reads one unlabelled gauge or counter from the proxy's registry.
func (h *harness) metric(name string) string {
	h.t.Helper()
	families, err := h.srv.Registry().Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name || len(f.GetMetric()) != 1 {
			continue
		}
		m := f.GetMetric()[0]
		if g := m.GetGauge(); g != nil {
			return strconv.FormatFloat(g.GetValue(), 'g', -1, 64)
		}
		return strconv.FormatFloat(m.GetCounter().GetValue(), 'g', -1, 64)
	}
	return ""
}

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
