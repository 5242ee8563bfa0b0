package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
	"github.com/switchyard-io/switchyard/internal/proxy/transport"
)

// The transport's own tests are in internal/proxy/transport.

// TestProxyOverHTTP2: the proxy's own handler in front of an HTTP/2 upstream (a mock provider over TLS): answers and
// streams come through, on one upstream connection, and the gauges on /metrics say so.
func TestProxyOverHTTP2(t *testing.T) {
	var mu sync.Mutex
	protos := map[int]int{}
	serve := func(p *mockprovider.Server) *httptest.Server {
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			protos[r.ProtoMajor]++
			mu.Unlock()
			p.ServeHTTP(w, r)
		}))
		s.EnableHTTP2 = true
		s.StartTLS()
		t.Cleanup(s.Close)
		t.Cleanup(p.Close)
		return s
	}
	a := serve(mockprovider.New(mockprovider.Options{Name: "a", APIKey: keyA}))
	b := serve(mockprovider.New(mockprovider.Options{Name: "b", APIKey: keyB}))
	pool := x509.NewCertPool()
	pool.AddCert(a.Certificate()) // httptest servers share their certificate
	tr := transport.New(transport.Config{TLS: &tls.Config{RootCAs: pool}})
	t.Cleanup(tr.CloseIdleConnections)
	srv := New(Options{Transport: tr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Replica: "test"})
	dir := t.TempDir()
	writeFile(t, dir, rigConfig{}.render(a.URL, b.URL))
	if err := (&source.FileSource{Path: dir, Getenv: func(string) string { return "" }}).Load(srv); err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(srv.Handler())
	defer front.Close()

	for _, stream := range []bool{false, true, false, true} {
		resp, err := http.Post(front.URL+"/v1/chat/completions", "application/json", strings.NewReader(chat("gpt-4o", stream)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || (stream && !strings.Contains(string(body), "data: [DONE]")) {
			t.Fatalf("stream=%v: %d %s", stream, resp.StatusCode, body)
		}
	}
	mu.Lock()
	if protos[1] != 0 || protos[2] != 4 {
		t.Errorf("upstreams saw %v requests by HTTP major version, want 4 over HTTP/2", protos)
	}
	mu.Unlock()
	open, idle := gauge(t, srv, "switchyard_upstream_connections_open"), gauge(t, srv, "switchyard_upstream_connections_idle")
	if open != 1 || idle != 1 {
		t.Errorf("gauges: open %v idle %v, want 1 and 1 (the four requests went to the first channel)", open, idle)
	}
}

// gauge reads one gauge from the proxy's registry.
func gauge(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	fams, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// TestIdleConnectionsMatchInFlight: the transport keeps as many idle connections per host as the
// proxy's default in-flight limit, so a burst at that limit dials once (transport.MaxIdlePerHost).
func TestIdleConnectionsMatchInFlight(t *testing.T) {
	if transport.MaxIdlePerHost != DefaultMaxInFlight {
		t.Errorf("transport.MaxIdlePerHost %d, DefaultMaxInFlight %d", transport.MaxIdlePerHost, DefaultMaxInFlight)
	}
}
