package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/mockprovider"
)

// TestUpstreamMisbehaviour plays every way a provider fails, over real HTTP, and checks what the
// client receives and how many attempts each upstream saw.
func TestUpstreamMisbehaviour(t *testing.T) {
	type want struct {
		status     int
		channel    string // X-Switchyard-Channel
		attempts   string // X-Switchyard-Attempts
		a, b       int    // requests seen by A and B
		bodyHas    []string
		bodyHasNot []string
	}
	tests := []struct {
		name   string
		a      mockprovider.Behavior
		stream bool
		policy string
		want   want
	}{
		{"ok", mockprovider.Behavior{}, false, "", want{200, "chan-a", "1", 1, 0, []string{`"Hello from a"`}, nil}},
		{"ok streamed", mockprovider.Behavior{}, true, "", want{200, "chan-a", "1", 1, 0, []string{`"finish_reason":"stop"`, "data: [DONE]"}, nil}},
		{"500 once then succeed: fails over", mockprovider.Behavior{FailFirst: 1, Status: 500}, false, "", want{200, "chan-b", "2", 1, 1, []string{"Hello from b"}, nil}},
		{"503 always", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503}, false, "", want{200, "chan-b", "2", 1, 1, nil, nil}},
		{"503 always, streamed", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503}, true, "", want{200, "chan-b", "2", 1, 1, []string{"data: [DONE]"}, nil}},
		{"429 with a short Retry-After: waits and retries the same channel", mockprovider.Behavior{FailFirst: 1, Status: 429, RetryAfter: 1}, false, "", want{200, "chan-a", "2", 2, 0, nil, nil}},
		{"429 with a long Retry-After: fails over", mockprovider.Behavior{Mode: mockprovider.ModeRateLimit, RetryAfter: 30}, false, "", want{200, "chan-b", "2", 1, 1, nil, nil}},
		{"429 without Retry-After: fails over", mockprovider.Behavior{Mode: mockprovider.ModeRateLimit}, false, "", want{200, "chan-b", "2", 1, 1, nil, nil}},
		{"connection reset before headers", mockprovider.Behavior{Mode: mockprovider.ModeReset}, false, "", want{200, "chan-b", "2", 1, 1, nil, nil}},
		{"accepts and never answers, streamed: one firstByte, then fails over", mockprovider.Behavior{Mode: mockprovider.ModeHang}, true, "", want{200, "chan-b", "2", 1, 1, []string{"data: [DONE]"}, nil}},
		{"first token late, headers held", mockprovider.Behavior{Mode: mockprovider.ModeSlowFirstToken, FirstTokenDelay: 2 * time.Second}, true, "", want{200, "chan-b", "2", 1, 1, []string{"Hello"}, nil}},
		{"first token late after early headers", mockprovider.Behavior{Mode: mockprovider.ModeSlowFirstToken, FirstTokenDelay: 2 * time.Second, HeadersFirst: true}, true, "", want{200, "chan-b", "2", 1, 1, []string{"Hello", "data: [DONE]"}, nil}},
		{"stream cut before the first event: fails over", mockprovider.Behavior{Mode: mockprovider.ModeCut, After: 0}, true, "", want{200, "chan-b", "2", 1, 1, []string{"data: [DONE]"}, nil}},
		{"stream cut mid-answer: in-band error, no [DONE]", mockprovider.Behavior{Mode: mockprovider.ModeCut, After: 1}, true, "", want{200, "chan-a", "1", 1, 0, []string{`"Hello"`, `"code":"stream_interrupted"`}, []string{"[DONE]"}}},
		{"stream stalls mid-answer: in-band error, no [DONE]", mockprovider.Behavior{Mode: mockprovider.ModeStall, After: 1}, true, "", want{200, "chan-a", "1", 1, 0, []string{`"code":"stream_interrupted"`}, []string{"[DONE]"}}},
		{"a malformed event is passed over", mockprovider.Behavior{Mode: mockprovider.ModeGarbage, After: 1}, true, "", want{200, "chan-a", "1", 1, 0, []string{`"finish_reason":"stop"`, "data: [DONE]"}, []string{"{not json"}}},
		{"ends cleanly without [DONE]", mockprovider.Behavior{Mode: mockprovider.ModeNoDone}, true, "", want{200, "chan-a", "1", 1, 0, []string{`"finish_reason":"stop"`, "data: [DONE]"}, []string{"stream_interrupted"}}},
		{"context_length_exceeded without overflow models: returned as is", mockprovider.Behavior{Mode: mockprovider.ModeContextLength}, false, "", want{400, "chan-a", "1", 1, 0, []string{"context_length_exceeded"}, nil}},
		{"content_policy_violation: returned, never retried", mockprovider.Behavior{Mode: mockprovider.ModeContentPolicy}, false, "", want{400, "chan-a", "1", 1, 0, []string{"content_policy_violation"}, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, rigConfig{policy: tt.policy})
			r.A.SetBehavior("gpt-4o", tt.a)
			start := time.Now()
			got := r.post("/v1/chat/completions", chat("gpt-4o", tt.stream))
			if got.err != nil {
				t.Fatalf("client error: %v", got.err)
			}
			if got.status != tt.want.status {
				t.Errorf("status = %d, want %d; body %s", got.status, tt.want.status, got.body)
			}
			if h := got.header.Get("X-Switchyard-Channel"); h != tt.want.channel {
				t.Errorf("X-Switchyard-Channel = %q, want %q", h, tt.want.channel)
			}
			if h := got.header.Get("X-Switchyard-Attempts"); h != tt.want.attempts {
				t.Errorf("X-Switchyard-Attempts = %q, want %q", h, tt.want.attempts)
			}
			if got.header.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id")
			}
			if a, b := r.A.Requests("gpt-4o"), r.B.Requests("gpt-4o"); a != tt.want.a || b != tt.want.b {
				t.Errorf("upstream requests A=%d B=%d, want A=%d B=%d", a, b, tt.want.a, tt.want.b)
			}
			for _, s := range tt.want.bodyHas {
				if !strings.Contains(got.body, s) {
					t.Errorf("body lacks %q:\n%s", s, got.body)
				}
			}
			for _, s := range tt.want.bodyHasNot {
				if strings.Contains(got.body, s) {
					t.Errorf("body has %q:\n%s", s, got.body)
				}
			}
			// A silent provider costs one firstByte (400ms here), not a chain of retries into it
			// (a non-streamed one costs the request timeout: TestNonStreamedHangFailsOverAfterTheRequestTimeout).
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
}

