package recovery

import (
	"encoding/json"
	"strconv"

	"github.com/switchyard-io/switchyard/internal/proxy/sse"
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
// Sent) are no part of the answer and count nothing here; their attempts are in the access log.

// estBytesPerToken is the rule of thumb for text tokens (about four bytes of English, or two
// Cyrillic characters, per token).
const estBytesPerToken = 4

// EstTokens estimates the tokens of bytes of text (estBytesPerToken), rounded up.
func EstTokens(bytes int) int { return (bytes + estBytesPerToken - 1) / estBytesPerToken }

// Part is one part of a stream the client reads as one answer.
type Part struct {
	start   int // len(tap.text) when the part began
	Prefill int // bytes of the assistant prefill the part continued (0: the first part, a splice)
	text    int // bytes of text it added to the client's stream (set when the part ends)
	// Prompt and completion are the figures the part reported (cumulative: the last one counts);
	// known tells whether it reported each. prompt counts every input token, cached or not, as
	// OpenAI's prompt_tokens does; cacheRead and cacheCreate are the Messages API's cached shares
	// of it, from message_start.
	Prompt, completion           int
	PromptKnown, completionKnown bool
	cacheRead, cacheCreate       int
	// counted is what of prompt and completion went through addTokens (a usage event of the
	// part's stream) and so reached the client's counts already; message_start's figures do not.
	counted struct{ prompt, completion int }
}

// reported records a usage figure the part's stream carried (and addTokens counted).
func (p *Part) reported(u *sse.Usage) {
	if n := u.Prompt(); n > 0 {
		p.Prompt, p.PromptKnown = n, true
		p.counted.prompt = max(p.counted.prompt, n)
	}
	if n := u.Completion(); n > 0 {
		p.completion, p.completionKnown = n, true
		p.counted.completion = max(p.counted.completion, n)
	}
}

// messageUsage is a Messages API usage object's input figures.
type messageUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// started records the input a message_start announces for the part, when it reported none yet.
func (p *Part) started(u messageUsage) {
	n := u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
	if n > 0 && !p.PromptKnown {
		p.Prompt, p.PromptKnown = n, true
		p.cacheRead, p.cacheCreate = u.CacheReadInputTokens, u.CacheCreationInputTokens
	}
}

// UsageSum is what earlier parts add to the finishing part's usage.
type UsageSum struct {
	prompt, completion     int // prompt: every input token, cached or not
	cacheRead, cacheCreate int // the Messages API's cached shares of prompt
	// Uncounted are the shares of prompt and completion no usage event counted: estimates, and
	// message_start's input (priorTokens adds them to the client's counts).
	Uncounted struct{ Prompt, Completion int }
	Estimated bool
}

// add adds an earlier part's figures, reported or estimated; final is the finishing part (its
// reported prompt and its prefill).
func (s *UsageSum) add(p Part, final *Part) {
	prompt, completion := p.Prompt, p.completion
	if !p.completionKnown {
		completion, s.Estimated = EstTokens(p.text), true
	}
	if !p.PromptKnown && final.PromptKnown {
		prompt, s.Estimated = max(0, final.Prompt-EstTokens(final.Prefill)+EstTokens(p.Prefill)), true
	}
	s.prompt += prompt
	s.completion += completion
	s.cacheRead += p.cacheRead
	s.cacheCreate += p.cacheCreate
	s.Uncounted.Prompt += max(0, prompt-p.counted.prompt)
	s.Uncounted.Completion += max(0, completion-p.counted.completion)
}

// PriorUsage sums the parts before the finishing one.
func priorUsage(parts []Part, final *Part) UsageSum {
	var s UsageSum
	for _, p := range parts {
		s.add(p, final)
	}
	return s
}

// addToUsage adds the earlier parts' figures to a usage object in the client's API, keeping its
// other members:
//
//   - OpenAI's prompt_tokens and completion_tokens, and total_tokens (when there is one) their sum;
//   - the Messages API's output_tokens; input_tokens (uncached input) becomes the finishing
//     part's own — the event's, else its message_start's — plus the earlier parts' uncached
//     input, and the cache counts their sums likewise. With the finishing part's input unknown,
//     input_tokens is left as it is: message_start told the client the first part's.
func addToUsage(raw json.RawMessage, messages bool, sum UsageSum, final *Part) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw
	}
	num := func(key string) (int, bool) {
		var v int
		r, ok := m[key]
		return v, ok && json.Unmarshal(r, &v) == nil
	}
	set := func(key string, n int) { m[key] = json.RawMessage(strconv.Itoa(n)) }
	add := func(key string, n int) {
		if _, ok := m[key]; ok {
			if v, isNum := num(key); isNum {
				set(key, v+n)
			}
			return // not a number: leave it alone
		}
		set(key, n)
	}
	if messages {
		add("output_tokens", sum.completion)
		uncached := sum.prompt - sum.cacheRead - sum.cacheCreate
		base, ok := num("input_tokens")
		if !ok && final.PromptKnown {
			base, ok = final.Prompt-final.cacheRead-final.cacheCreate, true
		}
		if ok {
			set("input_tokens", base+uncached)
		}
		for _, c := range []struct {
			key        string
			prior, own int
		}{{"cache_read_input_tokens", sum.cacheRead, final.cacheRead}, {"cache_creation_input_tokens", sum.cacheCreate, final.cacheCreate}} {
			if c.prior == 0 {
				continue
			}
			if v, isNum := num(c.key); isNum {
				c.own = v
			}
			set(c.key, c.own+c.prior)
		}
	} else {
		add("prompt_tokens", sum.prompt)
		add("completion_tokens", sum.completion)
		p, okP := num("prompt_tokens")
		c, okC := num("completion_tokens")
		if _, has := m["total_tokens"]; has && okP && okC {
			set("total_tokens", p+c)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
}
