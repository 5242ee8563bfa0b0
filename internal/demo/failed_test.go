package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFailedRequestsShowTheirAttempts: a failed client request is listed with its access-log
// lines (and only its own); nothing is written when every request succeeded.
func TestFailedRequestsShowTheirAttempts(t *testing.T) {
	start := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	log := filepath.Join(t.TempDir(), "access.log")
	lines := `{"ts":"2026-12-02T10:00:12Z","requestId":"r-1","channel":"demo/provider-a","model":"gpt-4o","attempt":1,"status":503,"outcome":"server_error"}
{"ts":"2026-12-02T10:00:12Z","requestId":"r-ok","channel":"demo/provider-b","model":"gpt-4o","attempt":1,"status":200,"outcome":"success"}
{"ts":"2026-12-02T10:00:13Z","requestId":"r-1","channel":"demo/provider-b","model":"gpt-4o","attempt":2,"status":503,"outcome":"server_error"}
`
	if err := os.WriteFile(log, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	results := []outcome{
		{At: start.Add(11 * time.Second), Model: "gpt-4o", OK: true, Kind: "ok", RequestID: "r-ok"},
		{At: start.Add(13 * time.Second), Model: "gpt-4o", Kind: "http_503", RequestID: "r-1", Latency: 1200 * time.Millisecond},
	}
	var b strings.Builder
	writeFailedRequests(&b, results, start, log)
	out := b.String()
	for _, want := range []string{"Failed client requests (1;", "0:13.0 gpt-4o non-streamed", "http_503 after 1.2s, request r-1",
		`"attempt":1,"status":503`, `"attempt":2,"status":503`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "r-ok") {
		t.Errorf("a successful request is listed:\n%s", out)
	}
	b.Reset()
	writeFailedRequests(&b, results[:1], start, log)
	if b.Len() != 0 {
		t.Errorf("every request succeeded, yet:\n%s", b.String())
	}
}
