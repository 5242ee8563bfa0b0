package proxy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/proxy/clientapi"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
)

var emailPlaceholder = regexp.MustCompile(`\[EMAIL_\d+\]`)

// These tests use only the e-mail detector, so they hold for any implementation of internal/pii.

const piiMask = "pii: {mode: Mask, detectors: [email]}"

// piiPrompt has two addresses, one of them twice, and ends with text that looks like the start
// of a placeholder but is none: a stream restorer holds it back until the answer finishes.
const piiPrompt = "Hi, mail ann@example.com or bob@example.org (ann@example.com first), not [EMAIL"

var piiValues = []string{"ann@example.com", "bob@example.org"}

func piiChat(stream bool) string {
	return fmt.Sprintf(`{"model":"gpt-4o","stream":%v,"x_vendor":{"keep":[1,{"me":null}]},"messages":[{"role":"system","content":"be brief"},{"role":"user","content":%q}]}`, stream, piiPrompt)
}

// upstreamSaw checks the body a mock received: placeholders, never the values, and the unknown
// member as the client sent it.
func upstreamSaw(t *testing.T, m *mockprovider.Server) string {
	t.Helper()
	body := string(m.LastBody())
	for _, v := range piiValues {
		if strings.Contains(body, v) {
			t.Errorf("the upstream received %s:\n%s", v, body)
		}
	}
	if n := len(emailPlaceholder.FindAllString(body, -1)); n != 3 {
		t.Errorf("the upstream body has %d placeholders, want 3:\n%s", n, body)
	}
	if !strings.Contains(body, `"x_vendor":{"keep":[1,{"me":null}]}`) {
		t.Errorf("an unknown member did not reach the upstream as sent:\n%s", body)
	}
	return body
}

// streamedText is the text of a streamed chat answer, and whether it finished and ended with [DONE].
func streamedText(t *testing.T, body string) (text string, finished, done bool) {
	t.Helper()
	for _, ev := range strings.Split(strings.TrimSpace(body), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("not a data event: %q", ev)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("event is not JSON: %v: %s", err, data)
		}
		if done || finished && len(c.Choices) > 0 {
			t.Errorf("text after the finish: %s", data)
		}
		for _, ch := range c.Choices {
			text += ch.Delta.Content + ch.Text
			finished = finished || ch.FinishReason != nil
		}
	}
	return text, finished, done
}

// TestPIIMaskNonStreamed: the provider gets placeholders, never the values; the answer comes
// back with the values; the access log and the metric count what was masked.
func TestPIIMaskNonStreamed(t *testing.T) {
	r := newRig(t, rigConfig{policy: piiMask})
	r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeEcho})
	got := r.post("/v1/chat/completions", piiChat(false))
	if got.status != 200 {
		t.Fatalf("status %d: %s", got.status, got.body)
	}
	upstreamSaw(t, r.A)
	var answer struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(got.body), &answer); err != nil || len(answer.Choices) != 1 {
		t.Fatalf("answer: %v: %s", err, got.body)
	}
	if c := answer.Choices[0].Message.Content; c != piiPrompt {
		t.Errorf("answer %q, want the prompt with its values back: %q", c, piiPrompt)
	}
	if log := r.accessLog.String(); !strings.Contains(log, `"pii":{"email":3}`) {
		t.Errorf("access log lacks the masked counts:\n%s", log)
	}
	for _, v := range piiValues {
		if strings.Contains(r.accessLog.String()+r.logs.String()+r.metrics(), v) {
			t.Errorf("%s is in the logs or the metrics", v)
		}
	}
	if v := r.metric(`switchyard_pii_masked_total{detector="email",namespace="",policy="chat"}`); v != "3" {
		t.Errorf("switchyard_pii_masked_total = %q, want 3", v)
	}
}

