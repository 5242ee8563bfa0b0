package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchyard-io/switchyard/internal/proxy/source"
)

// BenchmarkHotPathClaude is BenchmarkHotPath's request (an OpenAI chat completion) to a model on
// an Anthropic channel: the same route and forward, plus the translation to the Messages API and
// of its answer back. Run it beside BenchmarkHotPath for the translation's share.
func BenchmarkHotPathClaude(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}`)
	}))
	defer up.Close()
	dir := b.TempDir()
	cfg := fmt.Sprintf(`apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: claude}
spec:
  provider: anthropic
  baseURL: %s/v1
  models: [{name: gpt-4o}]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: claude}]
`, up.URL)
	if err := writeFileErr(dir, cfg); err != nil {
		b.Fatal(err)
	}
	t, _, err := source.LoadFiles(dir, func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.Apply(t, dir)
	front := httptest.NewServer(s.Handler())
	defer front.Close()
	benchPost(b, front.URL+"/v1/chat/completions")
}
