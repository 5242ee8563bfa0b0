package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestResponsesStreamCutOnOpenAIChannel: a /v1/responses stream passed through from an OpenAI
// channel and cut after text reached the client ends with the Responses API's own in-band error
// event, numbered after the channel's last sequence_number (the AI SDK requires the number, and
// a chat-style {"error":…} chunk is no Responses event), and with no [DONE].
func TestResponsesStreamCutOnOpenAIChannel(t *testing.T) {
	rr := newRecoveryRig(t, "streamRecovery: Continue", recoveryChannel{"openai", true}, recoveryChannel{"openai", true})
	rr.behave("cut;after=3;text=Hello there, friend", "ok")
	got := rr.post("/v1/responses", `{"model":"m","stream":true,"input":"hi"}`)
	if got.status != 200 {
		t.Fatalf("status %d: %s", got.status, got.body)
	}
	events := strings.Split(strings.TrimSpace(got.body), "\n\n")
	lastSeq := -1
	for _, ev := range events[:len(events)-1] {
		_, data, _ := strings.Cut(ev, "data: ")
		var e struct {
			Seq *int `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(data), &e); err != nil || e.Seq == nil {
			t.Fatalf("an event of the channel's without a sequence_number: %q", ev)
		}
		lastSeq = *e.Seq
	}
	last := events[len(events)-1]
	if !strings.HasPrefix(last, "event: error\ndata: ") {
		t.Fatalf("the stream ends with %q, want the Responses API's error event", last)
	}
	var e struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Seq     *int   `json:"sequence_number"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(last, "event: error\ndata: ")), &e); err != nil {
		t.Fatal(err)
	}
	if e.Type != "error" || e.Code != "stream_interrupted" || e.Message == "" || e.Seq == nil || *e.Seq != lastSeq+1 {
		t.Errorf("error event %+v (sequence_number %v), want type error, code stream_interrupted, sequence_number %d", e, e.Seq, lastSeq+1)
	}
	if strings.Contains(got.body, "[DONE]") || lastSeq < 1 {
		t.Errorf("[DONE] in a Responses stream, or too few events before the cut (%d):\n%s", lastSeq, got.body)
	}
	if rr.mocks[1].Requests("m") != 0 {
		t.Error("a stream that had reached the client was sent again")
	}
}
