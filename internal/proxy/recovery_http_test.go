package proxy

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchyard-io/switchyard/internal/failover"
)

// Stream recovery over real HTTP, where the broken stream is what real servers send: a character
// split across events as raw bytes, a channel that continues its own broken stream, a tool call
// cut midway. Each case ends with the exact whole answer or an in-band error, never a truncated
// success.

// recoveryPairings are the client API and channel formats TestRecoveryCutEverywhere covers: the
// first channel breaks, the second continues (its capabilities.prefill as given).
var recoveryPairings = []struct {
	name     string
	messages bool
	chans    []recoveryChannel
}{
	{"chat client, openai channels with prefill", false, []recoveryChannel{{"openai", true}, {"openai", true}}},
	{"chat client, anthropic channels", false, []recoveryChannel{{"anthropic", true}, {"anthropic", true}}},
	{"messages client, anthropic channels", true, []recoveryChannel{{"anthropic", true}, {"anthropic", true}}},
	{"messages client, anthropic then openai with prefill", true, []recoveryChannel{{"anthropic", true}, {"openai", true}}},
	{"messages client, openai channels with prefill", true, []recoveryChannel{{"openai", true}, {"openai", true}}},
	{"messages client, openai then anthropic", true, []recoveryChannel{{"openai", false}, {"anthropic", true}}},
	{"chat client, openai then anthropic", false, []recoveryChannel{{"openai", false}, {"anthropic", true}}},
}

// byteSplits is every byte offset inside s, for the mock's splits: one byte per event, as a
// byte-level tokenizer streams it.
func byteSplits(s string) string {
	var out []string
	for i := 1; i < len(s); i++ {
		out = append(out, fmt.Sprint(i))
	}
	return strings.Join(out, ",")
}

// withoutCutCharacter is s without the first bytes of a character whose rest is missing.
func withoutCutCharacter(s string) string {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return s[:i]
			}
			return s
		}
	}
	return s
}

// TestRecoveryCutInsideCharacter cuts a stream that sends one byte per event (a multi-byte
// character's bytes raw across events, as llama.cpp-style servers do) after every byte of an
// answer with 2-, 3- and 4-byte characters. The client must assemble exactly the answer's bytes;
// the continuation's prefill is the text sent without the cut character's first bytes (and, for
// an anthropic target, without trailing whitespace), and the proxy drops those bytes from the
// continuation, which begins with the whole character.
func TestRecoveryCutInsideCharacter(t *testing.T) {
	splits := byteSplits(recoveryAnswer)
	for _, c := range recoveryPairings {
		t.Run(c.name, func(t *testing.T) {
			rr := newRecoveryRig(t, "", c.chans...)
			path, body := "/v1/chat/completions", chatStreamBody
			if c.messages {
				path, body = "/v1/messages", messagesStreamBody
			}
			// Unbroken first: the stream's raw bytes must reach the client as they are.
			rr.behave("ok;raw_bytes;splits=" + splits + ";text=" + recoveryAnswer)
			if got := readStream(t, rr.post(path, body), c.messages); got.text != recoveryAnswer {
				t.Fatalf("unbroken stream of raw bytes: client got %q, want %q", got.text, recoveryAnswer)
			}
			rr.mocks[0].Reset()
			inside := 0
			for after := 1; after < len(recoveryAnswer); after++ {
				// One break every 10 s: each continuation draws on the retry budget, whose floor
				// (30 in 10 s) this many breaks in one second would spend.
				rr.clock.Advance(failover.BudgetBuckets * time.Second)
				rr.behave("cut;raw_bytes;after="+fmt.Sprint(after)+";splits="+splits+";text="+recoveryAnswer, "continue;text="+recoveryAnswer)
				sent := recoveryAnswer[:after]
				got := readStream(t, rr.post(path, body), c.messages)
				if got.errored || !got.complete || got.text != recoveryAnswer {
					t.Fatalf("cut after byte %d (sent %q): client got %q (complete %v, in-band error %v), want the whole answer %q",
						after, sent, got.text, got.complete, got.errored, recoveryAnswer)
				}
				got.mustBe(t, recoveryAnswer)
				want := withoutCutCharacter(sent)
				if want != sent {
					inside++
				}
				if c.chans[1].provider == "anthropic" {
					want = strings.TrimRight(want, " \t\n")
				}
				if p := prefillOf(t, rr.mocks[1].LastBody()); p != want {
					t.Fatalf("cut after byte %d (sent %q): prefill %q, want %q", after, sent, p, want)
				}
			}
			if inside != 1+2+2+3 { // ö, 中, 文, 😀
				t.Fatalf("%d cuts fell inside a character, want 8", inside)
			}
		})
	}
}

