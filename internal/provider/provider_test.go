package provider_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/provider"
)

func TestEditBody(t *testing.T) {
	in := `{"model":"m","stream":true,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"AAAA"}}]}],"x_unknown":{"deep":[1,{"a":null}]}}`
	out, err := provider.EditBody([]byte(in), map[string]any{"anthropic_version": "v"}, "model", "stream")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"anthropic_version":"v","messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"AAAA"}}]}],"x_unknown":{"deep":[1,{"a":null}]}}`; string(out) != want {
		t.Fatalf("%s", out)
	}
	for _, bad := range []string{"", "null", "[1]", `{"a":1} {"b":2}`, "{"} {
		if _, err := provider.EditBody([]byte(bad), nil); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestSSEReader(t *testing.T) {
	stream := ": comment\n\n" +
		"event: message_start\ndata: {\"type\":\"message_start\"}\n\n" +
		"data: {\"type\":\"content_block_delta\",\n" + // no event line, data on two lines
		"data: \"delta\":{\"text\":\"a\"}}\r\n\r\n" +
		"event: content_block_delta\ndata: {not json\n\n" + // passed over
		"event: message_stop\ndata: {\"type\":\"message_stop\"}" // no blank line at the end
	r := provider.NewSSEReader(io.NopCloser(strings.NewReader(stream)))
	var got []string
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Type)
	}
	if strings.Join(got, ",") != "message_start,content_block_delta,message_stop" {
		t.Fatalf("%v", got)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the end: %v", err)
	}

	// Closed before message_stop: a cut stream once an event was read, a server error before.
	for body, want := range map[string]health.Outcome{
		"event: message_start\ndata: {\"type\":\"message_start\"}\n\n": health.OutcomeStreamCut,
		"": health.OutcomeServerError,
	} {
		r := provider.NewSSEReader(io.NopCloser(strings.NewReader(body)))
		var err error
		for i := 0; i < 10 && err == nil; i++ {
			_, err = r.Next()
		}
		var f *provider.Failure
		if !errors.As(err, &f) || f.Outcome != want {
			t.Errorf("%q: %v, want %s", body, err, want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "3": 3 * time.Second, "0.5": 500 * time.Millisecond, "-1": 0, "soon": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Minute).Format(http.TimeFormat):     0,
		" 7 ": 7 * time.Second, "90000": provider.MaxRetryAfter, "1e300": provider.MaxRetryAfter, "NaN": 0,
		now.Add(48 * time.Hour).Format(http.TimeFormat): provider.MaxRetryAfter,
	} {
		if got := provider.ParseRetryAfter(v, now); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}

func TestSummarize(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes: cut at a character, not inside one
	for in, want := range map[string]string{
		"  model\noverloaded\t":                   "model overloaded",
		`{"error":{"message":"Invalid API key"}}`: "Invalid API key",
		`{"error":{"code":"x"}}`:                  `{"error":{"code":"x"}}`,
		long:                                      strings.Repeat("é", 100) + "…",
		strings.Repeat("a", 201):                  strings.Repeat("a", 200) + "…",
	} {
		if got := provider.Summarize(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
