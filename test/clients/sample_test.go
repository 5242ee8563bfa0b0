package clients

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
)

// TestStandaloneSample: the README's first steps on `make run`'s config — a chat completion, and
// embeddings of text-embedding-3-small, as floats and as the base64 the openai SDK asks for by
// default — answered by the first channel.
func TestStandaloneSample(t *testing.T) {
	g := startSample(t, false)
	post := func(path, body string) (*http.Response, []byte) {
		t.Helper()
		resp, err := http.Post(g.url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp, data
	}
	resp, data := post("/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Channel") != "provider-a" || !strings.Contains(string(data), "Hello from provider-a") {
		t.Fatalf("chat: %d %v\n%s", resp.StatusCode, resp.Header, data)
	}
	for _, format := range []string{"", "float", "base64"} {
		body := `{"model":"text-embedding-3-small","input":["hello","world"]}`
		if format != "" {
			body = strings.Replace(body, `}`, `,"encoding_format":"`+format+`"}`, 1)
		}
		resp, data := post("/v1/embeddings", body)
		var out struct {
			Data []struct {
				Embedding json.RawMessage `json:"embedding"`
			} `json:"data"`
			Model string `json:"model"`
		}
		if err := json.Unmarshal(data, &out); err != nil || resp.StatusCode != 200 || len(out.Data) != 2 || out.Model != "text-embedding-3-small" {
			t.Fatalf("embeddings %q: %d\n%s", format, resp.StatusCode, data)
		}
		var vec []float32
		if format == "base64" {
			var s string
			_ = json.Unmarshal(out.Data[0].Embedding, &s)
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(raw) == 0 || len(raw)%4 != 0 {
				t.Fatalf("base64 embedding %s: %v", out.Data[0].Embedding, err)
			}
			for i := 0; i < len(raw); i += 4 {
				vec = append(vec, math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])))
			}
		} else if err := json.Unmarshal(out.Data[0].Embedding, &vec); err != nil {
			t.Fatalf("embedding %q: %s", format, out.Data[0].Embedding)
		}
		if len(vec) != 8 || vec[0] != 0.01 || vec[1] != -0.02 {
			t.Errorf("embedding %q: %v", format, vec)
		}
	}
	if n := g.a.Requests("text-embedding-3-small"); n != 3 {
		t.Errorf("provider-a answered %d embeddings requests, want 3", n)
	}
}