// TestPIIMaskStreamedAtEverySplitPoint: the provider streams the masked text cut at every byte
// offset in turn (so every placeholder is cut at every place), then one byte per event; each
// time the client gets exactly the prompt back, in events that are valid JSON, finished, with
// [DONE] last, and nothing after the finish.
func TestPIIMaskStreamedAtEverySplitPoint(t *testing.T) {
	r := newRig(t, rigConfig{policy: piiMask})
	r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeEcho})
	// The gateway does not forward X-Mock-Behavior: the mock's behaviour is set for each cut.
	first := r.post("/v1/chat/completions", piiChat(true))
	masked := ""
	{
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		if err := json.Unmarshal([]byte(upstreamSaw(t, r.A)), &req); err != nil || len(req.Messages) != 2 {
			t.Fatalf("upstream body: %v", err)
		}
		masked = req.Messages[1].Content
	}
	if text, fin, done := streamedText(t, first.body); text != piiPrompt || !fin || !done {
		t.Fatalf("one chunk: %q finished=%v done=%v", text, fin, done)
	}
	cuts := []mockprovider.Behavior{{Mode: mockprovider.ModeEcho, ChunkBytes: 1}}
	for at := 1; at < len(masked); at++ {
		cuts = append(cuts, mockprovider.Behavior{Mode: mockprovider.ModeEcho, Splits: fmt.Sprint(at)})
	}
	for _, b := range cuts {
		r.A.SetDefault(b)
		got := r.post("/v1/chat/completions", piiChat(true))
		if got.status != 200 {
			t.Fatalf("%+v: status %d: %s", b, got.status, got.body)
		}
		if n := strings.Count(got.body, `"content":`); n < 2 {
			t.Fatalf("%+v: the answer was not cut (%d content deltas)", b, n)
		}
		text, fin, done := streamedText(t, got.body)
		if text != piiPrompt || !fin || !done {
			t.Errorf("%+v: got %q (finished=%v, [DONE]=%v), want %q", b, text, fin, done, piiPrompt)
		}
	}
	upstreamSaw(t, r.A)
}

// TestPIIMaskOtherEndpoints: completions and responses are masked and restored too, streamed
// one byte per event.
func TestPIIMaskOtherEndpoints(t *testing.T) {
	r := newRig(t, rigConfig{policy: piiMask})
	r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeEcho, ChunkBytes: 1})
	got := r.post("/v1/completions", fmt.Sprintf(`{"model":"gpt-4o","stream":true,"prompt":%q}`, piiPrompt))
	if text, fin, done := streamedText(t, got.body); text != piiPrompt || !fin || !done {
		t.Errorf("completions: %q finished=%v done=%v", text, fin, done)
	}
	if strings.Contains(string(r.A.LastBody()), "ann@") {
		t.Errorf("completions: the upstream got the value: %s", r.A.LastBody())
	}
	got = r.post("/v1/responses", fmt.Sprintf(`{"model":"gpt-4o","stream":true,"input":[{"role":"user","content":[{"type":"input_text","text":%q}]}]}`, piiPrompt))
	if strings.Contains(string(r.A.LastBody()), "ann@") {
		t.Errorf("responses: the upstream got the value: %s", r.A.LastBody())
	}
	deltas, completed, _ := responsesStreamText(t, got.body)
	if deltas != piiPrompt || completed != piiPrompt {
		t.Errorf("responses: deltas %q, completed %q, want %q", deltas, completed, piiPrompt)
	}
}

// TestPIIMaskFailoverSendsTheSameMaskedBody: the attempt that fails over sends the very body the
// first attempt sent.
func TestPIIMaskFailoverSendsTheSameMaskedBody(t *testing.T) {
	r := newRig(t, rigConfig{policy: piiMask})
	r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503})
	r.B.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeEcho})
	got := r.post("/v1/chat/completions", piiChat(false))
	if got.status != 200 || got.header.Get("X-Switchyard-Channel") != "chan-b" {
		t.Fatalf("status %d channel %s: %s", got.status, got.header.Get("X-Switchyard-Channel"), got.body)
	}
	if a, b := upstreamSaw(t, r.A), upstreamSaw(t, r.B); a != b {
		t.Errorf("the failover sent another body:\nA %s\nB %s", a, b)
	}
	if !strings.Contains(got.body, "ann@example.com") {
		t.Errorf("the answer did not get its values back: %s", got.body)
	}
	if n := strings.Count(r.accessLog.String(), `"pii":{"email":3}`); n != 2 {
		t.Errorf("%d attempt lines carry the pii counts, want 2:\n%s", n, r.accessLog.String())
	}
}

