package anthropic

import (
	"os"
	"testing"
)

// BenchmarkMessagesFromChat: translating a multi-turn chat request with tools (the request side
// of every OpenAI request to an Anthropic channel).
func BenchmarkMessagesFromChat(b *testing.B) {
	body, err := os.ReadFile("testdata/chat_request/tool_result.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MessagesFromChat(body, Target{Provider: "anthropic", Model: "claude-sonnet-4-5-20250929", MaxTokens: 4096}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChatStreamEvent: one text delta of a Messages stream turned into a chat chunk.
func BenchmarkChatStreamEvent(b *testing.B) {
	s := NewChatStream(false, 1, nil)
	_, _ = s.Event([]byte(`{"type":"message_start","message":{"id":"msg_1","model":"claude","usage":{"input_tokens":3}}}`))
	ev := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Event(ev); err != nil {
			b.Fatal(err)
		}
	}
}
