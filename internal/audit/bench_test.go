package audit

import (
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkWrite is the writer's cost per line: queue, encode, hash and append to a file, with
// the file closed (and flushed) at the end.
func BenchmarkWrite(b *testing.B) {
	path := filepath.Join(b.TempDir(), "audit.log")
	l, err := Open(Options{Path: path, Queue: b.N + 1})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l.Record(&Line{TS: time.Unix(int64(i), 0).UTC(), RequestID: "r-0123456789abcdef", Client: "team-search/search-backend",
			KeyID: "3f9a1c2e", Model: "gpt-4o", Policy: "llm/chat", Status: 200,
			Attempts: []Attempt{{Channel: "llm/openai-direct", Status: 200, Outcome: "success", Ms: 640}},
			Tokens:   Tokens{Prompt: 12, Completion: 80}})
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if l.Lost() != 0 {
		b.Fatalf("%d lines lost", l.Lost())
	}
}
