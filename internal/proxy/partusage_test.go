package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/audit"
	"github.com/switchyard-io/switchyard/internal/proxy/recovery"
)

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
	recovery.ForEachData([]byte(body), func(_ string, data []byte) {
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
	recovery.ForEachData([]byte(body), func(_ string, data []byte) {
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
		rr, audited := auditedRecoveryRig(t, recoveryChannel{"openai", true}, recoveryChannel{"openai", true})
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
		wantPrompt := pf + max(0, pf-recovery.EstTokens(sent))
		wantCompl := cf + recovery.EstTokens(sent)
		if got["prompt_tokens"] != wantPrompt || got["completion_tokens"] != wantCompl || got["total_tokens"] != wantPrompt+wantCompl {
			t.Fatalf("client's usage %v, want prompt %d, completion %d, total %d (continuation reported %d/%d)", got, wantPrompt, wantCompl, wantPrompt+wantCompl, pf, cf)
		}
		line, raw := audited()
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
		wantPrompt := pf + max(0, pf-recovery.EstTokens(8)) + max(0, pf-recovery.EstTokens(8)+recovery.EstTokens(4))
		wantCompl := cf + recovery.EstTokens(4) + recovery.EstTokens(4)
		if got["prompt_tokens"] != wantPrompt || got["completion_tokens"] != wantCompl {
			t.Fatalf("client's usage %v, want prompt %d, completion %d (finisher reported %d/%d)", got, wantPrompt, wantCompl, pf, cf)
		}
	})
	t.Run("messages client, anthropic channels", func(t *testing.T) {
		rr, audited := auditedRecoveryRig(t, recoveryChannel{"anthropic", true}, recoveryChannel{"anthropic", true})
		rr.behave("cut;after=1;splits=6,12;text="+full, "continue;text="+full)
		rep := rr.post("/v1/messages", messagesStreamBody)
		readStream(t, rep, true).mustBe(t, full)
		got := lastUsage(t, rep.body)
		first := messageStartInput(rep.body)
		m := rr.metrics()
		pf, cf := channelTokens(t, m, "c1", "prompt"), channelTokens(t, m, "c1", "completion")
		if first <= 0 || pf == 0 || cf == 0 || channelTokens(t, m, "c0", "prompt") != 0 {
			t.Fatalf("message_start input_tokens %d, continuation's %d/%d, c0's %d: want the first three reported, nothing counted for the cut c0",
				first, pf, cf, channelTokens(t, m, "c0", "prompt"))
		}
		// The first part's prompt is known from its message_start; its output is estimated from
		// "Hello " (the prefill Anthropic gets has the trailing space trimmed, but the client got it).
		wantIn, wantOut := first+pf, cf+recovery.EstTokens(len("Hello "))
		if got["output_tokens"] != wantOut || got["input_tokens"] != wantIn {
			t.Fatalf("client's usage %v: want input_tokens %d (%d + %d), output_tokens %d", got, wantIn, first, pf, wantOut)
		}
		line, raw := audited()
		if line.Tokens.Prompt != int64(wantIn) || line.Tokens.Completion != int64(wantOut) || !line.Tokens.Estimated {
			t.Fatalf("audit line %s: want the client's usage (%d/%d), estimated", raw, wantIn, wantOut)
		}
	})
}

// pointAt serves channel i from url instead of its mock (a hand-written upstream).
func (rr *recoveryRig) pointAt(t *testing.T, i int, url string) {
	t.Helper()
	file := filepath.Join(rr.dir, "gateway.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n := -1
	out := regexp.MustCompile(`baseURL: \S+`).ReplaceAllStringFunc(string(b), func(s string) string {
		if n++; n == i {
			return "baseURL: " + url + "/v1"
		}
		return s
	})
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rr.src.Load(rr.srv); err != nil {
		t.Fatal(err)
	}
}

// handWritten serves a hand-written SSE stream: events, then a cut (the connection closed) or a
// clean end.
func handWritten(t *testing.T, cut bool, events ...string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, ev := range events {
			_, _ = io.WriteString(w, ev+"\n\n")
		}
		w.(http.Flusher).Flush()
		if cut {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = c.Close()
			}
		}
	}))
	t.Cleanup(s.Close)
	return s.URL
}

