package proxy

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/switchyard-io/switchyard/internal/pii"
	"github.com/switchyard-io/switchyard/internal/proxy/clientapi"
	"github.com/switchyard-io/switchyard/internal/proxy/piimask"
	"github.com/switchyard-io/switchyard/internal/proxy/sse"
)

// BenchmarkMaskRequest: masking alone (walk the body, scan every text, splice the placeholders
// in), per KiB of prompt, against parsing the body for routing, which every request pays, and
// against the walk alone (no detector).
func BenchmarkMaskRequest(b *testing.B) {
	sc, err := pii.Compile(pii.Config{Detectors: []string{pii.Email}})
	if err != nil {
		b.Fatal(err)
	}
	for _, kb := range []int{1, 16, 64} {
		body := piiBenchPrompt(kb)
		b.Run(fmt.Sprintf("prompt=%dKB/parse", kb), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := clientapi.ParseRequest(body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("prompt=%dKB/walk", kb), func(b *testing.B) {
			// The walker with a detector that finds nothing: what the proxy adds to the detectors.
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := piimask.MaskRequest("/chat/completions", body, func(s string) string { return s }); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("prompt=%dKB/mask", kb), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := piimask.MaskRequest("/chat/completions", body, sc.NewSession().Mask); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStreamEventPII: one chat.completion.chunk through the relay's per-event work with PII
// off (the event is read and written as it came) and with restore on (its content delta goes
// through the choice's stream restorer).
func BenchmarkStreamEventPII(b *testing.B) {
	ev := []byte("data: " + `{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	sc, _ := pii.Compile(pii.Config{Detectors: []string{pii.Email}})
	ss := sc.NewSession()
	ss.Mask("ann@example.com")
	for _, mode := range []string{"off", "restore"} {
		b.Run("pii="+mode, func(b *testing.B) {
			stream := bytes.Repeat(ev, 1024)
			var sr *piimask.StreamRestore
			if mode == "restore" {
				sr = piimask.NewStreamRestore(ss, "/chat/completions")
			}
			b.ReportAllocs()
			n := 0
			r := sse.NewReader(bytes.NewReader(stream))
			for b.Loop() {
				if n == 1024 {
					r, n = sse.NewReader(bytes.NewReader(stream)), 0
				}
				e, err := r.Next()
				if err != nil {
					b.Fatal(err)
				}
				n++
				out := e.Raw
				if sr != nil {
					out = sr.Event(&e)
				}
				if len(out) == 0 {
					b.Fatal("empty")
				}
			}
		})
	}
}
