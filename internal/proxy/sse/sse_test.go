package sse

import (
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
)

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
			Usage *Usage `json:"usage"`
		}
		var want *Usage
		if json.Unmarshal(data, &refAnswer) == nil {
			want = refAnswer.Usage
		}
		if u, ok := AnswerUsage(data); ok != (want != nil) || ok && u != *want {
			t.Fatalf("%q: AnswerUsage %+v %v, want %+v", data, u, ok, want)
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
	r := NewReader(strings.NewReader(stream))
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
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if string(ev.Raw) != w.raw || ev.Done != w.done || ev.Finished != w.finished || ev.Malformed != w.malformed {
			t.Fatalf("event %d: got %.80q done=%v finished=%v malformed=%v, want %.80q %+v", i, ev.Raw, ev.Done, ev.Finished, ev.Malformed, w.raw, w)
		}
		if i == 3 && (ev.Usage == nil || ev.Usage.InputTokens != 2 || ev.Usage.OutputTokens != 3) {
			t.Fatalf("event %d: usage %+v", i, ev.Usage)
		}
	}
	if _, err := r.Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("partial last event: err %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestEventBuffered(t *testing.T) {
	for in, want := range map[string]bool{
		"":                            false,
		"\n\n\r\n":                    false, // blank lines only
		"data: x":                     false,
		"data: x\n":                   false,
		"data: x\n\r":                 false,
		"data: x\n\n":                 true,
		"data: x\r\n\r\n":             true,
		"\n\ndata: x\ndata: y\n\n":    true,
		": ping\n\n":                  true, // a comment is an event for the reader
		"event: a\ndata: {\"b\":1}\n": false,
	} {
		sr := NewReader(strings.NewReader(in))
		_, _ = sr.r.Peek(len(in)) // fill the buffer as a network read would
		if got := sr.EventBuffered(); got != want {
			t.Errorf("eventBuffered(%q) = %v, want %v", in, got, want)
		}
	}
}
