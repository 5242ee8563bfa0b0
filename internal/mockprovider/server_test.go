package mockprovider

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestChatNonStreamed(t *testing.T) {
	mock, ts, c := start(t, Options{Name: "mock-a"})
	resp, data := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o", false)})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content-type %q", ct)
	}
	if n := resp.Header.Get(NameHeader); n != "mock-a" {
		t.Errorf("%s = %q", NameHeader, n)
	}
	var out struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
			TotalTokens      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.ID, "chatcmpl-") || out.Object != "chat.completion" || out.Created == 0 || out.Model != "gpt-4o" {
		t.Errorf("bad envelope: %s", data)
	}
	if len(out.Choices) != 1 || out.Choices[0].Message.Role != "assistant" || out.Choices[0].FinishReason != "stop" {
		t.Fatalf("bad choices: %s", data)
	}
	if got := out.Choices[0].Message.Content; got != "Hello from mock-a" {
		t.Errorf("content %q", got)
	}
	u := out.Usage
	if u.PromptTokens <= 0 || u.CompletionTokens <= 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("bad usage %+v", u)
	}
	if mock.Requests("gpt-4o") != 1 || mock.Total() != 1 || mock.Requests("other") != 0 {
		t.Errorf("counts: gpt-4o=%d total=%d", mock.Requests("gpt-4o"), mock.Total())
	}
}

