package proxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/audit"
)

func TestPartTokens(t *testing.T) {
	for _, c := range []struct {
		name                  string
		part                  streamPart
		finalPrompt           int
		finalKnown            bool
		finalPrefill          int
		wantPrompt, wantCompl int
		wantEstimated         bool
	}{
		{"reported figures count as they are", streamPart{text: 40, prompt: 12, completion: 9, promptKnown: true, completionKnown: true}, 30, true, 40, 12, 9, false},
		{"the first part: the final prompt less the final prefill", streamPart{text: 41}, 30, true, 41, 30 - 11, 11, true},
		{"a continuation's part keeps its own prefill", streamPart{prefill: 8, text: 8}, 30, true, 16, 30 - 4 + 2, 2, true},
		{"a splice finishes with the original prompt", streamPart{text: 10}, 25, true, 0, 25, 3, true},
		{"no final prompt: an unreported prompt counts nothing", streamPart{text: 4}, 0, false, 4, 0, 1, true},
		{"never below zero", streamPart{text: 400}, 3, true, 400, 0, 100, true},
		{"a prompt from message_start, the completion estimated", streamPart{text: 8, prompt: 7, promptKnown: true}, 30, true, 8, 7, 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, n, est := c.part.tokens(c.finalPrompt, c.finalKnown, c.finalPrefill)
			if p != c.wantPrompt || n != c.wantCompl || est != c.wantEstimated {
				t.Fatalf("tokens = %d, %d, estimated %v; want %d, %d, %v", p, n, est, c.wantPrompt, c.wantCompl, c.wantEstimated)
			}
		})
	}
	p, n, est := priorUsage([]streamPart{{text: 4}, {prefill: 4, text: 4}}, 20, true, 8)
	if p != (20-2+0)+(20-2+1) || n != 2 || !est {
		t.Fatalf("priorUsage = %d, %d, %v", p, n, est)
	}
}

