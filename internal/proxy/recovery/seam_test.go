package recovery

import (
	"strings"
	"testing"
)

// TestSeam: what the client sees of a continuation at the seam, for what real providers do
// there. sent is what the client had; trim is an Anthropic-format target (no trailing whitespace
// in the prefill); pieces are the continuation's text deltas; want is the client's whole text, or
// "" with fail when the continuation must be refused.
func TestSeam(t *testing.T) {
	for _, c := range []struct {
		name       string
		sent       string
		trim       bool
		wantPrefix string // the prefill sent upstream
		pieces     []string
		want       string
		fail       bool
	}{
		{"after a word", "Hello", false, "Hello", []string{" world"}, "Hello world", false},
		{"mid-word", "Hel", false, "Hel", []string{"lo", " world"}, "Hello world", false},
		{"trailing space kept in the prefill, not re-emitted", "Hello ", false, "Hello ", []string{"world"}, "Hello world", false},
		{"trailing space re-emitted by the server", "Hello ", false, "Hello ", []string{" world"}, "Hello world", false},
		{"trailing space trimmed for Anthropic, written again", "Hello ", true, "Hello", []string{" world"}, "Hello world", false},
		{"trailing newlines trimmed, written again in pieces", "Title:\n\n", true, "Title:", []string{"\n", "\nBody"}, "Title:\n\nBody", false},
		{"trailing newlines trimmed, only one written again", "Title:\n\n", true, "Title:", []string{"\nBody"}, "Title:\n\nBody", false},
		{"a character split across the break", "ab\xe4\xb8", false, "ab", []string{"\xe4\xb8\xad", "文"}, "ab中文", false},
		{"a character split, its bytes in separate pieces", "ab\xe4", true, "ab", []string{"\xe4", "\xb8\xad!"}, "ab中!", false},
		{"space then a split character", "a \xe4\xb8", true, "a", []string{" ", "\xe4\xb8\xad"}, "a 中", false},
		{"a split character continued by another: refused", "ab\xe4\xb8", false, "ab", []string{"\xe5\xa5\xbd"}, "", true},
		{"four-byte character split after three bytes", "x\xf0\x9f\x98", false, "x", []string{"\xf0\x9f\x98\x80"}, "x😀", false},
		{"a complete multi-byte character at the end", "中", false, "中", []string{"文"}, "中文", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			prefill, s := PrefillFor([]byte(c.sent), c.trim)
			if string(prefill) != c.wantPrefix {
				t.Fatalf("prefill = %q, want %q", prefill, c.wantPrefix)
			}
			got := c.sent
			for _, p := range c.pieces {
				out, ok := s.feed([]byte(p))
				if !ok {
					if !c.fail {
						t.Fatalf("seam refused %q", p)
					}
					return
				}
				got += string(out)
			}
			if c.fail {
				t.Fatalf("seam accepted a continuation that departs from the text sent: %q", got)
			}
			if got != c.want {
				t.Fatalf("client text = %q, want %q", got, c.want)
			}
		})
	}
}

// TestSeamRestart: a "prefill-capable" model that ignored the prefill and began the answer again
// is spliced, not relayed twice; a continuation that only begins like the text sent is relayed.
func TestSeamRestart(t *testing.T) {
	for _, c := range []struct {
		sent   string
		pieces []string
		want   string
	}{
		{"Hello from", []string{"Hello", " from", " vertex"}, "Hello from vertex"},
		{"Hello from", []string{"Hello from vertex"}, "Hello from vertex"},
		{"Hello from", []string{"Hel", "lo there"}, "Hello fromHello there"},
		{"Hello from", []string{"", " the", " other side"}, "Hello from the other side"},
		{"ha", []string{"ha", "!"}, "haha!"}, // too short to tell a restart from a continuation
	} {
		_, s := PrefillFor([]byte(c.sent), false)
		got := c.sent
		for _, p := range c.pieces {
			out, ok := s.feed([]byte(p))
			if !ok {
				t.Fatalf("%q: seam refused %q", c.sent, p)
			}
			got += string(out)
		}
		out, ok := s.end()
		if !ok {
			t.Fatalf("%q: seam refused the end", c.sent)
		}
		if got += string(out); got != c.want {
			t.Errorf("sent %q, continuation %q: client text %q, want %q", c.sent, c.pieces, got, c.want)
		}
	}
	// Held text that turns out to be the whole continuation goes out at its end.
	_, s := PrefillFor([]byte("Hello from"), false)
	if out, _ := s.feed([]byte("Hello")); len(out) != 0 {
		t.Fatalf("held text relayed early: %q", out)
	}
	if out, ok := s.end(); !ok || string(out) != "Hello" {
		t.Fatalf("end = %q, %v; want the held \"Hello\"", out, ok)
	}
}

