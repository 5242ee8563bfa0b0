package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

func writeConfig(t *testing.T, upstream string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: local}
spec:
  provider: openai
  baseURL: %s/v1
  models: [{name: gpt-4o}]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: local}]
`, upstream)
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestProxySIGTERMDrains: on SIGTERM (the context the signal cancels) the proxy stops accepting,
// fails readiness, lets the in-flight request finish, and exits 0.
func TestProxySIGTERMDrains(t *testing.T) {
	mock := mockprovider.New(mockprovider.Options{})
	mock.SetDefault(mockprovider.Behavior{Latency: 800 * time.Millisecond})
	up := httptest.NewServer(mock)
	defer up.Close()
	defer mock.Close()

	addrs := testutil.FreeAddrs(t, 2)
	api, admin := addrs[0], addrs[1]
	ctx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	logs := &testutil.SyncBuffer{}
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"proxy", "--config", writeConfig(t, up.URL), "--listen", api, "--admin-listen", admin, "--drain-timeout", "10s"}, io.Discard, logs)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy never became ready:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	inflight := make(chan int, 1)
	go func() {
		resp, err := http.Post("http://"+api+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"gpt-4o","messages":[]}`))
		if err != nil {
			inflight <- -1
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		inflight <- resp.StatusCode
	}()
	for mock.Total() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	sigterm()
	if code := <-inflight; code != 200 {
		t.Errorf("in-flight request during drain: status %d, want 200", code)
	}
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("exit code %d, want 0:\n%s", code, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("proxy did not exit after draining")
	}
	if _, err := http.Post("http://"+api+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"gpt-4o"}`)); err == nil {
		t.Error("the proxy still accepts requests after shutdown")
	}
	if !strings.Contains(logs.String(), "draining in-flight requests") {
		t.Errorf("no drain log line:\n%s", logs.String())
	}
}

func TestProxyRefusesABadConfigAtStart(t *testing.T) {
	dir := t.TempDir()
	bad := "apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: p}\nspec: {models: [gpt-4o], channels: [{name: nowhere}]}\n"
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := testutil.FreeAddrs(t, 2)
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"proxy", "--config", dir, "--listen", addrs[0], "--admin-listen", addrs[1]}, io.Discard, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "ProviderChannel nowhere not found") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr.String())
	}
}

func TestVersionAndUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "switchyard ") {
		t.Errorf("version: %d %q", code, out.String())
	}
	errb.Reset()
	if code := run(context.Background(), []string{"frobnicate"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %d %q", code, errb.String())
	}
}

// The admin API (unauthenticated) listens on loopback by default when standalone, and on every
// interface with --configmap, where the controller and Prometheus poll it.
func TestAdminListensOnLoopbackByDefaultStandalone(t *testing.T) {
	if got := defaultAdminListen(false); got != "127.0.0.1:9090" {
		t.Errorf("standalone default %q, want 127.0.0.1:9090", got)
	}
	if got := defaultAdminListen(true); got != ":9090" {
		t.Errorf("in-cluster default %q, want :9090", got)
	}
	var usage bytes.Buffer
	_ = run(context.Background(), []string{"proxy", "-h"}, io.Discard, &usage)
	if !strings.Contains(usage.String(), "default 127.0.0.1:9090 standalone") {
		t.Errorf("the -h text does not say where the admin port listens:\n%s", usage.String())
	}
}

// The API listens on loopback by default when standalone (a newcomer's gateway, likely without
// client keys, is not offered to the network), and on every interface with --configmap, where the
// Service sends clients.
func TestProxyListensOnLoopbackByDefaultStandalone(t *testing.T) {
	if got := defaultListen(false); got != "127.0.0.1:8080" {
		t.Errorf("standalone default %q, want 127.0.0.1:8080", got)
	}
	if got := defaultListen(true); got != ":8080" {
		t.Errorf("in-cluster default %q, want :8080", got)
	}
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.0.0.2:80": true, "[::1]:8080": true, "localhost:8080": true, "LOCALHOST:1": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.5:8080": false, "gateway.example.com:8080": false,
		"[fe80::1%eth0]:8080": false, "127.0.0.1": false, "": false,
	} {
		if got := loopbackAddr(addr); got != want {
			t.Errorf("loopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
	var usage bytes.Buffer
	_ = run(context.Background(), []string{"proxy", "-h"}, io.Discard, &usage)
	if !strings.Contains(usage.String(), "default 127.0.0.1:8080 standalone") || !strings.Contains(usage.String(), "-allow-anonymous") {
		t.Errorf("the -h text does not say where the API listens and how to serve it openly:\n%s", usage.String())
	}
}

// With no GatewayClient and no --require-client-key, the proxy refuses to start on an address
// other than loopback unless --allow-anonymous says so; it fails before it listens.
func TestProxyRefusesToServeOpenOffLoopback(t *testing.T) {
	cfg := writeConfig(t, "http://127.0.0.1:1")
	for _, listen := range []string{":0", "0.0.0.0:0"} {
		admin := testutil.FreeAddrs(t, 1)[0]
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"proxy", "--config", cfg, "--listen", listen, "--admin-listen", admin}, io.Discard, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "refusing to serve without client keys on "+listen) || !strings.Contains(stderr.String(), "--allow-anonymous") {
			t.Errorf("--listen %s: exit %d, stderr:\n%s", listen, code, stderr.String())
		}
	}
}
