package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
)

var parseSeeds = []string{
	`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"gpt-4o","stream":true}`, `{"model":"gpt-4o","stream":false}`, `{"model":"gpt-4o","stream":null}`,
	`{"model":"gpt-4o","stream":1}`, `{"model":"gpt-4o","stream":"true"}`,
	`{"model":""}`, `{"model":4}`, `{"model":null}`, `{"stream":"yes","model":"x"}`,
	`[]`, `null`, `"model"`, ``, `{`, `{}`, ` { "model" : "a" , "x" : [ 1 , { "model" : "inner" } ] } `,
	`{"model":"a\u0000b"}`, `{"model":"x","model":"y"}`, `{"model":4,"model":"y"}`, `{"model":"y","model":4}`,
	`{"mod\u0065l":"escaped-key"}`, `{"Model":"wrong-case"}`, `{"model":"caf\u00e9"}`, "{\"model\":\"caf\xc3\xa9\"}",
	"{\"model\":\"bad\xff\"}", `{"model":"<&>"}`, `{"model":"q\"uote"}`, `{"a":"}","model":"m","b":"\\"}`,
	"\xff\xfe{\"model\":\"x\"}", `{"model":"x"}garbage`, `{"model":"x",}`, `{"model":1e5}`,
}

// FuzzParseRequestMatchesFullDecode: the hot-path parser and rewrite agree with decoding the whole
// body into a map (the reference) on every input: same model, stream flag and error, and an
// upstream body that decodes to the same object but for the model.
func FuzzParseRequestMatchesFullDecode(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s), "upstream-model")
	}
	f.Add([]byte(`{"model":"gpt-4o"}`), "gpt-4o")
	f.Add([]byte(`{"model":"gpt-4o"}`), "needs \"escaping\" <&>")
	f.Fuzz(func(t *testing.T, body []byte, upstream string) {
		fast, ferr := parseRequest(body)
		ref, rerr := parseRequestSlow(bytes.TrimSpace(body))
		if len(bytes.TrimSpace(body)) == 0 {
			return
		}
		if (ferr == nil) != (rerr == nil) || (ferr != nil && ferr.Error() != rerr.Error()) {
			t.Fatalf("errors differ for %q: fast %v, reference %v", body, ferr, rerr)
		}
		if ferr != nil {
			return
		}
		if fast.Model != ref.Model || fast.Stream != ref.Stream {
			t.Fatalf("%q: fast (%q, %v), reference (%q, %v)", body, fast.Model, fast.Stream, ref.Model, ref.Stream)
		}
		got, err := fast.bodyFor(upstream)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref.bodyFor(upstream)
		if err != nil {
			t.Fatal(err)
		}
		var g, w map[string]any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("rewritten body %q is not JSON: %v", got, err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("rewritten bodies differ:\n fast %s\n  ref %s", got, want)
		}
	})
}

var eventSeeds = []string{
	`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`,
	`{"choices":[{"finish_reason":""}]}`, `{"choices":[null,{"finish_reason":"length"}]}`, `{"choices":null}`,
	`{"choices":[1]}`, `{"choices":{"finish_reason":"stop"}}`, `{"choices":[{"finish_reason":5}]}`,
	`{"choices":[{"finish_reason":"stop","finish_reason":null}]}`, `{"Choices":[{"FINISH_REASON":"stop"}]}`,
	`{"choices":[{"finish_reason":"stop"}],"choices":[{}]}`, `{"choices":[{"finish_reason":"stop"},{}],"choices":[{},{}]}`,
	`{"type":"response.completed","response":{"usage":{"input_tokens":5,"output_tokens":6}}}`,
	`{"type":"error","error":{"message":"x"}}`, `{"error":null}`, `{"error":"x"}`, `{"type":5}`, `{"type":null}`,
	`{"type":"a\u0062c"}`, `{"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2}}`, `{"usage":{"prompt_tokens":1.5}}`,
	`{"usage":null,"usage":{"prompt_tokens":1}}`, `{"response":null}`, `{"response":{"usage":"x"}}`, `{"\u0075sage":{"prompt_tokens":9}}`,
	`null`, `[]`, `"x"`, `5`, `{`, `{"choices":[{"finish_reason":"st`, `{} x`, ` {"choices": [ { "finish_reason" : "stop" } ] } `,
	"{\"\xc5\xbfchoices\":[]}", `{"uſage":{"prompt_tokens":2}}`,
}

// FuzzDecodeEventMatchesUnmarshal: the stream event and answer decoders agree with json.Unmarshal.
func FuzzDecodeEventMatchesUnmarshal(f *testing.F) {
	for _, s := range eventSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ref eventBody
		refErr := json.Unmarshal(data, &ref)
		refFinished := false
		for _, c := range ref.Choices {
			if c.FinishReason != nil && *c.FinishReason != "" {
				refFinished = true
			}
		}
		var refAnswer struct {
			Usage *usage `json:"usage"`
		}
		var want *usage
		if json.Unmarshal(data, &refAnswer) == nil {
			want = refAnswer.Usage
		}
		if u, ok := answerUsage(data); ok != (want != nil) || ok && u != *want {
			t.Fatalf("%q: answerUsage %+v %v, want %+v", data, u, ok, want)
		}

		got, finished, ok := decodeEvent(data)
		if ok != (refErr == nil) {
			t.Fatalf("%q: ok %v, json.Unmarshal error %v", data, ok, refErr)
		}
		if !ok {
			return
		}
		got.Choices, ref.Choices = nil, nil
		if finished != refFinished || !reflect.DeepEqual(got, ref) {
			t.Fatalf("%q: got finished %v %+v, want %v %+v", data, finished, got, refFinished, ref)
		}
	})
}

// TestSSEReaderReusesBuffers: events come out whole and in order while the reader reuses its
// buffers, also for a line longer than its 16 KiB buffer and for CRLF line ends.
func TestSSEReaderReusesBuffers(t *testing.T) {
	long := `{"choices":[{"delta":{"content":"` + strings.Repeat("x", 40<<10) + `"},"finish_reason":null}]}`
	stream := ": keep-alive\n\n" +
		"data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\r\n\r\n" +
		"data: " + long + "\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":2,\"output_tokens\":3}}}\n\n" +
		"data: not json\n\n" +
		"data: [DONE]\n\n" +
		"data: {\"partial"
	r := newSSEReader(strings.NewReader(stream))
	want := []struct {
		raw                       string
		done, finished, malformed bool
	}{
		{raw: ": keep-alive\n\n"},
		{raw: "data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n"},
		{raw: "data: " + long + "\n\n"},
		{raw: "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":2,\"output_tokens\":3}}}\n\n", finished: true},
		{raw: "data: not json\n\n", malformed: true},
		{raw: "data: [DONE]\n\n", done: true},
	}
	for i, w := range want {
		ev, err := r.next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if string(ev.raw) != w.raw || ev.done != w.done || ev.finished != w.finished || ev.malformed != w.malformed {
			t.Fatalf("event %d: got %.80q done=%v finished=%v malformed=%v, want %.80q %+v", i, ev.raw, ev.done, ev.finished, ev.malformed, w.raw, w)
		}
		if i == 3 && (ev.usage == nil || ev.usage.InputTokens != 2 || ev.usage.OutputTokens != 3) {
			t.Fatalf("event %d: usage %+v", i, ev.usage)
		}
	}
	if _, err := r.next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("partial last event: err %v, want io.ErrUnexpectedEOF", err)
	}
}
