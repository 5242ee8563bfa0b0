package proxy

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/audit"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
)

// BenchmarkHandlerAudited is BenchmarkHandler's ok case with the audit log on (a file): the
// request path's share of the audit trail (the line's fields, the queue; the writing is the
// writer goroutine's).
func BenchmarkHandlerAudited(b *testing.B) {
	dir := b.TempDir()
	if err := writeFileErr(dir, rigConfig{}.render("http://upstream-a.invalid", "http://upstream-b.invalid")); err != nil {
		b.Fatal(err)
	}
	t, _, err := source.LoadFiles(dir, func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	log, err := audit.Open(audit.Options{Path: filepath.Join(b.TempDir(), "audit.log")})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	clock := &fakeClock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clock,
		Transport: memUpstream{n: new(atomic.Int64)}, Audit: log})
	s.Apply(t, dir)
	h := s.Handler()
	body := []byte(benchBody)
	b.ReportAllocs()
	for b.Loop() {
		clock.Advance(time.Second)
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