// TestSpliceSeam: a regenerated answer is relayed only after it has repeated every byte sent.
func TestSpliceSeam(t *testing.T) {
	s := SpliceSeam([]byte("Hello wo"))
	for _, p := range []string{"Hel", "lo", " w"} {
		if out, ok := s.feed([]byte(p)); !ok || len(out) != 0 {
			t.Fatalf("feed(%q) = %q, %v: want nothing relayed yet", p, out, ok)
		}
	}
	if out, ok := s.feed([]byte("orld")); !ok || string(out) != "rld" {
		t.Fatalf("feed = %q, %v; want \"rld\"", out, ok)
	}
	if s.open() {
		t.Fatal("seam still open after the text sent was repeated")
	}
	for _, regen := range []string{"Hello world"[:5] + "  wo", "Hello Wo", "Hi"} {
		s := SpliceSeam([]byte("Hello wo"))
		if _, ok := s.feed([]byte(regen)); ok && !s.open() {
			t.Fatalf("regeneration %q spliced onto %q", regen, "Hello wo")
		}
	}
	s = SpliceSeam([]byte("Hello "))
	if _, ok := s.feed([]byte("Hello")); !ok || !s.open() {
		t.Fatal("a regeneration that stops short must leave the seam open (no whitespace leniency when splicing)")
	}
}

// TestRawJSONString: the exact bytes of a JSON string, invalid UTF-8 kept, and back.
func TestRawJSONString(t *testing.T) {
	for _, c := range []struct{ lit, want string }{
		{`"plain"`, "plain"},
		{`"a\nb\t\"q\"\\ \/"`, "a\nb\t\"q\"\\ /"},
		{`"\u00e9\u4e2d"`, "é中"},
		{`"\ud83d\ude00"`, "😀"},
		{"\"raw \xe4\xb8\"", "raw \xe4\xb8"},
	} {
		got, ok := RawJSONString([]byte(c.lit))
		if !ok || string(got) != c.want {
			t.Errorf("rawJSONString(%s) = %q, %v; want %q", c.lit, got, ok, c.want)
		}
		back, ok := RawJSONString(AppendRawJSONString(nil, got))
		if !ok || string(back) != c.want {
			t.Errorf("round trip of %q = %q", c.want, back)
		}
	}
	for _, bad := range []string{`plain`, `"\x"`, `"\u12"`, `"unterminated\"`} {
		if _, ok := RawJSONString([]byte(bad)); ok {
			t.Errorf("rawJSONString(%s) accepted", bad)
		}
	}
	if !strings.Contains(string(AppendRawJSONString(nil, []byte{1})), `\u0001`) {
		t.Error("control characters must be escaped")
	}
}

// ForEachData reads events as the SSE format has them: data lines joined by newlines, the event
// type, comments left out; the input is never written to (one data line is passed as a slice
// of it).
func TestForEachData(t *testing.T) {
	in := "event: a\ndata: one\n\n: comment\n\ndata: x\ndata: y\n\ndata:\n\ndata: {\"k\":1}\r\n\r\n"
	b := []byte(in)
	var got []string
	ForEachData(b, func(typ string, data []byte) { got = append(got, typ+"|"+string(data)) })
	want := []string{"a|one", "|x\ny", `|{"k":1}`}
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Fatalf("events %q, want %q", got, want)
	}
	if string(b) != in {
		t.Fatalf("the input was written to: %q", b)
	}
}
