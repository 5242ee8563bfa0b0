package replay

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
)

func TestDecodeLine(t *testing.T) {
	good := []struct {
		line    string
		ts      string
		channel string
		outcome health.Outcome
		latency time.Duration
		id      string
	}{
		{`{"ts":"2026-11-30T10:00:00.120Z","requestId":"r-1","channel":"openai-direct","model":"gpt-4o","attempt":1,"status":503,"outcome":"server_error","latencyMs":812,"ttftMs":0,"stream":true}`,
			"2026-11-30T10:00:00.12Z", "openai-direct", health.OutcomeServerError, 812 * time.Millisecond, "r-1"},
		{` { "ts" : "2026-11-30T10:00:00Z" , "channel":"a","model":"m","status":0 } `, "2026-11-30T10:00:00Z", "a", health.OutcomeConnectionError, 0, ""},
		{`{"ts":"2026-11-30T11:00:00.5+01:00","channel":"a","model":"m","status":429,"latencyMs":1.5}`, "2026-11-30T10:00:00.5Z", "a", health.OutcomeRateLimited, 1500 * time.Microsecond, ""},
		{`{"ts":"2026-11-30T10:00:00.123456789Z","channel":"a","model":"m","status":200,"outcome":"timeout"}`, "2026-11-30T10:00:00.123456789Z", "a", health.OutcomeTimeout, 0, ""},
		{`{"ts":"2026-11-30T10:00:00Z","channel":"a\u00e9","model":"m","status":422,"requestId":null,"extra":[{"a":[true,false,null,-1.5e3]}]}`, "2026-11-30T10:00:00Z", "aé", health.OutcomeClientError, 0, ""},
	}
	var p rawLine
	if err := decodeLine([]byte(`{"ts":"2026-11-30T10:00:00Z","channel":"a","model":"m","status":200,"probe":true}`), &p); err != nil || !p.probe {
		t.Errorf("probe line: %v, probe %v", err, p.probe)
	}
	if err := decodeLine([]byte(`{"ts":"2026-11-30T10:00:00Z","channel":"a","model":"m","status":200,"cohortKey":"user-\u003c7\u003e"}`), &p); err != nil || string(p.cohortKey) != "user-<7>" {
		t.Errorf("cohortKey: %v, %q", err, p.cohortKey)
	}
	for _, g := range good {
		var r rawLine
		if err := decodeLine([]byte(g.line), &r); err != nil {
			t.Errorf("%s: %v", g.line, err)
			continue
		}
		want, _ := time.Parse(time.RFC3339Nano, g.ts)
		if r.ts != want.UnixNano() || string(r.channel) != g.channel || r.outcome != g.outcome || r.latency != g.latency || string(r.requestID) != g.id {
			t.Errorf("%s: got ts %s channel %q outcome %s latency %s id %q", g.line, time.Unix(0, r.ts).UTC(), r.channel, r.outcome, r.latency, r.requestID)
		}
		// Every line the decoder accepts is valid JSON.
		if !json.Valid([]byte(g.line)) {
			t.Errorf("%s: accepted, but not JSON", g.line)
		}
	}
	bad := []string{
		``, `[]`, `{`, `{"ts":"2026-11-30T10:00:00Z","channel":"a","model":"m","status":200`,
		`{"ts":"2026-11-30T10:00:00Z","channel":"a","model":"m","status":200}x`,
		`{"ts":"2026-11-30T10:00:00Z","channel":"a","model":"m","status":200,}`,
		`{"ts":"2026-02-31T10:00:00Z","channel":"a","model":"m","status":200}`,
		`{"ts":"2026-11-30 10:00:00","channel":"a","model":"m","status":200}`,
		`{"ts":"2026-11-30T10:00:00Z","channel":"","model":"m","status":200}`,
		`{"ts":"2026-11-30T10:00:00Z","channel":"a","status":200}`,
		`{"ts":"2026-11-30T10:00:00Z","channel":"a","model":"m","status":2.5}`,
		`{"ts":"2026-11-30T10:00:00Z","channel":"a","model":"m","status":-1}`,
		`{"ts":"2026-11-30T10:00:00Z","channel":"a","model":"m","latencyMs":-3,"status":200}`,
		`{"ts":"2026-11-30T10:00:00Z","channel":"a","model":"m","outcome":"fine"}`,
		`{"ts":"2026-11-30T10:00:00Z","channel":"a","model":"m","status":200,"x":tru}`,
		`{"ts":"2026-11-30T10:00:00Z","channel":"a\x01","model":"m","status":200}`,
		`{"ts":"2026-11-30T10:00:00Z","channel":"a\q","model":"m","status":200}`,
		`{"ts":1,"channel":"a","model":"m","status":200}`,
		`{"ts":"2026-11-30T10:00:00Z","channel":"a","model":"m","status":01}`,
		`{"ts":"2026-11-30T10:00:00Z","channel":"a","model":"m","status":200,"probe":"yes"}`,
		`{"ts":"2026-11-30T10:00:00Z","channel":"a","model":"m","status":200,"cohortKey":7}`,
	}
	for _, b := range bad {
		var r rawLine
		if err := decodeLine([]byte(b), &r); err == nil {
			t.Errorf("%q: accepted", b)
		}
	}
}

func TestDecodeLineAllocatesNothing(t *testing.T) {
	line := []byte(`{"ts":"2026-11-30T10:00:00.120Z","requestId":"r-1","channel":"openai-direct","model":"gpt-4o","attempt":1,"status":503,"outcome":"server_error","latencyMs":812,"ttftMs":0,"stream":true}`)
	var r rawLine
	if n := testing.AllocsPerRun(100, func() { _ = decodeLine(line, &r) }); n != 0 {
		t.Errorf("decodeLine allocates %.0f times per line", n)
	}
}

func FuzzDecodeLine(f *testing.F) {
	f.Add([]byte(`{"ts":"2026-11-30T10:00:00.120Z","requestId":"r-1","channel":"c","model":"m","status":503,"latencyMs":812}`))
	f.Add([]byte(`{"a":[1,{"b":"\u0041"}],"ts":"2026-11-30T10:00:00Z","channel":"c","model":"m","outcome":"success"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r rawLine
		if err := decodeLine(b, &r); err == nil && !json.Valid(b) {
			t.Errorf("accepted invalid JSON %q", b)
		}
	})
}

func TestDecodeStreamLatencyIsTimeToFirstToken(t *testing.T) {
	var r rawLine
	line := `{"ts":"2026-11-30T10:00:00Z","channel":"a","model":"m","status":200,"latencyMs":45000,"ttftMs":800,"stream":true}`
	if err := decodeLine([]byte(line), &r); err != nil {
		t.Fatal(err)
	}
	if r.latency != 800*time.Millisecond {
		t.Errorf("stream latency = %s, want the 800ms time to first token (as the proxy feeds its engine)", r.latency)
	}
	line = `{"ts":"2026-11-30T10:00:00Z","channel":"a","model":"m","status":200,"latencyMs":1200,"ttftMs":1200,"stream":false}`
	if err := decodeLine([]byte(line), &r); err != nil || r.latency != 1200*time.Millisecond {
		t.Errorf("non-stream latency = %s (%v), want 1.2s", r.latency, err)
	}
}
