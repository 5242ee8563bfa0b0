package mockprovider

import (
	"encoding/json"
	"net/http"
	"strings"
)

// prefill is the text of the request's final message when it is the assistant's (a prefill):
// its content string, or its text blocks (Messages API) joined.
func (x *exchange) prefill() (string, bool) {
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(x.req.Messages, &msgs) != nil || len(msgs) == 0 || msgs[len(msgs)-1].Role != "assistant" {
		return "", false
	}
	content := msgs[len(msgs)-1].Content
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(content, &parts)
	for _, p := range parts {
		if p.Type == "text" {
			s += p.Text
		}
	}
	return s, true
}

// fullText is the whole answer a continuation is cut from: Text, or the mock's own.
func (x *exchange) fullText() string {
	if x.b.Text != "" {
		return x.b.Text
	}
	y := *x
	y.b.Mode, y.b.ChunkBytes, y.b.Splits, y.b.Prefill = ModeOK, 0, "", false
	return y.text()
}

// continuation is ModeContinue's answer text: the rest of the whole answer after the prefill,
// or the whole answer when there is none (or it does not begin the answer).
func (x *exchange) continuation() string {
	full := x.fullText()
	p, ok := x.prefill()
	if !ok || !strings.HasPrefix(full, p) {
		return full
	}
	rest := full[len(p):]
	if x.b.ReemitSpace {
		if t := strings.TrimRight(p, " \t\r\n"); len(t) < len(p) {
			rest = p[len(t):] + rest
		}
	}
	return rest
}

// refusePrefill answers ModeContinue's 400s (true when it did): Anthropic's for a prefill ending
// in whitespace, and a model's without prefill for any (NoPrefill).
func (x *exchange) refusePrefill() bool {
	p, ok := x.prefill()
	switch {
	case !ok:
		return false
	case x.b.NoPrefill:
		x.errorJSON(http.StatusBadRequest, "invalid_request_error", "messages", "",
			"This model does not support assistant message prefill. The conversation must end with a user message.")
		return true
	case x.ep == epMessages && strings.TrimRight(p, " \t\r\n") != p:
		x.errorJSON(http.StatusBadRequest, "invalid_request_error", "messages", "",
			"messages: final assistant content cannot end with trailing whitespace")
		return true
	}
	return false
}
