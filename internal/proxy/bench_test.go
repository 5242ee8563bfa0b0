package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkHotPath measures route + forward through the proxy's handler against an in-process
// upstream that answers a fixed small JSON body: the proxy's own cost per request, plus one
// loopback round trip (compare BenchmarkDirect for the upstream alone).
func BenchmarkHotPath(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(fixedAnswer))
	defer up.Close()
	dir := b.TempDir()
	cfg := rigConfig{}.render(up.URL, up.URL)
	if err := writeFileErr(dir, cfg); err != nil {
		b.Fatal(err)
	}
	t, _, err := LoadFiles(dir, func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.Apply(t, dir)
	front := httptest.NewServer(s.Handler())
	defer front.Close()
	benchPost(b, front.URL+"/v1/chat/completions")
}

// BenchmarkDirect is the same client against the upstream alone: the baseline for BenchmarkHotPath.
func BenchmarkDirect(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(fixedAnswer))
	defer up.Close()
	benchPost(b, up.URL+"/v1/chat/completions")
}

const benchBody = `{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]}`

func benchPost(b *testing.B, url string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, err := client.Post(url, "application/json", strings.NewReader(benchBody))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

func fixedAnswer(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
}
