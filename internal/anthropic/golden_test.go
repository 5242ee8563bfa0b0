package anthropic

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite golden files")

// pretty indents a JSON document for a readable golden file.
func pretty(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return append(out.Bytes(), '\n')
}

// eachCase runs fn on every testdata/dir/*ext and compares its output with the .golden file
// beside it (created with -update).
func eachCase(t *testing.T, dir, ext string, fn func(t *testing.T, in []byte) []byte) {
	eachCaseAs(t, dir, ext, "", fn)
}

// eachCaseAs is eachCase with the golden files named <case><variant>.golden<ext>.
func eachCaseAs(t *testing.T, dir, ext, variant string, fn func(t *testing.T, in []byte) []byte) {
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases in testdata/%s: %v", dir, err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ext)
		if strings.Contains(name, ".golden") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			testutil.Golden(t, *update, filepath.Join(dir, name+variant+".golden"+ext), fn(t, in))
		})
	}
}

// sseData splits an event stream into its events' data.
func sseData(b []byte) [][]byte {
	var out [][]byte
	for _, ev := range bytes.Split(b, []byte("\n\n")) {
		for _, line := range bytes.Split(ev, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				out = append(out, d)
			}
		}
	}
	return out
}

func TestGoldenChatRequest(t *testing.T) {
	eachCase(t, "chat_request", ".json", func(t *testing.T, in []byte) []byte {
		r, err := MessagesFromChat(in, Target{Provider: "anthropic", Model: "claude-sonnet-4-5-20250929", MaxTokens: 1024})
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := json.Marshal(map[string]any{"stream": r.Stream, "includeUsage": r.IncludeUsage, "needsVision": r.NeedsVision, "needsTools": r.NeedsTools})
		return append(pretty(t, meta), pretty(t, r.Body)...)
	})
}

func TestGoldenMessageResponse(t *testing.T) {
	eachCase(t, "message_response", ".json", func(t *testing.T, in []byte) []byte {
		out, u, err := ChatFromMessage(in, 1700000000, nil)
		if err != nil {
			t.Fatal(err)
		}
		if u == nil || u.Prompt == 0 {
			t.Errorf("usage not read: %+v", u)
		}
		return pretty(t, out)
	})
}

func TestGoldenMessageStream(t *testing.T) {
	for _, usage := range []bool{false, true} {
		variant := ""
		if usage {
			variant = ".include_usage"
		}
		eachCaseAs(t, "message_stream", ".sse", variant, func(t *testing.T, in []byte) []byte {
			s := NewChatStream(usage, 1700000000, nil)
			var out []byte
			finished := false
			for _, d := range sseData(in) {
				o, err := s.Event(d)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, o.Data...)
				finished = finished || o.Finished
			}
			if !finished {
				t.Error("the stream never finished")
			}
			return out
		})
	}
}

func TestGoldenMessagesRequest(t *testing.T) {
	eachCase(t, "messages_request", ".json", func(t *testing.T, in []byte) []byte {
		out, err := ChatFromMessagesRequest(in, "gpt-4o-2024-08-06")
		if err != nil {
			t.Fatal(err)
		}
		return pretty(t, out)
	})
}

func TestGoldenChatResponse(t *testing.T) {
	eachCase(t, "chat_response", ".json", func(t *testing.T, in []byte) []byte {
		out, _, err := MessageFromChat(in)
		if err != nil {
			t.Fatal(err)
		}
		return pretty(t, out)
	})
}

func TestGoldenChatStream(t *testing.T) {
	eachCase(t, "chat_stream", ".sse", func(t *testing.T, in []byte) []byte {
		s := NewMessageStream()
		var out []byte
		for _, d := range sseData(in) {
			o, err := s.Event(d)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, o.Data...)
		}
		if again := s.End(); len(again) > 0 {
			t.Errorf("End after [DONE] wrote again: %s", again)
		}
		return out
	})
}

// TestGoldenErrors: each error class of one API, as the other API's client sees it.
func TestGoldenErrors(t *testing.T) {
	eachCase(t, "errors", ".json", func(t *testing.T, in []byte) []byte {
		var c struct {
			From   string          `json:"from"`
			Status int             `json:"status"`
			Body   json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(in, &c); err != nil {
			t.Fatal(err)
		}
		switch c.From {
		case "anthropic":
			return pretty(t, OpenAIErrorFromMessages(c.Status, c.Body))
		case "openai":
			return pretty(t, MessagesErrorFromOpenAI(c.Status, c.Body))
		}
		t.Fatalf("unknown from %q", c.From)
		return nil
	})
}
