package recovery

import (
	"encoding/json"
	"testing"
)

func TestPriorUsage(t *testing.T) {
	known := func(p Part) Part {
		p.PromptKnown, p.completionKnown = true, true
		p.counted.prompt, p.counted.completion = p.Prompt, p.completion
		return p
	}
	final := Part{Prefill: 41, Prompt: 30, PromptKnown: true}
	for _, c := range []struct {
		name                   string
		parts                  []Part
		final                  Part
		prompt, completion     int
		uncountedP, uncountedC int
		estimated              bool
	}{
		{"reported figures count as they are, and were counted", []Part{known(Part{text: 40, Prompt: 12, completion: 9})}, final, 12, 9, 0, 0, false},
		{"the first part: the final prompt less the final prefill", []Part{{text: 41}}, final, 30 - 11, 11, 30 - 11, 11, true},
		{"a continuation's part keeps its own prefill", []Part{{Prefill: 8, text: 8}}, Part{Prefill: 16, Prompt: 30, PromptKnown: true}, 30 - 4 + 2, 2, 30 - 4 + 2, 2, true},
		{"a splice finishes with the original prompt", []Part{{text: 10}}, Part{Prompt: 25, PromptKnown: true}, 25, 3, 25, 3, true},
		{"no final prompt: an unreported prompt counts nothing", []Part{{text: 4}}, Part{Prefill: 4}, 0, 1, 0, 1, true},
		{"never below zero", []Part{{text: 400}}, Part{Prefill: 400, Prompt: 3, PromptKnown: true}, 0, 100, 0, 100, true},
		{"message_start's prompt is known but no usage event counted it", []Part{{text: 8, Prompt: 7, PromptKnown: true}}, final, 7, 2, 7, 2, true},
		{"per-chunk usage (vLLM): counted as it came", []Part{{text: 6, Prompt: 10, completion: 2, PromptKnown: true, completionKnown: true, counted: struct{ prompt, completion int }{10, 2}}}, final, 10, 2, 0, 0, false},
		{"two parts", []Part{{text: 4}, {Prefill: 4, text: 4}}, Part{Prefill: 8, Prompt: 20, PromptKnown: true}, (20 - 2) + (20 - 2 + 1), 2, (20 - 2) + (20 - 2 + 1), 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := priorUsage(c.parts, &c.final)
			if s.prompt != c.prompt || s.completion != c.completion || s.Uncounted.Prompt != c.uncountedP || s.Uncounted.Completion != c.uncountedC || s.Estimated != c.estimated {
				t.Fatalf("priorUsage = %+v; want prompt %d, completion %d, uncounted %d/%d, estimated %v", s, c.prompt, c.completion, c.uncountedP, c.uncountedC, c.estimated)
			}
		})
	}
	cached := priorUsage([]Part{{text: 4, Prompt: 110, PromptKnown: true, cacheRead: 100}}, &final)
	if cached.prompt != 110 || cached.cacheRead != 100 {
		t.Fatalf("the cached share travels with the part: %+v", cached)
	}
}

func TestAddToUsage(t *testing.T) {
	sum := UsageSum{prompt: 7, completion: 3}
	final := &Part{Prompt: 20, PromptKnown: true}
	for _, c := range []struct {
		name, in string
		messages bool
		sum      UsageSum
		final    *Part
		want     string
	}{
		{"chat", `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0}}`, false, sum, final,
			`{"completion_tokens":8,"prompt_tokens":17,"prompt_tokens_details":{"cached_tokens":0},"total_tokens":25}`},
		{"chat without a total gets none", `{"prompt_tokens":10,"completion_tokens":5}`, false, sum, final, `{"completion_tokens":8,"prompt_tokens":17}`},
		{"a figure that is no number is left alone", `{"prompt_tokens":"x","completion_tokens":5,"total_tokens":15}`, false, sum, final,
			`{"completion_tokens":8,"prompt_tokens":"x","total_tokens":15}`},
		{"messages: input_tokens from the final part's message_start", `{"output_tokens":5}`, true, sum, final, `{"input_tokens":27,"output_tokens":8}`},
		{"messages: the event's own input_tokens", `{"input_tokens":20,"output_tokens":5}`, true, sum, &Part{}, `{"input_tokens":27,"output_tokens":8}`},
		{"messages: an unknown final input leaves input_tokens out", `{"output_tokens":5}`, true, sum, &Part{}, `{"output_tokens":8}`},
		{"messages: uncached input and cache reads summed apart", `{"output_tokens":3}`, true, UsageSum{prompt: 110, completion: 2, cacheRead: 100},
			&Part{Prompt: 110, PromptKnown: true, cacheRead: 100}, `{"cache_read_input_tokens":200,"input_tokens":20,"output_tokens":5}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := string(addToUsage(json.RawMessage(c.in), c.messages, c.sum, c.final)); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}
