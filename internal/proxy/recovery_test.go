package proxy

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy/recovery"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

// recoveryChannel is one channel of a recovery rig: its provider and whether its model declares
// prefill (anthropic channels have it by default).
type recoveryChannel struct {
	provider string
	prefill  bool
}

// recoveryRig is a proxy in front of one mock per channel (c0, c1, ...), all serving model "m" in
// list order (Priority), with detection loose enough that repeated breaks eject nothing.
type recoveryRig struct {
	*rig
	mocks []*mockprovider.Server
}

func newRecoveryRig(t testing.TB, policyExtra string, chans ...recoveryChannel) *recoveryRig {
	t.Helper()
	return newRecoveryRigOpts(t, nil, policyExtra, chans...)
}

// newRecoveryRigOpts is newRecoveryRig with the proxy's options amended by opts.
func newRecoveryRigOpts(t testing.TB, opts func(*Options), policyExtra string, chans ...recoveryChannel) *recoveryRig {
	t.Helper()
	tt, _ := t.(*testing.T) // a benchmark's rig has none: it posts by itself
	r := &rig{t: tt, clock: &fakeClock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}, logs: &testutil.SyncBuffer{}, accessLog: &testutil.SyncBuffer{}}
	rr := &recoveryRig{rig: r}
	var manifest, refs strings.Builder
	for i, c := range chans {
		m := mockprovider.New(mockprovider.Options{Name: fmt.Sprintf("c%d", i)})
		ts := httptest.NewServer(m)
		t.Cleanup(func() { m.Close(); ts.Close() })
		rr.mocks = append(rr.mocks, m)
		fmt.Fprintf(&manifest, `---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: c%d}
spec:
  provider: %s
  baseURL: %s/v1
  models: [{name: m, capabilities: {prefill: %v}}]
  failureDomain: {region: r%d}
  timeouts: {request: 5s, fallbackRequest: 4s, firstByte: 500ms, streamIdle: 300ms}
`, i, c.provider, ts.URL, c.prefill, i)
		fmt.Fprintf(&refs, "{name: c%d},", i)
	}
	fmt.Fprintf(&manifest, `---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [m]
  channels: [%s]
  strategy: Priority
  detection: {consecutiveFailures: 1000, minRequests: 1000}
%s
`, strings.TrimSuffix(refs.String(), ","), indent(policyExtra))
	o := Options{Clock: r.clock, Logger: slog.New(slog.NewJSONHandler(r.logs, nil)), AccessLog: r.accessLog, Replica: "test"}
	if opts != nil {
		opts(&o)
	}
	r.srv = New(o)
	r.api = httptest.NewServer(r.srv.Handler())
	r.admin = httptest.NewServer(r.srv.AdminHandler())
	r.dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(r.dir, "gateway.yaml"), []byte(manifest.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	r.src = &source.FileSource{Path: r.dir, Getenv: func(string) string { return "" }}
	if err := r.src.Load(r.srv); err != nil {
		t.Fatalf("config does not load: %v", err)
	}
	t.Cleanup(func() { r.api.Close(); r.admin.Close(); r.srv.WaitProbes() })
	return rr
}

// behave sets every mock's behaviour, in channel order.
func (rr *recoveryRig) behave(bs ...string) {
	for i, s := range bs {
		b, err := mockprovider.ParseBehavior(s)
		if err != nil {
			panic(fmt.Sprintf("behaviour %q: %v", s, err))
		}
		rr.mocks[i].SetDefault(b)
	}
}

// streamed is what a client assembled from a stream: the exact text bytes, whether it ended as
// a complete answer, and whether an in-band error came.
type streamed struct {
	text     string
	complete bool
	errored  bool
	ids      map[string]bool
	models   map[string]bool
	status   int
}

