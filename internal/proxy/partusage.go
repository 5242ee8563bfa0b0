package proxy

import (
	"encoding/json"
	"strconv"
)

// The usage of a recovered stream is the sum over its parts: the stream that broke, each
// continuation that broke in turn after adding text, and the part that finished the answer. A
// part that broke reported its figures only rarely (the usage comes last, after the text), so
// what it did not report is estimated:
//
//   - its completion tokens from the text it added to the client's stream, one token per
//     estBytesPerToken bytes;
//   - its prompt tokens from the finishing part's, which the provider reported: the finishing
//     part's prompt is the same request with its own prefill (the text sent before it) as the
//     final assistant turn, so a part's prompt is that figure less the finishing prefill's
//     estimate plus its own prefill's (nothing, for the first part).
//
// Parts that added no text (a continuation refused, timed out, or departing from the text
// sent) are no part of the answer and count nothing here; their attempts are in the access log.

// estBytesPerToken is the rule of thumb for text tokens (about four bytes of English, or two
// Cyrillic characters, per token).
const estBytesPerToken = 4

func estTokens(bytes int) int { return (bytes + estBytesPerToken - 1) / estBytesPerToken }

// streamPart is one part of a stream the client reads as one answer.
type streamPart struct {
	start   int // len(tap.text) when the part began
	prefill int // bytes of the assistant prefill the part continued (0: the first part, a splice)
	text    int // bytes of text it added to the client's stream (set when the part ends)
	// prompt and completion are the figures the part reported (cumulative: the last one counts);
	// known tells whether it reported each.
	prompt, completion           int
	promptKnown, completionKnown bool
}

// reported records a usage figure the part's stream carried.
func (p *streamPart) reported(u *usage) {
	if n := u.PromptTokens + u.InputTokens; n > 0 {
		p.prompt, p.promptKnown = n, true
	}
	if n := u.CompletionTokens + u.OutputTokens; n > 0 {
		p.completion, p.completionKnown = n, true
	}
}

// tokens are an earlier part's figures, reported or estimated; finalPrompt is the finishing
// part's reported prompt (ok false: it reported none, and an unreported prompt counts 0) and
// finalPrefill the bytes of its prefill.
func (p streamPart) tokens(finalPrompt int, finalKnown bool, finalPrefill int) (prompt, completion int, estimated bool) {
	prompt, completion = p.prompt, p.completion
	if !p.completionKnown {
		completion, estimated = estTokens(p.text), true
	}
	if !p.promptKnown && finalKnown {
		prompt, estimated = max(0, finalPrompt-estTokens(finalPrefill)+estTokens(p.prefill)), true
	}
	return prompt, completion, estimated
}

// priorUsage sums the parts before the finishing one.
func priorUsage(parts []streamPart, finalPrompt int, finalKnown bool, finalPrefill int) (prompt, completion int, estimated bool) {
	for _, p := range parts {
		pp, pc, est := p.tokens(finalPrompt, finalKnown, finalPrefill)
		prompt, completion, estimated = prompt+pp, completion+pc, estimated || est
	}
	return prompt, completion, estimated
}

// addToUsage adds the earlier parts' figures to a usage object in the client's API: OpenAI's
// prompt_tokens, completion_tokens and total_tokens, or the Messages API's input_tokens and
// output_tokens (input_tokens is set when the final part's prompt is known, also where the
// event had none: message_start told the client the first part's). Other members are kept.
func addToUsage(raw json.RawMessage, messages bool, prompt, completion int, finalPrompt int, finalKnown bool) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw
	}
	add := func(key string, n int) {
		var v int
		if r, ok := m[key]; ok && json.Unmarshal(r, &v) != nil {
			return // not a number: leave it alone
		}
		m[key] = json.RawMessage(strconv.Itoa(v + n))
	}
	if messages {
		add("output_tokens", completion)
		if finalKnown {
			m["input_tokens"] = json.RawMessage(strconv.Itoa(finalPrompt + prompt))
		}
	} else {
		add("prompt_tokens", prompt)
		add("completion_tokens", completion)
		add("total_tokens", prompt+completion)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
}