func TestAddToUsage(t *testing.T) {
	for _, c := range []struct {
		name, in string
		messages bool
		want     string
	}{
		{"chat", `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0}}`, false,
			`{"completion_tokens":8,"prompt_tokens":17,"prompt_tokens_details":{"cached_tokens":0},"total_tokens":25}`},
		{"chat without a total", `{"prompt_tokens":10,"completion_tokens":5}`, false, `{"completion_tokens":8,"prompt_tokens":17,"total_tokens":10}`},
		{"a figure that is no number is left alone", `{"prompt_tokens":"x","completion_tokens":5,"total_tokens":15}`, false,
			`{"completion_tokens":8,"prompt_tokens":"x","total_tokens":25}`},
		{"messages: input_tokens set from the final prompt", `{"output_tokens":5}`, true, `{"input_tokens":27,"output_tokens":8}`},
		{"messages: a cumulative input_tokens replaced by the sum", `{"input_tokens":20,"output_tokens":5,"cache_read_input_tokens":3}`, true,
			`{"cache_read_input_tokens":3,"input_tokens":27,"output_tokens":8}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := string(addToUsage(json.RawMessage(c.in), c.messages, 7, 3, 20, true)); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
	if got := string(addToUsage(json.RawMessage(`{"output_tokens":5}`), true, 7, 3, 0, false)); got != `{"output_tokens":8}` {
		t.Fatalf("an unknown final prompt must leave input_tokens out: %s", got)
	}
}

// channelTokens is switchyard_tokens_total of one channel and type for model m: what its provider
// reported.
func channelTokens(t *testing.T, metrics, channel, typ string) int {
	t.Helper()
	return modelTokens(t, metrics, channel, "m", typ)
}

func modelTokens(t *testing.T, metrics, channel, model, typ string) int {
	t.Helper()
	re := regexp.MustCompile(`switchyard_tokens_total\{channel="` + channel + `",model="` + model + `",namespace="[^"]*",type="` + typ + `"\} (\d+)`)
	m := re.FindStringSubmatch(metrics)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// lastUsage is the usage object of the last chat chunk or Messages event of a stream that has one.
func lastUsage(t *testing.T, body string) map[string]int {
	t.Helper()
	var out map[string]int
	forEachData([]byte(body), func(_ string, data []byte) {
		var ev struct {
			Usage   map[string]json.RawMessage `json:"usage"`
			Message struct {
				Usage map[string]json.RawMessage `json:"usage"`
			} `json:"message"`
		}
		if json.Unmarshal(data, &ev) != nil || ev.Usage == nil {
			return
		}
		out = map[string]int{}
		for k, v := range ev.Usage {
			var n int
			if json.Unmarshal(v, &n) == nil {
				out[k] = n
			}
		}
	})
	if out == nil {
		t.Fatalf("no usage in the stream:\n%s", body)
	}
	return out
}

// messageStartInput is the input_tokens a Messages stream's message_start announced.
func messageStartInput(body string) int {
	n := -1
	forEachData([]byte(body), func(_ string, data []byte) {
		var ev struct {
			Type    string `json:"type"`
			Message struct {
				Usage struct {
					InputTokens int `json:"input_tokens"`
				} `json:"usage"`
			} `json:"message"`
		}
		if json.Unmarshal(data, &ev) == nil && ev.Type == "message_start" {
			n = ev.Message.Usage.InputTokens
		}
	})
	return n
}

// TestRecoveryUsageIsTheSumOfItsParts: the usage a client reads at the end of a recovered stream
// adds the broken parts' (estimated: they broke before their usage) to the finishing part's, as
// reported by its provider; the audit line counts the same and says it holds estimates.
func TestRecoveryUsageIsTheSumOfItsParts(t *testing.T) {
	const full = "Hello world, and more"
	t.Run("chat client, one break", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "audit.log")
		log, err := audit.Open(audit.Options{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		rr := newRecoveryRigOpts(t, func(o *Options) { o.Audit = log }, "", recoveryChannel{"openai", true}, recoveryChannel{"openai", true})
		rr.behave("cut;after=1;splits=6,12;text="+full, "continue;separate_usage;text="+full)
		body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
		rep := rr.post("/v1/chat/completions", body)
		readStream(t, rep, false).mustBe(t, full)
		got := lastUsage(t, rep.body)
		m := rr.metrics()
		pf, cf := channelTokens(t, m, "c1", "prompt"), channelTokens(t, m, "c1", "completion")
		if pf == 0 || cf == 0 || channelTokens(t, m, "c0", "completion") != 0 {
			t.Fatalf("the mocks' usage: c1 %d/%d, c0 %d (want c1's reported, nothing from the cut c0)", pf, cf, channelTokens(t, m, "c0", "completion"))
		}
		sent := len("Hello ")
		wantPrompt := pf + max(0, pf-estTokens(sent))
		wantCompl := cf + estTokens(sent)
		if got["prompt_tokens"] != wantPrompt || got["completion_tokens"] != wantCompl || got["total_tokens"] != wantPrompt+wantCompl {
			t.Fatalf("client's usage %v, want prompt %d, completion %d, total %d (continuation reported %d/%d)", got, wantPrompt, wantCompl, wantPrompt+wantCompl, pf, cf)
		}
		if err := log.Close(); err != nil {
			t.Fatal(err)
		}
		raw, _ := os.ReadFile(path)
		var line audit.Line
		if err := json.Unmarshal([]byte(strings.TrimSpace(string(raw))), &line); err != nil {
			t.Fatalf("audit line %q: %v", raw, err)
		}
		if line.Tokens.Prompt != int64(wantPrompt) || line.Tokens.Completion != int64(wantCompl) || !line.Tokens.Estimated || len(line.Attempts) != 2 {
			t.Fatalf("audit line %s: want the client's usage, estimated, and both attempts", raw)
		}
	})
	t.Run("chat client, two breaks", func(t *testing.T) {
		const text = "one two three four"
		rr := newRecoveryRig(t, "", recoveryChannel{"openai", false}, recoveryChannel{"openai", true}, recoveryChannel{"openai", true})
		rr.behave("cut;after=1;splits=4;text="+text, "cut;prefill;after=1;splits=4;text="+text, "continue;text="+text)
		body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
		rep := rr.post("/v1/chat/completions", body)
		readStream(t, rep, false).mustBe(t, text)
		got := lastUsage(t, rep.body)
		m := rr.metrics()
		pf, cf := channelTokens(t, m, "c2", "prompt"), channelTokens(t, m, "c2", "completion")
		// parts: "one " (no prefill), "two " (prefill "one "); the finisher's prefill is "one two ".
		wantPrompt := pf + max(0, pf-estTokens(8)) + max(0, pf-estTokens(8)+estTokens(4))
		wantCompl := cf + estTokens(4) + estTokens(4)
		if got["prompt_tokens"] != wantPrompt || got["completion_tokens"] != wantCompl {
			t.Fatalf("client's usage %v, want prompt %d, completion %d (finisher reported %d/%d)", got, wantPrompt, wantCompl, pf, cf)
		}
	})
	t.Run("messages client, anthropic channels", func(t *testing.T) {
		rr := newRecoveryRig(t, "", recoveryChannel{"anthropic", true}, recoveryChannel{"anthropic", true})
		rr.behave("cut;after=1;splits=6,12;text="+full, "continue;text="+full)
		rep := rr.post("/v1/messages", messagesStreamBody)
		readStream(t, rep, true).mustBe(t, full)
		got := lastUsage(t, rep.body)
		first := messageStartInput(rep.body)
		cf := channelTokens(t, rr.metrics(), "c1", "completion")
		if first <= 0 || cf == 0 {
			t.Fatalf("message_start input_tokens %d, continuation's output %d: want both reported", first, cf)
		}
		// The first part's prompt is known from its message_start; its output is estimated from
		// "Hello" (the prefill Anthropic gets has the trailing space trimmed, but the client got it).
		if got["output_tokens"] != cf+estTokens(len("Hello ")) || got["input_tokens"] <= first {
			t.Fatalf("client's usage %v: want output_tokens %d and input_tokens over the first part's %d", got, cf+estTokens(6), first)
		}
	})
}
