package proxy

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/proxy/source"
)

// memUpstream answers in memory: channel A's host answers 503 to every failEvery-th request
// (never when 0), B always 200. No network, so BenchmarkHandler measures the proxy's own request
// path (parse, route, failover decisions, answer) without two loopback round trips' noise.
type memUpstream struct {
	failEvery int
	n         *atomic.Int64
}

const memAnswer = `{"id":"x","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`

func (m memUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	status := 200
	if r.URL.Host == "upstream-a.invalid" && m.failEvery > 0 && m.n.Add(1)%int64(m.failEvery) == 0 {
		status = 503
	}
	body := memAnswer
	if status != 200 {
		body = `{"error":{"message":"overloaded","type":"server_error","code":null}}`
	}
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
}

// BenchmarkHandler: one request through the handler, in memory, on a health clock that moves a
// second per request. ok: A answers; failover-1in5: every fifth request A answers 503 and B
// takes over (the planner's failure path: a second pick, in another failure domain, within the
// retry budget), an error rate below chat's ejection threshold. client-key: ok with GatewayClients
// in the config, the request carrying a key (hashed, looked up, counted against its limits).
func BenchmarkHandler(b *testing.B) {
	for _, tc := range []struct {
		name      string
		failEvery int
		clientKey bool // with GatewayClients: the key checked, the client's limits counted
	}{{"ok", 0, false}, {"failover-1in5", 5, false}, {"client-key", 0, true}} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			if err := writeFileErr(dir, rigConfig{}.render("http://upstream-a.invalid", "http://upstream-b.invalid")); err != nil {
				b.Fatal(err)
			}
			if tc.clientKey {
				m := clientsManifest("one: "+clientKeyOne, "limits: {requestsPerMinute: 1000000000, tokensPerMinute: 1000000000}")
				if err := os.WriteFile(filepath.Join(dir, "clients.yaml"), []byte(m), 0o600); err != nil {
					b.Fatal(err)
				}
			}
			t, _, err := source.LoadFiles(dir, func(string) string { return "" })
			if err != nil {
				b.Fatal(err)
			}
			clock := &fakeClock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
			s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clock,
				Transport: memUpstream{failEvery: tc.failEvery, n: new(atomic.Int64)}})
			s.Apply(t, dir)
			h := s.Handler()
			body := []byte(benchBody)
			b.ReportAllocs()
			for b.Loop() {
				clock.Advance(time.Second)
				req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if tc.clientKey {
					req.Header.Set("Authorization", "Bearer "+clientKeyOne)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
