package mockprovider

import (
	"encoding/json"
	"net/http"
	"strings"
)

// prefill is the text of the request's final message when it is the assistant's (a prefill).
func (x *exchange) prefill() (string, bool) { return prefillText(x.req.Messages) }

// prefillText is the text of the final message of messages when it is the assistant's: its
// content string, or its text blocks (Messages API) joined.
func prefillText(messages json.RawMessage) (string, bool) {
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(messages, &msgs) != nil || len(msgs) == 0 || msgs[len(msgs)-1].Role != "assistant" {
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

// continuation is ModeContinue's answer text (continueText).
func (x *exchange) continuation() string {
	p, ok := x.prefill()
	return continueText(x.fullText(), p, ok, x.b.ReemitSpace)
}

// continueText is the rest of the whole answer full after the prefill p, or the whole answer when
// there is none (ok false) or it does not begin the answer. reemit: the prefill's trailing
// whitespace is written again, as some servers that continue the exact prefill do.
func continueText(full, p string, ok, reemit bool) string {
	if !ok || !strings.HasPrefix(full, p) {
		return full
	}
	rest := full[len(p):]
	if reemit {
		if t := strings.TrimRight(p, " \t\r\n"); len(t) < len(p) {
			rest = p[len(t):] + rest
		}
	}
	return rest
}

// prefillRefusal is the 400 message a model gives a prefill it will not continue: any, for a
// model without prefill (NoPrefill); one ending in whitespace, for Anthropic's API and the clouds
// serving it (anthropic). "" when it continues.
func prefillRefusal(p string, ok, noPrefill, anthropic bool) string {
	switch {
	case !ok:
		return ""
	case noPrefill:
		return "This model does not support assistant message prefill. The conversation must end with a user message."
	case anthropic && strings.TrimRight(p, " \t\r\n") != p:
		return "messages: final assistant content cannot end with trailing whitespace"
	}
	return ""
}

// refusePrefill answers ModeContinue's 400s (true when it did): Anthropic's for a prefill ending
// in whitespace, and a model's without prefill for any (NoPrefill).
func (x *exchange) refusePrefill() bool {
	p, ok := x.prefill()
	msg := prefillRefusal(p, ok, x.b.NoPrefill, x.ep == epMessages)
	if msg == "" {
		return false
	}
	x.errorJSON(http.StatusBadRequest, "invalid_request_error", "messages", "", msg)
	return true
}