// auditedRecoveryRig is a recovery rig whose proxy writes an audit log; audited closes the log
// and returns its one line (and its bytes, for messages).
func auditedRecoveryRig(t *testing.T, chans ...recoveryChannel) (rr *recoveryRig, audited func() (audit.Line, string)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.log")
	log, err := audit.Open(audit.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	rr = newRecoveryRigOpts(t, func(o *Options) { o.Audit = log }, "", chans...)
	return rr, func() (audit.Line, string) {
		t.Helper()
		if err := log.Close(); err != nil {
			t.Fatal(err)
		}
		all, _ := os.ReadFile(path)
		raw, _, _ := strings.Cut(string(all), "\n") // the request's line; the log's end record follows
		var line audit.Line
		if err := json.Unmarshal([]byte(raw), &line); err != nil {
			t.Fatalf("audit line %q: %v", raw, err)
		}
		return line, string(raw)
	}
}

// A part that reported its usage on every chunk (vLLM's continuous usage stats), cumulative, and
// then broke: counted once, as its last figure, in the channel's metric and in the audit line,
// which says what the client's usage says.
func TestRecoveryUsageReportedPerChunk(t *testing.T) {
	const full = "Hello world, and more"
	rr, audited := auditedRecoveryRig(t, recoveryChannel{"openai", true}, recoveryChannel{"openai", true})
	rr.pointAt(t, 0, handWritten(t, true,
		`data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":{"prompt_tokens":10,"completion_tokens":0,"total_tokens":10}}`,
		`data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello "},"finish_reason":null}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`))
	rr.behave("ok", "continue;separate_usage;text="+full)
	rep := rr.post("/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	readStream(t, rep, false).mustBe(t, full)
	got := lastUsage(t, rep.body)
	m := rr.metrics()
	if p, c := channelTokens(t, m, "c0", "prompt"), channelTokens(t, m, "c0", "completion"); p != 10 || c != 2 {
		t.Fatalf("c0's tokens %d/%d, want its last cumulative figures 10/2", p, c)
	}
	pf, cf := channelTokens(t, m, "c1", "prompt"), channelTokens(t, m, "c1", "completion")
	if got["prompt_tokens"] != 10+pf || got["completion_tokens"] != 2+cf {
		t.Fatalf("client's usage %v, want %d/%d (the broken part's reported 10/2 plus the continuation's)", got, 10+pf, 2+cf)
	}
	if line, _ := audited(); line.Tokens.Prompt != int64(got["prompt_tokens"]) || line.Tokens.Completion != int64(got["completion_tokens"]) || line.Tokens.Estimated {
		t.Fatalf("audit tokens %+v, want the client's usage %v, not estimated", line.Tokens, got)
	}
}

// A /v1/messages stream with cached input: each part's uncached input and cache reads are summed
// apart for the client (input_tokens is uncached input in the Messages API); the audit line
// counts all input, as it does for an answer that never broke.
func TestRecoveryMessagesUsageWithCachedInput(t *testing.T) {
	part := func(text string, cut bool) string {
		evs := []string{
			"event: message_start\ndata: " + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":10,"cache_read_input_tokens":100,"output_tokens":1}}}`,
			"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			"event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + text + `"}}`,
		}
		if !cut {
			evs = append(evs, "event: content_block_stop\ndata: "+`{"type":"content_block_stop","index":0}`,
				"event: message_delta\ndata: "+`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`,
				"event: message_stop\ndata: "+`{"type":"message_stop"}`)
		}
		return handWritten(t, cut, evs...)
	}
	rr, audited := auditedRecoveryRig(t, recoveryChannel{"anthropic", true}, recoveryChannel{"anthropic", true})
	rr.pointAt(t, 0, part("Hello ", true))
	rr.pointAt(t, 1, part("world", false))
	rep := rr.post("/v1/messages", messagesStreamBody)
	readStream(t, rep, true).mustBe(t, "Hello world")
	got := lastUsage(t, rep.body)
	wantOut := 3 + recovery.EstTokens(len("Hello "))
	if got["input_tokens"] != 20 || got["cache_read_input_tokens"] != 200 || got["output_tokens"] != wantOut {
		t.Fatalf("client's usage %v, want input_tokens 20, cache_read_input_tokens 200, output_tokens %d", got, wantOut)
	}
	if line, _ := audited(); line.Tokens.Prompt != 220 || line.Tokens.Completion != int64(wantOut) || !line.Tokens.Estimated {
		t.Fatalf("audit tokens %+v, want 220 prompt (all input of both parts), %d completion, estimated", line.Tokens, wantOut)
	}
}

// A continuation's finishing chunk without a delta (or with a null one, or a null choice) while
// the seam holds text it took for a possible restart: the held text goes out, nothing panics.
func TestRecoveryFinishChunkWithoutDelta(t *testing.T) {
	const full = "Hello world, Hello"
	for _, finish := range []string{
		`{"index":0,"finish_reason":"stop"}`,
		`{"index":0,"delta":null,"finish_reason":"stop"}`,
	} {
		rr := newRecoveryRig(t, "", recoveryChannel{"openai", true}, recoveryChannel{"openai", true})
		rr.pointAt(t, 1, handWritten(t, false,
			`data: {"id":"y","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`,
			`data: {"id":"y","object":"chat.completion.chunk","created":1,"model":"m","choices":[null,`+finish+`]}`,
			`data: [DONE]`))
		rr.behave("cut;after=1;splits=13;text=" + full)
		rep := rr.post("/v1/chat/completions", chatStreamBody)
		if got := readStream(t, rep, false); !got.errored && !(got.complete && got.text == full) {
			t.Fatalf("finish %s: neither the whole answer nor an in-band error: %+v", finish, got)
		}
	}
}

// A Messages answer's input counts whole, cached or not, streamed or not (as OpenAI's
// prompt_tokens and the translations count it).
func TestMessagesAnswersCountCachedInput(t *testing.T) {
	const usage = `{"input_tokens":10,"cache_read_input_tokens":100,"cache_creation_input_tokens":5,"output_tokens":3}`
	answer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Stream bool }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":`+usage+`}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`event: message_start` + "\ndata: " + `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":10,"cache_read_input_tokens":100,"cache_creation_input_tokens":5,"output_tokens":1}}}`,
			`event: content_block_start` + "\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`event: content_block_delta` + "\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
			`event: content_block_stop` + "\ndata: " + `{"type":"content_block_stop","index":0}`,
			`event: message_delta` + "\ndata: " + `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`,
			`event: message_stop` + "\ndata: " + `{"type":"message_stop"}`,
		} {
			_, _ = io.WriteString(w, ev+"\n\n")
		}
	}))
	t.Cleanup(answer.Close)
	rr := newRecoveryRig(t, "", recoveryChannel{"anthropic", true})
	rr.pointAt(t, 0, answer.URL)
	for i, body := range []string{`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, messagesStreamBody} {
		if rep := rr.post("/v1/messages", body); rep.status != 200 {
			t.Fatalf("%d %s", rep.status, rep.body)
		}
		m := rr.metrics()
		if p, c := channelTokens(t, m, "c0", "prompt"), channelTokens(t, m, "c0", "completion"); p != 115*(i+1) || c != 3*(i+1) {
			t.Fatalf("after answer %d: tokens %d/%d, want %d/%d (all input, cached or not)", i+1, p, c, 115*(i+1), 3*(i+1))
		}
	}
}
