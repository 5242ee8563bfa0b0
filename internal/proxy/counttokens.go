package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/tiktoken-go/tokenizer/codec"

	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/proxy/clientapi"
)

// /v1/messages/count_tokens is an endpoint of Anthropic's API alone, and the Anthropic tools
// (Claude Code among them) call it whatever model they are configured with. For a model that no
// anthropic channel serves (OpenAI-compatible, bedrock or vertex channels) the gateway answers it
// itself, with an estimate: the o200k_base tokens (GPT-4o's encoding, from
// github.com/tiktoken-go/tokenizer, which ships its encodings in the module: nothing is fetched)
// of the request's text, its tool definitions and 3 per message, and 1,600 per image (what
// Anthropic counts for an image of about 1.15 megapixels, the largest it takes unscaled). The
// answer says it is an estimate in X-Switchyard-Token-Count. No channel is called: the count
// costs nothing and says nothing about any channel's health.

// countEncoding names the encoding the estimate counts in (the X-Switchyard-Token-Count header).
const countEncoding = "o200k_base"

// Per message and per image, what the estimate adds to the text's tokens.
const (
	tokensPerMessage = 3
	tokensPerImage   = 1600
)

// countCodec loads the encoding on first use (its vocabulary is 200,000 entries: a proxy that
// never counts never builds it). The codec package, not the tokenizer's Get: Get links every
// encoding it knows into the binary (12 MB more, where o200k_base alone adds 7 MB).
var countCodec = sync.OnceValue(codec.NewO200kBase)

// countsLocally reports whether the gateway answers a count_tokens request for mr itself: none
// of the model's channels is an anthropic one, the only provider that serves the endpoint.
func (c *config) countsLocally(mr *modelRoute) bool {
	for _, cand := range mr.Candidates {
		if ch := c.channels[cand.Channel]; ch != nil && ch.Provider == "anthropic" {
			return false
		}
	}
	return true
}

// countRequest is what of a Messages request the estimate reads.
type countRequest struct {
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []json.RawMessage `json:"tools"`
}

// countBlock is one content block: its text, wherever the block type keeps it.
type countBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Name    string          `json:"name"`
	Input   json.RawMessage `json:"input"`
	Content json.RawMessage `json:"content"`
}

// estimateTokens is the estimate of body's input tokens; false for a body that is not a Messages
// request with messages.
func estimateTokens(body []byte) (int, bool) {
	var r countRequest
	if json.Unmarshal(body, &r) != nil || len(r.Messages) == 0 {
		return 0, false
	}
	enc := countCodec()
	var n int
	text := func(s string) {
		if s == "" {
			return
		}
		if c, err := enc.Count(s); err == nil {
			n += c
		} else {
			n += len(s) / 4 // text the encoder refuses (invalid UTF-8) still takes room
		}
	}
	countContent(r.System, text, &n)
	for _, m := range r.Messages {
		n += tokensPerMessage
		countContent(m.Content, text, &n)
	}
	for _, t := range r.Tools {
		text(string(t)) // the definition as the model reads it: name, description, schema
	}
	return n, true
}

// countContent counts a content value: a string, or blocks (text, tool_use input, tool_result
// content, nested; images at tokensPerImage).
func countContent(raw json.RawMessage, text func(string), n *int) {
	if len(raw) == 0 {
		return
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		text(s)
		return
	}
	var blocks []countBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return
	}
	for _, b := range blocks {
		switch b.Type {
		case "image", "document":
			*n += tokensPerImage
		case "tool_use":
			text(b.Name)
			text(string(b.Input))
		case "tool_result":
			countContent(b.Content, text, n)
		default:
			text(b.Text)
		}
	}
}

// serveCountTokens answers a count_tokens request for a model no anthropic channel serves.
func (s *Server) serveCountTokens(w http.ResponseWriter, shape clientapi.Shape, mr *modelRoute, body []byte) {
	n, ok := estimateTokens(body)
	if !ok {
		s.reject(w, shape, http.StatusBadRequest, "invalid_request", "invalid_request_error",
			"messages: a count_tokens request needs a non-empty messages array", 0)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Switchyard-Token-Count", "estimate; encoding="+countEncoding)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(`{"input_tokens":` + strconv.Itoa(n) + `}`))
	s.metrics.Requests.WithLabelValues(mr.Policy.Namespace, mr.Name, "success", failover.CohortPolicy.String()).Inc()
}
