package sse

import (
	"encoding/json"
	"testing"
)

// BenchmarkStreamEvent: reading one chat.completion.chunk, against json.Unmarshal of the event.
func BenchmarkStreamEvent(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}`)
	b.Run("hot-path", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := decodeEvent(data); !ok {
				b.Fatal("malformed")
			}
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var body eventBody
			if err := json.Unmarshal(data, &body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAnswerUsage: finding the usage of a non-streamed answer, against json.Unmarshal.
func BenchmarkAnswerUsage(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-123","object":"chat.completion","created":1700000000,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help you today? I can answer questions, write, summarise and more."},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":25,"completion_tokens":19,"total_tokens":44},"system_fingerprint":"fp_1"}`)
	b.Run("hot-path", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := AnswerUsage(body); !ok {
				b.Fatal("no usage")
			}
		}
	})
	b.Run("unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v struct {
				Usage *Usage `json:"usage"`
			}
			if json.Unmarshal(body, &v) != nil || v.Usage == nil {
				b.Fatal("no usage")
			}
		}
	})
}
