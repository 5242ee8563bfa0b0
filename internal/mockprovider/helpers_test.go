package mockprovider

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// start runs a mock behind an httptest server; cleanup closes the mock first.
func start(t *testing.T, opts Options) (*Server, *httptest.Server, *http.Client) {
	t.Helper()
	mock := New(opts)
	ts := httptest.NewServer(mock)
	tr := &http.Transport{}
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	t.Cleanup(func() {
		mock.Close()
		ts.Close()
		tr.CloseIdleConnections()
	})
	return mock, ts, client
}

type reqOpts struct {
	path    string
	method  string
	body    any // marshalled; a string is sent as is
	headers map[string]string
	ctx     context.Context
}

func do(t *testing.T, c *http.Client, ts *httptest.Server, o reqOpts) (*http.Response, error) {
	t.Helper()
	if o.method == "" {
		o.method = http.MethodPost
	}
	if o.path == "" {
		o.path = "/v1/chat/completions"
	}
	var rd io.Reader
	switch b := o.body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	ctx := o.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(ctx, o.method, ts.URL+o.path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range o.headers {
		req.Header.Set(k, v)
	}
	return c.Do(req)
}

func chatBody(model string, stream bool) map[string]any {
	b := map[string]any{
		"model":    model,
		"messages": []any{map[string]any{"role": "user", "content": "Say hello"}},
	}
	if stream {
		b["stream"] = true
	}
	return b
}

// mustDo does a request that must get a response, and reads the whole body.
func mustDo(t *testing.T, c *http.Client, ts *httptest.Server, o reqOpts) (*http.Response, []byte) {
	t.Helper()
	resp, err := do(t, c, ts, o)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, data
}

func decode(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, data)
	}
	return m
}

// openAIError checks an OpenAI error body and returns its error object.
func openAIError(t *testing.T, data []byte) map[string]any {
	t.Helper()
	m := decode(t, data)
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object in %s", data)
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Errorf("error object lacks %q: %s", k, data)
		}
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Errorf("empty error message: %s", data)
	}
	return e
}

// sse is one server-sent event.
type sse struct {
	event string
	data  string
}

// readSSE reads events until the body ends; err is nil on a clean end.
func readSSE(body io.Reader) ([]sse, error) {
	br := bufio.NewReader(body)
	var out []sse
	var cur sse
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" {
				return out, nil
			}
			return out, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if cur.data != "" || cur.event != "" {
				out = append(out, cur)
			}
			cur = sse{}
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		}
	}
}

// chunk decodes a chat.completion.chunk event.
type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

func parseChunks(t *testing.T, evs []sse) (chunks []chunk, garbage int, done bool) {
	t.Helper()
	for i, ev := range evs {
		if ev.data == "[DONE]" {
			if i != len(evs)-1 {
				t.Errorf("[DONE] is not the last event")
			}
			done = true
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
			garbage++
			continue
		}
		chunks = append(chunks, c)
	}
	return chunks, garbage, done
}

func finished(cs []chunk) bool {
	for _, c := range cs {
		for _, ch := range c.Choices {
			if ch.FinishReason != nil && *ch.FinishReason == "stop" {
				return true
			}
		}
	}
	return false
}

func contentOf(cs []chunk) string {
	var s string
	for _, c := range cs {
		for _, ch := range c.Choices {
			s += ch.Delta.Content + ch.Text
		}
	}
	return s
}