// TestRecoverySameChannelContinues: when the channel that broke is the only one whose model has
// prefill, a cut or an error event is continued on that same channel (it broke once, then
// answers); a stall is not (a stalled provider does not get a second stall): the stream ends with
// the in-band error, or, for a deterministic request, is spliced from another channel.
func TestRecoverySameChannelContinues(t *testing.T) {
	const full = "Hello world, again"
	for _, c := range []struct {
		name, mode string
		messages   bool
		chans      []recoveryChannel
	}{
		{"cut, chat client, openai channel", "cut", false, []recoveryChannel{{"openai", true}, {"openai", false}}},
		{"error event, chat client, openai channel", "error_event", false, []recoveryChannel{{"openai", true}, {"openai", false}}},
		{"cut, messages client, anthropic channel", "cut", true, []recoveryChannel{{"anthropic", true}, {"openai", false}}},
		{"error event, messages client, anthropic channel", "error_event", true, []recoveryChannel{{"anthropic", true}, {"openai", false}}},
		{"cut, chat client, the only channel", "cut", false, []recoveryChannel{{"anthropic", true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rr := newRecoveryRig(t, "", c.chans...)
			behaviours := []string{c.mode + ";prefill;break_first=1;after=1;splits=6;text=" + full}
			if len(c.chans) > 1 {
				behaviours = append(behaviours, "continue;text="+full)
			}
			rr.behave(behaviours...)
			path, body := "/v1/chat/completions", chatStreamBody
			if c.messages {
				path, body = "/v1/messages", messagesStreamBody
			}
			readStream(t, rr.post(path, body), c.messages).mustBe(t, full)
			if n := rr.mocks[0].Total(); n != 2 {
				t.Fatalf("the channel that broke got %d request(s), want 2 (the stream, its continuation)", n)
			}
			want := "Hello "
			if c.chans[0].provider == "anthropic" {
				want = "Hello"
			}
			if p := prefillOf(t, rr.mocks[0].LastBody()); p != want {
				t.Fatalf("the continuation's prefill = %q, want %q", p, want)
			}
			if len(rr.mocks) > 1 && rr.mocks[1].Total() != 0 {
				t.Fatalf("the channel without prefill got %d request(s)", rr.mocks[1].Total())
			}
		})
	}

	const det = `{"model":"m","stream":true,"temperature":0,"messages":[{"role":"user","content":"hi"}]}`
	stall := "stall;prefill;break_first=1;after=1;splits=6;text=" + full
	// The stalled channel breaks its first stream only: a continuation sent to it would finish
	// the answer, which is what must not happen.
	mustNotContinueOnTheStalled := func(t *testing.T, rr *recoveryRig) {
		t.Helper()
		if n := rr.mocks[0].Total(); n > 1 {
			t.Fatalf("the stalled channel got %d requests: a stall must not be continued where it stalled", n)
		}
	}
	t.Run("stall: not the same channel, and nothing else can continue", func(t *testing.T) {
		rr := newRecoveryRig(t, "", recoveryChannel{"openai", true}, recoveryChannel{"openai", false})
		rr.behave(stall, "continue;text="+full)
		got := readStream(t, rr.post("/v1/chat/completions", chatStreamBody), false)
		mustNotContinueOnTheStalled(t, rr)
		got.mustFailInBand(t)
		if n0, n1 := rr.mocks[0].Total(), rr.mocks[1].Total(); n0 != 1 || n1 != 0 {
			t.Fatalf("requests after a stall: the stalled channel %d (want 1), the other %d (want 0)", n0, n1)
		}
	})
	t.Run("stall, deterministic request: spliced from the other channel", func(t *testing.T) {
		rr := newRecoveryRig(t, "", recoveryChannel{"openai", true}, recoveryChannel{"openai", false})
		rr.behave(stall, "continue;text="+full)
		got := readStream(t, rr.post("/v1/chat/completions", det), false)
		mustNotContinueOnTheStalled(t, rr)
		got.mustBe(t, full)
		if n0, n1 := rr.mocks[0].Total(), rr.mocks[1].Total(); n0 != 1 || n1 != 1 {
			t.Fatalf("requests after a stall: the stalled channel %d (want 1), the other %d (want 1, the regeneration)", n0, n1)
		}
		if p := prefillOf(t, rr.mocks[1].LastBody()); p != "" {
			t.Fatalf("the regeneration carried a prefill %q", p)
		}
		if m := rr.metrics(); !strings.Contains(m, `result="spliced"} 1`) {
			t.Fatalf("metrics lack the spliced recovery:\n%s", grepLines(m, "continuations"))
		}
	})
	t.Run("stall, deterministic request, the only channel", func(t *testing.T) {
		rr := newRecoveryRig(t, "", recoveryChannel{"openai", true})
		rr.behave(stall)
		got := readStream(t, rr.post("/v1/chat/completions", det), false)
		mustNotContinueOnTheStalled(t, rr)
		got.mustFailInBand(t)
		if n := rr.mocks[0].Total(); n != 1 {
			t.Fatalf("the stalled channel got %d request(s), want 1", n)
		}
	})
}

// TestRecoveryToolCallCut: a tool call cut midway (its arguments in part on the client's
// screen), alone or after text, is never continued: the client gets the in-band error, and no
// continuation or regeneration reaches any channel, whatever the formats.
func TestRecoveryToolCallCut(t *testing.T) {
	const chatTools = `,"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]`
	const messagesTools = `,"tools":[{"name":"lookup","input_schema":{"type":"object"}}]`
	for _, c := range recoveryPairings {
		for _, tc := range []struct {
			name, behaviour, text string
		}{
			{"alone", "cut;tool_call=lookup;after=2", ""},
			{"after text", "cut;tool_call=lookup;splits=3;after=4;text=Hi there", "Hi there"},
		} {
			t.Run(c.name+", "+tc.name, func(t *testing.T) {
				rr := newRecoveryRig(t, "", c.chans...)
				rr.behave(tc.behaviour, "continue;text=Hi there")
				path, body := "/v1/chat/completions", strings.TrimSuffix(chatStreamBody, "}")+chatTools+"}"
				if c.messages {
					path, body = "/v1/messages", strings.TrimSuffix(messagesStreamBody, "}")+messagesTools+"}"
				}
				// Deterministic: a regeneration would be allowed if a tool call could be spliced.
				body = strings.Replace(body, `"stream":true`, `"stream":true,"temperature":0`, 1)
				rep := rr.post(path, body)
				got := readStream(t, rep, c.messages)
				got.mustFailInBand(t)
				if got.text != tc.text {
					t.Fatalf("client text %q, want %q", got.text, tc.text)
				}
				call := `"tool_calls"`
				if c.messages {
					call = `"input_json_delta"`
				}
				if !strings.Contains(rep.body, call) {
					t.Fatalf("the client never saw the tool call begin (%s): the cut was not inside it:\n%s", call, rep.body)
				}
				if n0, n1 := rr.mocks[0].Total(), rr.mocks[1].Total(); n0 != 1 || n1 != 0 {
					t.Fatalf("requests: the broken channel %d (want 1), the other %d (want 0)", n0, n1)
				}
				if strings.Contains(rr.accessLog.String(), `"continuation"`) {
					t.Fatalf("the access log has a continuation attempt:\n%s", rr.accessLog)
				}
			})
		}
	}
}