// readStream assembles a chat or Messages stream the way a strict client does.
func readStream(t *testing.T, rep reply, messages bool) streamed {
	t.Helper()
	if rep.err != nil {
		t.Fatalf("request failed: %v", rep.err)
	}
	out := streamed{ids: map[string]bool{}, models: map[string]bool{}, status: rep.status}
	recovery.ForEachData([]byte(rep.body), func(typ string, data []byte) {
		if string(data) == "[DONE]" {
			out.complete = true
			return
		}
		var ev struct {
			ID      string `json:"id"`
			Model   string `json:"model"`
			Type    string `json:"type"`
			Error   json.RawMessage
			Choices []struct {
				Delta struct {
					Content json.RawMessage `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Delta struct {
				Type string          `json:"type"`
				Text json.RawMessage `json:"text"`
			} `json:"delta"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("malformed event %q: %v", data, err)
		}
		if recovery.IsJSONValue(ev.Error) || ev.Type == "error" || typ == "error" {
			out.errored = true
			return
		}
		if messages {
			if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
				s, _ := recovery.RawJSONString(ev.Delta.Text)
				out.text += string(s)
			}
			if ev.Type == "message_stop" {
				out.complete = true
			}
			return
		}
		out.ids[ev.ID] = true
		out.models[ev.Model] = true
		for _, c := range ev.Choices {
			s, _ := recovery.RawJSONString(c.Delta.Content)
			out.text += string(s)
		}
	})
	return out
}

func (s streamed) mustBe(t *testing.T, want string) {
	t.Helper()
	if s.errored || !s.complete || s.text != want {
		t.Fatalf("client got %q (complete %v, in-band error %v), want the whole answer %q", s.text, s.complete, s.errored, want)
	}
	if len(s.ids) > 1 || len(s.models) > 1 {
		t.Fatalf("one stream must carry one id and model, got ids %v models %v", s.ids, s.models)
	}
}

func (s streamed) mustFailInBand(t *testing.T) {
	t.Helper()
	if !s.errored || s.complete {
		t.Fatalf("client got %q (complete %v, in-band error %v): want an in-band error and no end of answer", s.text, s.complete, s.errored)
	}
}

const chatStreamBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
const messagesStreamBody = `{"model":"m","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`

// prefillOf is the final assistant message a mock received ("" for none).
func prefillOf(t *testing.T, body []byte) string {
	t.Helper()
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "assistant" {
		var s string
		if json.Unmarshal(req.Messages[n-1].Content, &s) == nil {
			return s
		}
		var parts []struct{ Text string }
		_ = json.Unmarshal(req.Messages[n-1].Content, &parts)
		for _, p := range parts {
			s += p.Text
		}
		return s
	}
	return ""
}

// runeSplits is the byte offset of every character boundary of s, for the mock's splits.
func runeSplits(s string) string {
	var out []string
	for i := range s {
		if i > 0 {
			out = append(out, fmt.Sprint(i))
		}
	}
	return strings.Join(out, ",")
}

const recoveryAnswer = "Hello wörld, 中文 ok.\nBye 😀!"

// TestRecoveryCutEverywhere cuts a stream after every character of a short answer (multi-byte
// ones included) and checks that the client assembles the exact whole answer, for each pair of
// client API and channel formats.
func TestRecoveryCutEverywhere(t *testing.T) {
	splits := runeSplits(recoveryAnswer)
	n := strings.Count(splits, ",") + 1 // pieces - 1
	for _, c := range recoveryPairings {
		t.Run(c.name, func(t *testing.T) {
			rr := newRecoveryRig(t, "", c.chans...)
			path, body := "/v1/chat/completions", chatStreamBody
			if c.messages {
				path, body = "/v1/messages", messagesStreamBody
			}
			for after := 1; after <= n; after++ {
				rr.behave("cut;after="+fmt.Sprint(after)+";splits="+splits+";text="+recoveryAnswer, "continue;text="+recoveryAnswer)
				got := readStream(t, rr.post(path, body), c.messages)
				got.mustBe(t, recoveryAnswer)
				sent := strings.Join(strings.SplitAfterN(recoveryAnswer, "", -1)[:after], "")
				p := prefillOf(t, rr.mocks[1].LastBody())
				if want := sent; c.chans[1].provider == "anthropic" {
					if want = strings.TrimRight(sent, " \t\n"); p != want {
						t.Fatalf("cut after %d: prefill %q, want %q (the text sent, trailing whitespace trimmed)", after, p, want)
					}
				} else if p != want {
					t.Fatalf("cut after %d: prefill %q, want exactly the text sent %q", after, p, want)
				}
			}
		})
	}
}

// TestRecoverySeams: what providers do at the seam, over HTTP.
func TestRecoverySeams(t *testing.T) {
	const full = "Hello world"
	for _, c := range []struct {
		name, first, second string
		chans               []recoveryChannel
	}{
		{"leading space re-emitted by an exact-prefill server", "cut;after=1;splits=6", "continue;reemit_space",
			[]recoveryChannel{{"openai", true}, {"openai", true}}},
		{"trailing space trimmed for anthropic, written again", "cut;after=1;splits=6", "continue",
			[]recoveryChannel{{"openai", true}, {"anthropic", true}}},
		{"continuation mid-word", "cut;after=1;splits=3", "continue",
			[]recoveryChannel{{"openai", true}, {"openai", true}}},
		{"a prefill-capable model that ignores the prefill and starts again", "cut;after=1;splits=8", "ok",
			[]recoveryChannel{{"openai", true}, {"openai", true}}},
		{"the same, for an anthropic channel", "cut;after=1;splits=8", "ok",
			[]recoveryChannel{{"anthropic", true}, {"anthropic", true}}},
		{"stall past streamIdle", "stall;after=1;splits=5", "continue",
			[]recoveryChannel{{"openai", true}, {"openai", true}}},
		{"error event mid-stream", "error_event;after=2;splits=2,5", "continue",
			[]recoveryChannel{{"anthropic", true}, {"anthropic", true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rr := newRecoveryRig(t, "", c.chans...)
			rr.behave(c.first+";text="+full, c.second+";text="+full)
			readStream(t, rr.post("/v1/chat/completions", chatStreamBody), false).mustBe(t, full)
		})
	}
}

// TestRecoveryTwoBreaks: the continuation breaks too; a third channel finishes the answer.
func TestRecoveryTwoBreaks(t *testing.T) {
	const full = "one two three four"
	rr := newRecoveryRig(t, "", recoveryChannel{"openai", false}, recoveryChannel{"openai", true}, recoveryChannel{"openai", true})
	rr.behave("cut;after=1;splits=4;text="+full, "cut;prefill;after=1;splits=4;text="+full, "continue;text="+full)
	readStream(t, rr.post("/v1/chat/completions", chatStreamBody), false).mustBe(t, full)
	if p := prefillOf(t, rr.mocks[2].LastBody()); p != "one two " {
		t.Fatalf("the second continuation's prefill = %q, want the text of both parts", p)
	}
	var conts []float64
	for _, l := range accessLines(t, rr.accessLog.String()) {
		if n, ok := l["continuation"].(float64); ok {
			conts = append(conts, n)
		}
	}
	if fmt.Sprint(conts) != "[1 2]" {
		t.Fatalf("access log continuations = %v, want [1 2]", conts)
	}
	// The channel label is the channel the stream broke on: the second break's, the first
	// continuation's target.
	if m := rr.metrics(); !regexp.MustCompile(`switchyard_stream_continuations_total\{channel="[^"]+",model="m",namespace="",result="continued"\} 1`).MatchString(m) {
		t.Fatalf("metrics lack the continued recovery:\n%s", grepLines(m, "continuations"))
	}
}

// TestRecoveryRefusedPrefill: a target that refuses the prefill is a failed continuation: a
// deterministic request is regenerated and spliced, any other ends with the in-band error.
func TestRecoveryRefusedPrefill(t *testing.T) {
	const full = "Hello world"
	rr := newRecoveryRig(t, "", recoveryChannel{"openai", false}, recoveryChannel{"openai", true})
	rr.behave("cut;after=1;splits=5;text="+full, "continue;no_prefill;text="+full)
	det := `{"model":"m","stream":true,"temperature":0,"messages":[{"role":"user","content":"hi"}]}`
	readStream(t, rr.post("/v1/chat/completions", det), false).mustBe(t, full)
	if m := rr.metrics(); !strings.Contains(m, `result="spliced"} 1`) {
		t.Fatalf("metrics lack the spliced recovery:\n%s", grepLines(m, "recoveries"))
	}
	// Not deterministic: nothing may be spliced.
	readStream(t, rr.post("/v1/chat/completions", chatStreamBody), false).mustFailInBand(t)
	// Deterministic, but the regeneration differs: strict, never spliced.
	rr.behave("cut;after=1;splits=5;text="+full, "continue;no_prefill;text=Help, world")
	readStream(t, rr.post("/v1/chat/completions", det), false).mustFailInBand(t)
	if m := rr.metrics(); !strings.Contains(m, `result="gave_up"} 2`) {
		t.Fatalf("metrics lack the two recoveries given up:\n%s", grepLines(m, "recoveries"))
	}
}

// TestRecoveryTargetHangs: a continuation target that never answers costs its firstByte timeout,
// is not tried again after it, and the stream ends with the in-band error (no other can continue).
func TestRecoveryTargetHangs(t *testing.T) {
	rr := newRecoveryRig(t, "", recoveryChannel{"openai", false}, recoveryChannel{"openai", true})
	rr.behave("cut;after=1;splits=5;text=Hello world", "hang")
	readStream(t, rr.post("/v1/chat/completions", chatStreamBody), false).mustFailInBand(t)
	if n := rr.mocks[1].Total(); n != 1 {
		t.Fatalf("the hanging target got %d continuation request(s), want 1", n)
	}
	if !strings.Contains(rr.accessLog.String(), `"continuation":1`) || !strings.Contains(rr.accessLog.String(), `"outcome":"timeout"`) {
		t.Fatalf("access log lacks the timed-out continuation:\n%s", rr.accessLog)
	}
}

// TestRecoveryNoPrefillTarget: no channel can continue and the request is not deterministic.
func TestRecoveryNoPrefillTarget(t *testing.T) {
	rr := newRecoveryRig(t, "", recoveryChannel{"openai", false}, recoveryChannel{"openai", false})
	rr.behave("cut;after=1;splits=5;text=Hello world", "continue;text=Hello world")
	readStream(t, rr.post("/v1/chat/completions", chatStreamBody), false).mustFailInBand(t)
	if n := rr.mocks[1].Total(); n != 0 {
		t.Fatalf("a channel without prefill got %d continuation request(s)", n)
	}
}

// TestRecoveryKnowsWhenNot: n > 1, a JSON schema, streamRecovery Error, and maxContinuations end
// with the in-band error as without recovery.
func TestRecoveryKnowsWhenNot(t *testing.T) {
	const full = "Hello world"
	cut := "cut;after=1;splits=5;text=" + full
	for _, c := range []struct{ name, policy, body string }{
		{"n > 1", "", `{"model":"m","stream":true,"n":2,"messages":[{"role":"user","content":"hi"}]}`},
		{"json schema", "", `{"model":"m","stream":true,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}},"messages":[{"role":"user","content":"hi"}]}`},
		{"streamRecovery Error", "streamRecovery: Error", chatStreamBody},
		{"maxContinuations 0", "maxContinuations: 0", chatStreamBody},
	} {
		t.Run(c.name, func(t *testing.T) {
			rr := newRecoveryRig(t, c.policy, recoveryChannel{"openai", true}, recoveryChannel{"openai", true})
			rr.behave(cut, "continue;text="+full)
			readStream(t, rr.post("/v1/chat/completions", c.body), false).mustFailInBand(t)
			if n := rr.mocks[1].Total(); n != 0 {
				t.Fatalf("%d continuation request(s) sent", n)
			}
		})
	}
	t.Run("maxContinuations bounds the tries", func(t *testing.T) {
		rr := newRecoveryRig(t, "maxContinuations: 1", recoveryChannel{"openai", false}, recoveryChannel{"openai", true}, recoveryChannel{"openai", true})
		rr.behave(cut, "cut;prefill;after=1;splits=2;text="+full, "continue;text="+full)
		readStream(t, rr.post("/v1/chat/completions", chatStreamBody), false).mustFailInBand(t)
		if n := rr.mocks[2].Total(); n != 0 {
			t.Fatalf("a second continuation was sent with maxContinuations 1")
		}
	})
}

// TestRecoveryToolCall: a tool call streamed in part is never continued as text.
func TestRecoveryToolCall(t *testing.T) {
	tap := &recovery.Tap{}
	tap.Observe([]byte(`data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":"{\"ci"}}]}}]}` + "\n\n"))
	if why := unrecoverable(recoveryTraits{}, tap); !strings.Contains(why, "tool call") {
		t.Fatalf("unrecoverable = %q, want a tool call reason", why)
	}
	mt := &recovery.Tap{Messages: true}
	mt.Observe([]byte("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"get\",\"input\":{}}}\n\n"))
	if why := unrecoverable(recoveryTraits{}, mt); why == "" {
		t.Fatal("a Messages tool_use block in progress must not be continued")
	}
}

// TestRecoveryUsesTheRetryBudget: a continuation is one more request to a provider, as a retry
// is, and draws on the policy's retry budget: once it is spent (here its floor, the clock
// standing still), a broken stream ends with the in-band error that says so.
func TestRecoveryUsesTheRetryBudget(t *testing.T) {
	const full = "Hello world"
	rr := newRecoveryRig(t, "", recoveryChannel{"openai", true}, recoveryChannel{"openai", true})
	rr.behave("cut;after=1;splits=6;text="+full, "continue;text="+full)
	floor := failover.BudgetFloorPerSecond * failover.BudgetBuckets
	for i := range floor {
		if got := readStream(t, rr.post("/v1/chat/completions", chatStreamBody), false); got.text != full || !got.complete {
			t.Fatalf("request %d of the budget's %d: got %q (complete %v)", i+1, floor, got.text, got.complete)
		}
	}
	rep := rr.post("/v1/chat/completions", chatStreamBody)
	readStream(t, rep, false).mustFailInBand(t)
	if !strings.Contains(rep.body, "retry budget") {
		t.Fatalf("the in-band error does not name the retry budget:\n%s", rep.body)
	}
	if n := rr.mocks[1].Total(); n != floor {
		t.Fatalf("%d continuation requests, want the budget's %d", n, floor)
	}
	if m := rr.metrics(); !strings.Contains(m, `switchyard_retry_budget_exhausted_total{model="m",namespace=""} 1`) {
		t.Fatalf("metrics lack the exhausted budget:\n%s", grepLines(m, "budget"))
	}
}

// A break nothing can continue sends no request and so spends no retry: after more such breaks
// than the budget's floor, an ordinary failover still goes through.
func TestRecoveryBudgetOnlyForContinuationsSent(t *testing.T) {
	const full = "Hello world"
	rr := newRecoveryRig(t, "", recoveryChannel{"openai", false}, recoveryChannel{"openai", false})
	rr.behave("cut;after=1;splits=6;text="+full, "ok;text="+full)
	for range failover.BudgetFloorPerSecond*failover.BudgetBuckets + 1 {
		rep := rr.post("/v1/chat/completions", chatStreamBody)
		readStream(t, rep, false).mustFailInBand(t)
		if !strings.Contains(rep.body, "no channel can continue") {
			t.Fatalf("the in-band error does not say why: %s", rep.body)
		}
	}
	rr.behave("503", "ok;text="+full)
	if rep := rr.post("/v1/chat/completions", chat("m", false)); rep.status != 200 {
		t.Fatalf("a failover after breaks that sent no continuation: %d %s", rep.status, rep.body)
	}
}

// The continuation request: the text sent as the final assistant turn (merged into the client's
// own), and what is left of the client's output limit.
func TestContinuationBody(t *testing.T) {
	for _, c := range []struct{ name, body, prefill, want string }{
		{"a new assistant turn", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "Hello",
			`{"messages":[{"content":"hi","role":"user"},{"content":"Hello","role":"assistant"}],"model":"m"}`},
		{"merged into the client's own prefill", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure: "}]}`, "Hello",
			`{"messages":[{"content":"hi","role":"user"},{"content":"Sure: Hello","role":"assistant"}]}`},
		{"max_tokens less the text sent", `{"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "Hello world, this is",
			`{"max_tokens":95,"messages":[{"content":"hi","role":"user"},{"content":"Hello world, this is","role":"assistant"}]}`},
		{"max_completion_tokens too, never below one", `{"max_completion_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, "Hello world, this is",
			`{"max_completion_tokens":1,"messages":[{"content":"hi","role":"user"},{"content":"Hello world, this is","role":"assistant"}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := continuationBody([]byte(c.body), []byte(c.prefill))
			if err != nil || string(got) != c.want {
				t.Fatalf("continuationBody = %s, %v; want %s", got, err, c.want)
			}
		})
	}
}