// TestPIIMaskWithoutRestore: restore: false leaves the placeholders in the answer.
func TestPIIMaskWithoutRestore(t *testing.T) {
	r := newRig(t, rigConfig{policy: "pii: {mode: Mask, detectors: [email], restore: false}"})
	r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeEcho})
	got := r.post("/v1/chat/completions", piiChat(false))
	if got.status != 200 || strings.Contains(got.body, "ann@example.com") || !emailPlaceholder.MatchString(got.body) {
		t.Errorf("status %d, want placeholders in the answer: %s", got.status, got.body)
	}
}

// TestPIIBlock: a prompt with personal data is refused with 400 pii_detected naming the kinds
// found, never the values, and no provider is called; one without passes.
func TestPIIBlock(t *testing.T) {
	r := newRig(t, rigConfig{policy: "pii: {mode: Block, detectors: [email]}"})
	for _, stream := range []bool{false, true} {
		got := r.post("/v1/chat/completions", piiChat(stream))
		if got.status != 400 {
			t.Fatalf("status %d, want 400: %s", got.status, got.body)
		}
		var e struct {
			Error clientapi.APIError `json:"error"`
		}
		if err := json.Unmarshal([]byte(got.body), &e); err != nil || e.Error.Code == nil || *e.Error.Code != "pii_detected" || e.Error.Type != "invalid_request_error" {
			t.Fatalf("error body: %s", got.body)
		}
		if !strings.Contains(e.Error.Message, "email") || strings.Contains(got.body, "@example") {
			t.Errorf("the message must name the detector and no value: %s", e.Error.Message)
		}
	}
	if a, b := r.A.Total(), r.B.Total(); a+b != 0 {
		t.Errorf("providers were called: A %d, B %d", a, b)
	}
	if v := r.metric(`switchyard_rejected_requests_total{reason="pii_detected"}`); v != "2" {
		t.Errorf("switchyard_rejected_requests_total{reason=pii_detected} = %q, want 2", v)
	}
	if got := r.post("/v1/chat/completions", chat("gpt-4o", false)); got.status != 200 {
		t.Errorf("a prompt without personal data: status %d: %s", got.status, got.body)
	}
	if strings.Contains(r.metrics(), "switchyard_pii_masked_total{") {
		t.Error("Block counted values as masked")
	}
}

// TestPIIOffIsByteIdentical: with masking off (absent, or mode "Off"), the provider receives the
// client's body byte for byte, personal data, spacing, escapes and unknown members included.
func TestPIIOffIsByteIdentical(t *testing.T) {
	body := "{ \"model\" : \"gpt-4o\",\n \"messages\":[{\"role\":\"user\",\"content\":\"ann@example.com \\u0040 caf\\u00e9\"}], \"x\":{\"y\":[1.50e3]} }"
	for _, policy := range []string{"", `pii: {mode: "Off", detectors: [email]}`} {
		r := newRig(t, rigConfig{policy: policy})
		if got := r.post("/v1/chat/completions", body); got.status != 200 {
			t.Fatalf("%q: status %d: %s", policy, got.status, got.body)
		}
		if sent := string(r.A.LastBody()); sent != strings.TrimSpace(body) {
			t.Errorf("%q: the upstream got\n%s\nwant\n%s", policy, sent, body)
		}
	}
}

// TestPIIOtherPoliciesUnaffected: a policy's masking applies to its own models only.
func TestPIIOtherPoliciesUnaffected(t *testing.T) {
	r := newRig(t, rigConfig{policy: piiMask})
	got := r.post("/v1/chat/completions", strings.Replace(piiChat(false), "gpt-4o", "gpt-4o-mini", 1))
	if got.status != 200 || !strings.Contains(string(r.A.LastBody()), "ann@example.com") {
		t.Errorf("status %d; the other policy's request was changed: %s", got.status, r.A.LastBody())
	}
}

