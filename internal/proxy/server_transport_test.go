package proxy

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/switchyard-io/switchyard/internal/proxy/source"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// TestInjectedTransportCarriesTLSChannels: Options.Transport carries every channel's attempts,
// those of a channel with spec.tls too; without it, the TLS channel gets its own transport
// (here one that fails: its CA bundle holds no certificate).
func TestInjectedTransportCarriesTLSChannels(t *testing.T) {
	dir := t.TempDir()
	if err := writeFileErr(dir, rigConfig{}.render("https://upstream-a.invalid", "https://upstream-b.invalid")); err != nil {
		t.Fatal(err)
	}
	table := func() *routing.Table {
		tbl, _, err := source.LoadFiles(dir, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		for i := range tbl.Channels {
			tbl.Channels[i].TLS = &routing.ChannelTLS{CABundle: "not a certificate"}
		}
		return tbl
	}
	ask := func(s *Server) int {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader([]byte(benchBody)))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		return w.Code
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	up := memUpstream{n: new(atomic.Int64)}
	injected := New(Options{Logger: logger, Transport: up, Replica: "test"})
	injected.Apply(table(), dir)
	if code := ask(injected); code != http.StatusOK {
		t.Errorf("with Options.Transport: HTTP %d, want 200 from the injected transport", code)
	}

	own := New(Options{Logger: logger, Replica: "test"})
	own.Apply(table(), dir)
	if code := ask(own); code == http.StatusOK {
		t.Errorf("without Options.Transport: HTTP %d, want the TLS channels' own (failing) transport", code)
	}
}