func TestChatStreamed(t *testing.T) {
	mock, ts, c := start(t, Options{Name: "mock-s"})

	t.Run("default", func(t *testing.T) {
		resp, err := do(t, c, ts, reqOpts{body: chatBody("gpt-4o", true)})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("status %d content-type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		evs, err := readSSE(resp.Body)
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		chunks, garbage, done := parseChunks(t, evs)
		if len(chunks) != 4 || garbage != 0 || !done {
			t.Fatalf("want 3 content + 1 finish chunks and [DONE], got %d chunks, %d garbage, done=%v", len(chunks), garbage, done)
		}
		for i, ch := range chunks {
			if ch.Object != "chat.completion.chunk" || ch.Model != "gpt-4o" || ch.ID != chunks[0].ID || ch.Usage != nil {
				t.Errorf("chunk %d: %+v", i, ch)
			}
			fr := ch.Choices[0].FinishReason
			if (i == 3) != (fr != nil) {
				t.Errorf("chunk %d finish_reason %v", i, fr)
			}
		}
		if chunks[0].Choices[0].Delta.Role != "assistant" {
			t.Errorf("first delta has no role")
		}
		if got := contentOf(chunks); got != "Hello from mock-s" {
			t.Errorf("content %q", got)
		}
	})

	t.Run("include_usage", func(t *testing.T) {
		body := chatBody("gpt-4o", true)
		body["stream_options"] = map[string]any{"include_usage": true}
		resp, err := do(t, c, ts, reqOpts{body: body})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		evs, err := readSSE(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		chunks, _, done := parseChunks(t, evs)
		last := chunks[len(chunks)-1]
		if !done || last.Usage == nil || last.Choices[0].FinishReason == nil || last.Usage.CompletionTokens != 3 {
			t.Fatalf("last chunk should carry finish_reason and usage: %+v", last)
		}
	})

	t.Run("separate_usage_and_chunks", func(t *testing.T) {
		mock.SetBehavior("gpt-4o-mini", Behavior{Chunks: 5, SeparateUsage: true})
		body := chatBody("gpt-4o-mini", true)
		body["stream_options"] = map[string]any{"include_usage": true}
		resp, err := do(t, c, ts, reqOpts{body: body})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		evs, err := readSSE(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		chunks, _, done := parseChunks(t, evs)
		if len(chunks) != 7 || !done {
			t.Fatalf("want 5 content + finish + usage chunks, got %d", len(chunks))
		}
		last := chunks[6]
		if last.Usage == nil || len(last.Choices) != 0 || last.Usage.CompletionTokens != 5 {
			t.Errorf("usage chunk: %+v", last)
		}
		if chunks[5].Choices[0].FinishReason == nil || chunks[5].Usage != nil {
			t.Errorf("finish chunk: %+v", chunks[5])
		}
	})
	if mock.Requests("gpt-4o") != 2 || mock.Requests("gpt-4o-mini") != 1 || mock.Total() != 3 {
		t.Errorf("counts %v", mock.Counts())
	}
}

func TestPrefixedPath(t *testing.T) {
	mock, ts, c := start(t, Options{})
	resp, data := mustDo(t, c, ts, reqOpts{path: "/openai/v1/chat/completions", body: chatBody("gpt-4o", false)})
	if resp.StatusCode != 200 || decode(t, data)["object"] != "chat.completion" {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	resp, data = mustDo(t, c, ts, reqOpts{path: "/v1/nope", body: chatBody("gpt-4o", false)})
	if resp.StatusCode != 404 {
		t.Errorf("unknown path: status %d", resp.StatusCode)
	}
	openAIError(t, data)
	resp, data = mustDo(t, c, ts, reqOpts{method: http.MethodGet, path: "/v1/chat/completions"})
	if resp.StatusCode != 405 {
		t.Errorf("GET chat: status %d", resp.StatusCode)
	}
	openAIError(t, data)
	resp, data = mustDo(t, c, ts, reqOpts{body: "{not json"})
	if resp.StatusCode != 400 {
		t.Errorf("bad JSON: status %d", resp.StatusCode)
	}
	openAIError(t, data)
	resp, _ = mustDo(t, c, ts, reqOpts{body: map[string]any{"messages": []any{}}})
	if resp.StatusCode != 400 {
		t.Errorf("no model: status %d", resp.StatusCode)
	}
	if mock.Requests("gpt-4o") != 2 || mock.Total() != 5 {
		t.Errorf("counts %v total %d", mock.Counts(), mock.Total())
	}
}

func TestOtherEndpoints(t *testing.T) {
	mock, ts, c := start(t, Options{Name: "m", Models: []string{"gpt-4o", "text-embedding-3-small"}})

	t.Run("completions", func(t *testing.T) {
		resp, data := mustDo(t, c, ts, reqOpts{path: "/v1/completions", body: map[string]any{"model": "gpt-3.5-turbo-instruct", "prompt": "Say hi"}})
		m := decode(t, data)
		choices, _ := m["choices"].([]any)
		if resp.StatusCode != 200 || m["object"] != "text_completion" || m["model"] != "gpt-3.5-turbo-instruct" || len(choices) != 1 {
			t.Fatalf("status %d: %s", resp.StatusCode, data)
		}
		if ch := choices[0].(map[string]any); ch["text"] != "Hello from m" || ch["finish_reason"] != "stop" {
			t.Errorf("choice %v", ch)
		}
	})
	t.Run("completions_stream", func(t *testing.T) {
		resp, err := do(t, c, ts, reqOpts{path: "/v1/completions", body: map[string]any{"model": "gpt-3.5-turbo-instruct", "prompt": "x", "stream": true}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		evs, err := readSSE(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		chunks, garbage, done := parseChunks(t, evs)
		if len(chunks) != 4 || garbage != 0 || !done || !finished(chunks) || contentOf(chunks) != "Hello from m" || chunks[0].Object != "text_completion" {
			t.Fatalf("stream %+v", evs)
		}
	})
	t.Run("embeddings", func(t *testing.T) {
		for _, tc := range []struct {
			input any
			n     int
		}{{"one", 1}, {[]string{"a", "b"}, 2}, {[]int{1, 2, 3}, 1}, {[][]int{{1}, {2}, {3}}, 3}} {
			resp, data := mustDo(t, c, ts, reqOpts{path: "/v1/embeddings", body: map[string]any{"model": "text-embedding-3-small", "input": tc.input}})
			var out struct {
				Object string `json:"object"`
				Model  string `json:"model"`
				Data   []struct {
					Object    string    `json:"object"`
					Index     int       `json:"index"`
					Embedding []float64 `json:"embedding"`
				} `json:"data"`
				Usage struct {
					PromptTokens int `json:"prompt_tokens"`
				} `json:"usage"`
			}
			if err := json.Unmarshal(data, &out); err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d err %v: %s", resp.StatusCode, err, data)
			}
			if out.Object != "list" || out.Model != "text-embedding-3-small" || len(out.Data) != tc.n || out.Usage.PromptTokens <= 0 {
				t.Fatalf("input %v: %s", tc.input, data)
			}
			for i, d := range out.Data {
				if d.Object != "embedding" || d.Index != i || len(d.Embedding) != 8 {
					t.Errorf("item %d: %+v", i, d)
				}
			}
		}
	})
	t.Run("responses", func(t *testing.T) {
		resp, data := mustDo(t, c, ts, reqOpts{path: "/v1/responses", body: map[string]any{"model": "gpt-4o", "input": "hi"}})
		m := decode(t, data)
		if resp.StatusCode != 200 || m["object"] != "response" || m["status"] != "completed" || m["model"] != "gpt-4o" {
			t.Fatalf("status %d: %s", resp.StatusCode, data)
		}
		if !strings.Contains(string(data), `"text":"Hello from m"`) || m["usage"] == nil {
			t.Errorf("no output text or usage: %s", data)
		}
	})
	t.Run("responses_stream", func(t *testing.T) {
		resp, err := do(t, c, ts, reqOpts{path: "/v1/responses", body: map[string]any{"model": "gpt-4o", "input": "hi", "stream": true}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		evs, err := readSSE(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		text := ""
		for _, ev := range evs {
			var m map[string]any
			if err := json.Unmarshal([]byte(ev.data), &m); err != nil || m["type"] != ev.event {
				t.Fatalf("event %+v", ev)
			}
			types = append(types, ev.event)
			if d, ok := m["delta"].(string); ok {
				text += d
			}
		}
		want := "response.created,response.in_progress,response.output_item.added,response.content_part.added," +
			"response.output_text.delta,response.output_text.delta,response.output_text.delta," +
			"response.output_text.done,response.content_part.done,response.output_item.done,response.completed"
		if strings.Join(types, ",") != want || text != "Hello from m" {
			t.Errorf("events %v text %q", types, text)
		}
	})
	t.Run("models", func(t *testing.T) {
		mock.SetBehavior("custom-model", Behavior{})
		resp, data := mustDo(t, c, ts, reqOpts{method: http.MethodGet, path: "/v1/models"})
		var out struct {
			Object string `json:"object"`
			Data   []struct {
				ID     string `json:"id"`
				Object string `json:"object"`
			} `json:"data"`
		}
		if err := json.Unmarshal(data, &out); err != nil || resp.StatusCode != 200 || out.Object != "list" {
			t.Fatalf("status %d: %s", resp.StatusCode, data)
		}
		var ids []string
		for _, d := range out.Data {
			ids = append(ids, d.ID)
		}
		if strings.Join(ids, ",") != "custom-model,gpt-4o,text-embedding-3-small" {
			t.Errorf("models %v", ids)
		}
		if mock.Requests("") != 1 {
			t.Errorf("GET /v1/models should count under model \"\": %v", mock.Counts())
		}
	})
}

func TestFailFirst(t *testing.T) {
	mock, ts, c := start(t, Options{})
	statuses := func(model string, n int, stream bool) []int {
		var out []int
		for i := 0; i < n; i++ {
			resp, _ := mustDo(t, c, ts, reqOpts{body: chatBody(model, stream)})
			out = append(out, resp.StatusCode)
		}
		return out
	}
	eq := func(a, b []int) bool { return fmtInts(a) == fmtInts(b) }

	mock.SetBehavior("gpt-4o", Behavior{Mode: ModeFailOnce})
	if got := statuses("gpt-4o", 3, false); !eq(got, []int{500, 200, 200}) {
		t.Errorf("fail_once: %v", got)
	}
	// Other models are not affected; the default applies to them.
	if got := statuses("gpt-4o-mini", 1, true); !eq(got, []int{200}) {
		t.Errorf("other model: %v", got)
	}
	mock.SetBehavior("gpt-4o", Behavior{FailFirst: 2, Status: 502})
	if got := statuses("gpt-4o", 3, true); !eq(got, []int{502, 502, 200}) {
		t.Errorf("fail_first 2: %v", got)
	}
	// The default behaviour counts per model.
	mock.SetDefault(Behavior{FailFirst: 1, Status: 429, RetryAfter: 1})
	resp, data := mustDo(t, c, ts, reqOpts{body: chatBody("a", false)})
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("429 then success: first got %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if e := openAIError(t, data); e["code"] != "rate_limit_exceeded" {
		t.Errorf("429 code %v", e["code"])
	}
	if got := statuses("a", 1, false); !eq(got, []int{200}) {
		t.Errorf("a after: %v", got)
	}
	if got := statuses("b", 2, false); !eq(got, []int{429, 200}) {
		t.Errorf("b: %v", got)
	}
	// Reset restarts the progress.
	mock.Reset()
	if got := statuses("a", 2, false); !eq(got, []int{429, 200}) {
		t.Errorf("after reset: %v", got)
	}
	if mock.Requests("a") != 2 || mock.Total() != 2 {
		t.Errorf("counts after reset %v", mock.Counts())
	}
}

func fmtInts(a []int) string {
	b, _ := json.Marshal(a)
	return string(b)
}

func TestStatusAlways(t *testing.T) {
	mock, ts, c := start(t, Options{})
	for _, st := range []int{500, 503, 502} {
		mock.SetBehavior("gpt-4o", Behavior{Mode: ModeStatus, Status: st})
		for i := 0; i < 2; i++ {
			for _, stream := range []bool{false, true} {
				resp, data := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o", stream)})
				if resp.StatusCode != st {
					t.Fatalf("want %d, got %d", st, resp.StatusCode)
				}
				if e := openAIError(t, data); e["type"] != "server_error" {
					t.Errorf("type %v", e["type"])
				}
				if resp.Header.Get("Retry-After") != "" {
					t.Errorf("unexpected Retry-After")
				}
			}
		}
	}
	// Status defaults to 500.
	mock.SetBehavior("gpt-4o", Behavior{Mode: ModeStatus, Message: "boom"})
	resp, data := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o", false)})
	if resp.StatusCode != 500 || openAIError(t, data)["message"] != "boom" {
		t.Errorf("default status: %d %s", resp.StatusCode, data)
	}
	if mock.Requests("gpt-4o") != 13 {
		t.Errorf("count %d", mock.Requests("gpt-4o"))
	}
}

func TestRateLimit(t *testing.T) {
	mock, ts, c := start(t, Options{})
	mock.SetBehavior("with", Behavior{Mode: ModeRateLimit, RetryAfter: 7})
	mock.SetBehavior("without", Behavior{Mode: ModeRateLimit})
	resp, data := mustDo(t, c, ts, reqOpts{body: chatBody("with", true)})
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" {
		t.Errorf("with: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if e := openAIError(t, data); e["code"] != "rate_limit_exceeded" || e["type"] != "requests" {
		t.Errorf("error %v", e)
	}
	resp, data = mustDo(t, c, ts, reqOpts{body: chatBody("without", false)})
	if _, has := resp.Header["Retry-After"]; resp.StatusCode != 429 || has {
		t.Errorf("without: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	openAIError(t, data)
}

func TestBadRequestCodes(t *testing.T) {
	mock, ts, c := start(t, Options{})
	for _, tc := range []struct {
		mode  Mode
		code  string
		param any
	}{
		{ModeContextLength, "context_length_exceeded", "messages"},
		{ModeContentPolicy, "content_policy_violation", "prompt"},
	} {
		mock.SetBehavior("gpt-4o", Behavior{Mode: tc.mode})
		for _, stream := range []bool{false, true} {
			resp, data := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o", stream)})
			if resp.StatusCode != 400 {
				t.Fatalf("%s: status %d", tc.mode, resp.StatusCode)
			}
			e := openAIError(t, data)
			if e["code"] != tc.code || e["type"] != "invalid_request_error" || e["param"] != tc.param {
				t.Errorf("%s: %s", tc.mode, data)
			}
		}
	}
}

func TestResetConnection(t *testing.T) {
	mock, ts, c := start(t, Options{})
	mock.SetBehavior("gpt-4o", Behavior{Mode: ModeReset})
	for _, stream := range []bool{false, true} {
		resp, err := do(t, c, ts, reqOpts{body: chatBody("gpt-4o", stream)})
		if err == nil {
			resp.Body.Close()
			t.Fatalf("reset: got status %d, want a client error", resp.StatusCode)
		}
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("stream=%v: want a connection reset, got %v", stream, err)
		}
	}
	// The server keeps serving after a reset.
	resp, _ := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o-mini", false)})
	if resp.StatusCode != 200 {
		t.Errorf("after reset: %d", resp.StatusCode)
	}
	if mock.Requests("gpt-4o") != 2 {
		t.Errorf("count %d", mock.Requests("gpt-4o"))
	}
}

func TestHang(t *testing.T) {
	mock, ts, c := start(t, Options{})
	mock.SetBehavior("gpt-4o", Behavior{Mode: ModeHang})

	// A client timeout sees nothing but its own timeout.
	short := &http.Client{Transport: c.Transport, Timeout: 100 * time.Millisecond}
	t0 := time.Now()
	resp, err := do(t, short, ts, reqOpts{body: chatBody("gpt-4o", true)})
	if err == nil {
		resp.Body.Close()
		t.Fatalf("hang: got status %d", resp.StatusCode)
	}
	if !isTimeout(err) || time.Since(t0) < 100*time.Millisecond {
		t.Errorf("hang: want a client timeout, got %v after %v", err, time.Since(t0))
	}

	// Close releases a hung request: the client gets an error, not an answer.
	errc := make(chan error, 1)
	go func() {
		resp, err := do(t, c, ts, reqOpts{body: chatBody("gpt-4o", false)})
		if err == nil {
			resp.Body.Close()
			err = errors.New("got an answer")
		}
		errc <- err
	}()
	waitFor(t, func() bool { return mock.Requests("gpt-4o") == 2 })
	mock.Close()
	select {
	case err := <-errc:
		if err.Error() == "got an answer" {
			t.Errorf("released hang answered")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not release the hung request")
	}
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// waitFor polls cond for up to 2 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 2s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSlowFirstToken(t *testing.T) {
	const d = 150 * time.Millisecond
	mock, ts, c := start(t, Options{})

	// Nothing (not even headers) before the first event.
	mock.SetBehavior("gpt-4o", Behavior{Mode: ModeSlowFirstToken, FirstTokenDelay: d})
	t0 := time.Now()
	resp, err := do(t, c, ts, reqOpts{body: chatBody("gpt-4o", true)})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(t0); el < d {
		t.Errorf("headers after %v, want ≥ %v", el, d)
	}
	evs, err := readSSE(resp.Body)
	resp.Body.Close()
	if chunks, _, done := parseChunks(t, evs); err != nil || !done || !finished(chunks) {
		t.Errorf("stream after slow first token: err %v", err)
	}

	// Headers at once, first event late.
	mock.SetBehavior("gpt-4o", Behavior{Mode: ModeSlowFirstToken, FirstTokenDelay: d, HeadersFirst: true})
	t0 = time.Now()
	resp, err = do(t, c, ts, reqOpts{body: chatBody("gpt-4o", true)})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(t0); el < d {
		t.Errorf("first byte after %v, want ≥ %v", el, d)
	}
	evs, err = readSSE(io.MultiReader(strings.NewReader(string(buf)), resp.Body))
	resp.Body.Close()
	if chunks, _, done := parseChunks(t, evs); err != nil || !done || !finished(chunks) {
		t.Errorf("stream after slow first token (headers first): err %v", err)
	}

	// With a first event that never comes in time, the headers still arrive.
	mock.SetBehavior("gpt-4o", Behavior{Mode: ModeSlowFirstToken, FirstTokenDelay: time.Minute, HeadersFirst: true})
	resp, err = do(t, c, ts, reqOpts{body: chatBody("gpt-4o", true)})
	if err != nil {
		t.Fatalf("headers first: %v", err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("headers first: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	resp.Body.Close() // the client goes away: the handler is released
	waitFor(t, func() bool { return mock.Requests("gpt-4o") == 3 })
}

func TestDelayAndLatency(t *testing.T) {
	const d = 100 * time.Millisecond
	mock, ts, c := start(t, Options{})
	for _, tc := range []struct {
		name   string
		b      Behavior
		stream bool
		slow   bool
	}{
		{"delay_nonstream", Behavior{Delay: d}, false, true},
		{"delay_stream", Behavior{Delay: d}, true, true},
		{"delay_error", Behavior{Delay: d, Mode: ModeStatus, Status: 503}, false, true},
		{"latency_nonstream", Behavior{Latency: d}, false, true},
		{"latency_not_for_streams", Behavior{Latency: time.Minute}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mock.SetBehavior("gpt-4o", tc.b)
			t0 := time.Now()
			resp, err := do(t, c, ts, reqOpts{body: chatBody("gpt-4o", tc.stream)})
			if err != nil {
				t.Fatal(err)
			}
			el := time.Since(t0)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if tc.slow && el < d {
				t.Errorf("answered after %v, want ≥ %v", el, d)
			}
			if !tc.slow && el >= 3*time.Second {
				t.Errorf("answered after %v", el)
			}
		})
	}
}

func TestCut(t *testing.T) {
	mock, ts, c := start(t, Options{})
	for _, after := range []int{0, 2, 3, 9} {
		mock.SetBehavior("gpt-4o", Behavior{Mode: ModeCut, After: after})
		resp, err := do(t, c, ts, reqOpts{body: chatBody("gpt-4o", true)})
		if err != nil {
			t.Fatalf("after=%d: %v", after, err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("after=%d: status %d", after, resp.StatusCode)
		}
		evs, err := readSSE(resp.Body)
		resp.Body.Close()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("after=%d: want unexpected EOF, got %v", after, err)
		}
		chunks, _, done := parseChunks(t, evs)
		want := min(after, 3)
		if len(chunks) != want || done || finished(chunks) {
			t.Errorf("after=%d: got %d chunks done=%v finished=%v", after, len(chunks), done, finished(chunks))
		}
	}
	// Non-streamed: half a body, then the connection closes.
	resp, err := do(t, c, ts, reqOpts{body: chatBody("gpt-4o", false)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("non-streamed cut: %v", err)
	}
	if mock.Requests("gpt-4o") != 5 {
		t.Errorf("count %d", mock.Requests("gpt-4o"))
	}
}

func TestStall(t *testing.T) {
	mock, ts, c := start(t, Options{})
	// readStalled gets the headers, then gives the body 150ms.
	readStalled := func(stream bool) ([]byte, error) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp, err := do(t, c, ts, reqOpts{body: chatBody("gpt-4o", stream), ctx: ctx})
		if err != nil {
			t.Fatalf("stall: %v", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("stall: status %d", resp.StatusCode)
		}
		timer := time.AfterFunc(150*time.Millisecond, cancel)
		defer timer.Stop()
		t0 := time.Now()
		data, err := io.ReadAll(resp.Body)
		if el := time.Since(t0); el > 2*time.Second {
			t.Errorf("read took %v", el)
		}
		return data, err
	}
	for _, after := range []int{0, 1} {
		mock.SetBehavior("gpt-4o", Behavior{Mode: ModeStall, After: after})
		data, err := readStalled(true)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("after=%d: want the read to be cut by the client, got %v", after, err)
		}
		evs, _ := readSSE(strings.NewReader(string(data)))
		chunks, _, done := parseChunks(t, evs)
		if len(chunks) != after || done || finished(chunks) {
			t.Errorf("after=%d: got %d chunks done=%v", after, len(chunks), done)
		}
	}
	// Non-streamed: half a body, then silence.
	data, err := readStalled(false)
	if !errors.Is(err, context.Canceled) || len(data) == 0 || json.Valid(data) {
		t.Errorf("non-streamed stall: %v after %q", err, data)
	}
	// Every stalled request was counted.
	waitFor(t, func() bool { return mock.Requests("gpt-4o") == 3 })
}

func TestGarbage(t *testing.T) {
	mock, ts, c := start(t, Options{})
	mock.SetBehavior("gpt-4o", Behavior{Mode: ModeGarbage, After: 1})
	resp, err := do(t, c, ts, reqOpts{body: chatBody("gpt-4o", true)})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := readSSE(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	chunks, garbage, done := parseChunks(t, evs)
	if garbage != 1 || evs[1].data != "{not json" || len(chunks) != 4 || !done || !finished(chunks) || contentOf(chunks) != "Hello from mockprovider" {
		t.Errorf("garbage stream: %+v", evs)
	}
	resp, data := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o", false)})
	if resp.StatusCode != 200 || json.Valid(data) {
		t.Errorf("non-streamed garbage: %d %q", resp.StatusCode, data)
	}
}

func TestNoDone(t *testing.T) {
	mock, ts, c := start(t, Options{})
	mock.SetBehavior("gpt-4o", Behavior{Mode: ModeNoDone})
	resp, err := do(t, c, ts, reqOpts{body: chatBody("gpt-4o", true)})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := readSSE(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("no_done must close cleanly: %v", err)
	}
	chunks, garbage, done := parseChunks(t, evs)
	if done || garbage != 0 || len(chunks) != 4 || !finished(chunks) {
		t.Errorf("no_done: %+v", evs)
	}
}

func TestAPIKey(t *testing.T) {
	mock, ts, c := start(t, Options{APIKey: "sk-provider"})
	for _, tc := range []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"none", nil, 401},
		{"wrong", map[string]string{"Authorization": "Bearer sk-client"}, 401},
		{"bearer", map[string]string{"Authorization": "Bearer sk-provider"}, 200},
		{"api-key", map[string]string{"api-key": "sk-provider"}, 200},
	} {
		resp, data := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o", false), headers: tc.headers})
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d", tc.name, resp.StatusCode)
		}
		if tc.status == 401 {
			if e := openAIError(t, data); e["code"] != "invalid_api_key" {
				t.Errorf("%s: %s", tc.name, data)
			}
		}
	}
	h := mock.LastHeaders()
	if h.Get("api-key") != "sk-provider" || h.Get("Authorization") != "" {
		t.Errorf("last headers %v", h)
	}
	// The copy is the caller's.
	h.Set("api-key", "x")
	if mock.LastHeaders().Get("api-key") != "sk-provider" {
		t.Error("LastHeaders is not a copy")
	}
	if mock.Requests("gpt-4o") != 4 {
		t.Errorf("count %d", mock.Requests("gpt-4o"))
	}
	mock.Reset()
	if mock.LastHeaders() != nil || mock.Total() != 0 {
		t.Error("Reset kept stats")
	}
}

func TestHeaderOverride(t *testing.T) {
	mock, ts, c := start(t, Options{})
	mock.SetBehavior("gpt-4o", Behavior{Mode: ModeStatus, Status: 500})
	resp, _ := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o", false), headers: map[string]string{BehaviorHeader: "ok"}})
	if resp.StatusCode != 200 {
		t.Errorf("override to ok: %d", resp.StatusCode)
	}
	resp, _ = mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o-mini", false), headers: map[string]string{BehaviorHeader: "429;retry_after=3"}})
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" {
		t.Errorf("override 429: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	resp, data := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o", false), headers: map[string]string{BehaviorHeader: "explode"}})
	if resp.StatusCode != 400 || !strings.Contains(openAIError(t, data)["message"].(string), "X-Mock-Behavior") {
		t.Errorf("invalid header: %d %s", resp.StatusCode, data)
	}
	// fail_once by header counts per model, apart from the configured behaviour.
	var got []int
	for i := 0; i < 3; i++ {
		resp, _ := mustDo(t, c, ts, reqOpts{body: chatBody("gpt-4o-mini", true), headers: map[string]string{BehaviorHeader: "fail_once;status=503"}})
		got = append(got, resp.StatusCode)
	}
	if fmtInts(got) != "[503,200,200]" {
		t.Errorf("fail_once by header: %v", got)
	}
	// Header-driven stream faults.
	resp, err := do(t, c, ts, reqOpts{body: chatBody("gpt-4o-mini", true), headers: map[string]string{BehaviorHeader: "cut;after=1"}})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := readSSE(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(evs) != 1 {
		t.Errorf("cut by header: %v, %d events", err, len(evs))
	}
	if mock.Total() != 7 {
		t.Errorf("total %d", mock.Total())
	}
}

func TestConcurrentRequests(t *testing.T) {
	mock, ts, c := start(t, Options{})
	mock.SetBehavior("flaky", Behavior{FailFirst: 5})
	var wg sync.WaitGroup
	var mu sync.Mutex
	fails := 0
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			model := []string{"flaky", "gpt-4o"}[i%2]
			resp, err := do(t, c, ts, reqOpts{body: chatBody(model, i%4 < 2)})
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				mu.Lock()
				fails++
				mu.Unlock()
			}
			mock.SetBehavior("other", Behavior{Chunks: i + 1})
			_ = mock.Counts()
		}(i)
	}
	wg.Wait()
	if fails != 5 || mock.Requests("flaky") != 10 || mock.Requests("gpt-4o") != 10 || mock.Total() != 20 {
		t.Errorf("fails %d counts %v", fails, mock.Counts())
	}
}