func TestContextOverflowGoesToLargerModel(t *testing.T) {
	r := newRig(t, rigConfig{policy: "contextOverflowModels: [gpt-4.1]"})
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeContextLength})
	r.B.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeContextLength})
	got := r.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status != 200 || got.header.Get("X-Switchyard-Model") != "gpt-4.1" {
		t.Fatalf("status %d model %q, want 200 from gpt-4.1: %s", got.status, got.header.Get("X-Switchyard-Model"), got.body)
	}
	if !strings.Contains(got.body, `"model":"gpt-4.1"`) {
		t.Errorf("the response's model must name the model that answered: %s", got.body)
	}
	if r.A.Requests("gpt-4o") != 1 || r.B.Requests("gpt-4o") != 0 {
		t.Errorf("context_length_exceeded must not be retried on the same model: A=%d B=%d", r.A.Requests("gpt-4o"), r.B.Requests("gpt-4o"))
	}
}

func TestFallbackModelWhenNoChannelAnswers(t *testing.T) {
	r := newRig(t, rigConfig{policy: "fallbackModels: [gpt-4o-mini]\nretry: {maxAttempts: 3}\npanicRouting: false"})
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503})
	r.B.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 500})
	got := r.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status != 200 || got.header.Get("X-Switchyard-Model") != "gpt-4o-mini" || got.header.Get("X-Switchyard-Attempts") != "3" {
		t.Fatalf("got %d model=%q attempts=%q: %s", got.status, got.header.Get("X-Switchyard-Model"), got.header.Get("X-Switchyard-Attempts"), got.body)
	}
}

func TestUpstreamModelRename(t *testing.T) {
	r := newRig(t, rigConfig{})
	// Channel A sends gpt-4o upstream as gpt-4o-2024-08-06.
	cfg := strings.Replace(rigConfig{}.render(r.aURL, r.bURL), "models: [{name: gpt-4o}, {name: gpt-4o-mini}, {name: gpt-4.1}]\n  failureDomain: {region: a}",
		"models: [{name: gpt-4o, upstreamModel: gpt-4o-2024-08-06}, {name: gpt-4o-mini}, {name: gpt-4.1}]\n  failureDomain: {region: a}", 1)
	writeFile(t, r.dir, cfg)
	if err := r.src.Load(r.srv); err != nil {
		t.Fatal(err)
	}
	got := r.post("/v1/chat/completions", chat("gpt-4o", false))
	if got.status != 200 || r.A.Requests("gpt-4o-2024-08-06") != 1 {
		t.Fatalf("status %d, upstream saw %v", got.status, r.A.Counts())
	}
	if !strings.Contains(got.body, `"model":"gpt-4o-2024-08-06"`) || got.header.Get("X-Switchyard-Model") != "gpt-4o" {
		t.Errorf("model naming: header %q body %s", got.header.Get("X-Switchyard-Model"), got.body)
	}
}

// TestKeepAliveBeforeFirstEventDoesNotCommit: a provider that sends SSE comments but never an
// answer is still failed over (its keep-alives are not a first event).
func TestKeepAliveBeforeFirstEventDoesNotCommit(t *testing.T) {
	ka := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for i := 0; i < 20; i++ {
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}))
	defer ka.Close()
	r := newRig(t, rigConfig{})
	cfg := strings.Replace(rigConfig{}.render(r.aURL, r.bURL), r.aURL+"/v1", ka.URL+"/v1", 1)
	writeFile(t, r.dir, cfg)
	if err := r.src.Load(r.srv); err != nil {
		t.Fatal(err)
	}
	got := r.post("/v1/chat/completions", chat("gpt-4o", true))
	if got.status != 200 || got.header.Get("X-Switchyard-Channel") != "chan-b" || !strings.Contains(got.body, "[DONE]") || strings.Contains(got.body, "keep-alive") {
		t.Errorf("status %d from %q:\n%s", got.status, got.header.Get("X-Switchyard-Channel"), got.body)
	}
}