// TestPIIThatCannotRunRefusesRequests: a table whose detectors this proxy cannot compile (one
// written by a newer controller) makes the policy's requests fail closed, never go out unmasked.
func TestPIIThatCannotRunRefusesRequests(t *testing.T) {
	r := newRig(t, rigConfig{policy: piiMask})
	tbl, _, err := source.LoadFiles(r.dir, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	p, _ := tbl.Policy("", "chat")
	p.PII.Detectors = []string{"passport"}
	r.srv.Apply(tbl, "test")
	got := r.post("/v1/chat/completions", piiChat(false))
	if got.status != 503 || !strings.Contains(got.body, `"code":"pii_unavailable"`) {
		t.Errorf("status %d, want 503 pii_unavailable: %s", got.status, got.body)
	}
	if r.A.Total()+r.B.Total() != 0 {
		t.Error("the request went upstream")
	}
	if !strings.Contains(r.logs.String(), "Failed to compile a policy's PII detectors") {
		t.Errorf("no log line says why:\n%s", r.logs.String())
	}
}

// TestPIIEveryDetectorStreamedAtEverySplitPoint: with every builtin detector on, a customer's
// card, Kazakh IIN, Russian INN and SNILS, IBAN, phone, IP address and e-mail never reach the
// provider, and an answer that echoes them comes back with the originals in place wherever the
// provider cuts its stream.
func TestPIIEveryDetectorStreamedAtEverySplitPoint(t *testing.T) {
	values := []string{"5038 5423 1194 1682", "900124444516", "630596721727", "495 389 911 65", "ES62 0723 7368 1454 2246 9418",
		"+7 (705) 264-14-97", "10.145.249.42", "ann@example.com"}
	prompt := fmt.Sprintf("Клиент: карта %s, ИИН %s, ИНН %s, СНИЛС %s, IBAN %s, тел. %s, IP %s, почта %s. Карта снова: %s.",
		values[0], values[1], values[2], values[3], values[4], values[5], values[6], values[7], values[0])
	body := func() string {
		return fmt.Sprintf(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":%q}]}`, prompt)
	}
	r := newRig(t, rigConfig{policy: `pii: {mode: Mask}`})
	r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeEcho})
	if got := r.post("/v1/chat/completions", body()); got.status != 200 {
		t.Fatalf("status %d: %s", got.status, got.body)
	}
	var req struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	if err := json.Unmarshal(r.A.LastBody(), &req); err != nil || len(req.Messages) != 1 {
		t.Fatalf("upstream body %s: %v", r.A.LastBody(), err)
	}
	masked := req.Messages[0].Content
	for _, v := range values {
		if strings.Contains(string(r.A.LastBody()), v) {
			t.Errorf("the provider got %q: %s", v, masked)
		}
	}
	for _, ph := range []string{"[CARD_1]", "[KZ_IIN_1]", "[RU_INN_1]", "[RU_SNILS_1]", "[IBAN_1]", "[PHONE_1]", "[IPV4_1]", "[EMAIL_1]"} {
		if !strings.Contains(masked, ph) {
			t.Errorf("masked prompt has no %s: %s", ph, masked)
		}
	}
	if strings.Count(masked, "[CARD_1]") != 2 {
		t.Errorf("the same card twice is not the same placeholder twice: %s", masked)
	}
	// Every split point a provider can make: each event's JSON carries whole characters.
	for at := range masked {
		if at == 0 {
			continue
		}
		r.A.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeEcho, Splits: fmt.Sprint(at)})
		got := r.post("/v1/chat/completions", body())
		if text, fin, done := streamedText(t, got.body); text != prompt || !fin || !done {
			t.Fatalf("cut at byte %d of %q: got %q (finished=%v, [DONE]=%v)", at, masked, text, fin, done)
		}
	}
	if !strings.Contains(r.metrics(), `switchyard_pii_masked_total{detector="card",namespace="",policy="chat"}`) {
		t.Errorf("no card count in the metrics")
	}
}
