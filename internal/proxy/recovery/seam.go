package recovery

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/switchyard-io/switchyard/internal/jsonraw"
)

// The seam is where a broken stream's answer meets the text that finishes it (recovery.go). It is
// decided here, as pure functions over the exact bytes the client received, so that what real
// providers do at a seam is table-tested without a server.

// PrefillFor splits the text sent to the client into the assistant prefill a continuation request
// carries and the seam the continuation's text must pass through.
//
//   - A multi-byte UTF-8 character cut by the break cannot go into a JSON prefill: its bytes
//     already sent are left out, and the continuation must begin with them (they are dropped
//     from it, and the rest of the character relayed).
//   - Anthropic's API refuses a final assistant message that ends in whitespace (trim): trailing
//     whitespace is left out of the prefill and the model writes it again.
//   - Servers that continue the exact prefill sometimes emit its trailing space or newline again.
//
// Either way the trailing whitespace is already on the client's screen: the continuation may
// repeat it (dropped) or not (nothing to drop), and the seam accepts both.
func PrefillFor(sent []byte, trim bool) (prefill []byte, s seam) {
	valid, tail := splitIncompleteRune(sent)
	body := bytes.TrimRight(valid, " \t\r\n")
	s = seam{maybe: valid[len(body):], must: tail}
	if len(sent) >= minRestart {
		s.restart = sent
	}
	if trim {
		return body, s
	}
	return valid, s
}

// SpliceSeam is the seam of a regenerated answer (no prefill): it must begin with every byte
// already sent, strictly, before anything more is relayed.
func SpliceSeam(sent []byte) seam { return seam{must: sent} }

// Seam filters the beginning of a continuation's text: maybe are bytes the client has that the
// continuation may or may not repeat (whitespace), must are bytes it has to repeat exactly. Once
// both are passed, everything goes through.
type seam struct {
	maybe []byte
	must  []byte
	// restart is the text sent, while the continuation may still be a model that ignored the
	// Prefill and began the answer again: its text is held (held) while it repeats restart, and
	// dropped if it repeats all of it, as a regeneration would be spliced.
	restart []byte
	held    []byte
}

// minRestart is the shortest text sent for which a continuation that repeats it is taken for a
// restarted answer: below it, a model may well continue "ha" with "ha!".
const minRestart = 8

// end is called when the continuation's answer ends: text held as a possible restart was not
// one, and goes through the seam. ok is false when the answer ends inside bytes the client has.
func (s *seam) end() (out []byte, ok bool) {
	if s.restart != nil {
		held := s.held
		s.restart, s.held = nil, nil
		if out, ok = s.feed(held); !ok {
			return nil, false
		}
	}
	return out, !s.open()
}

// feed takes the continuation's next text and returns what the client has yet to see. ok is
// false when the text departs from what the client has: nothing of it may be relayed.
func (s *seam) feed(text []byte) (out []byte, ok bool) {
	if s.restart != nil {
		want := s.restart[len(s.held):]
		n := 0
		for n < len(text) && n < len(want) && text[n] == want[n] {
			n++
		}
		switch {
		case n == len(want): // the whole answer again: drop it, relay what follows
			s.restart, s.held, s.maybe, s.must = nil, nil, nil, nil
			return text[n:], true
		case n == len(text): // still repeating it: hold
			s.held = append(s.held, text...)
			return nil, true
		}
		text = append(s.held, text...) // not a restart: the held text is the continuation's
		s.restart, s.held = nil, nil
	}
	for len(text) > 0 && (len(s.maybe) > 0 || len(s.must) > 0) {
		switch {
		case len(s.maybe) > 0 && text[0] == s.maybe[0]:
			s.maybe, text = s.maybe[1:], text[1:]
		case len(s.maybe) > 0:
			s.maybe = nil // not repeated: the client has it already
		case text[0] == s.must[0]:
			s.must, text = s.must[1:], text[1:]
		default:
			return nil, false
		}
	}
	return text, true
}

// open reports whether the continuation still owes bytes the client has (it may not end here).
func (s *seam) open() bool { return len(s.must) > 0 }

// splitIncompleteRune splits b before a trailing incomplete UTF-8 sequence (the first bytes of a
// character whose rest has not arrived). Invalid bytes elsewhere are left as they are.
func splitIncompleteRune(b []byte) (valid, tail []byte) {
	for n := 1; n <= utf8.UTFMax-1 && n <= len(b); n++ {
		c := b[len(b)-n]
		if c < 0x80 {
			return b, nil // ASCII: nothing is cut
		}
		if !utf8.RuneStart(c) {
			continue // a continuation byte: look further back for the start
		}
		want := 0
		switch {
		case c >= 0xF0:
			want = 4
		case c >= 0xE0:
			want = 3
		case c >= 0xC0:
			want = 2
		}
		if want > n {
			return b[:len(b)-n], b[len(b)-n:]
		}
		return b, nil
	}
	return b, nil
}

// RawJSONString decodes a JSON string literal (quotes included) keeping its bytes as they are:
// encoding/json would replace invalid UTF-8 (a character a provider split across two chunks)
// with U+FFFD, and the seam must know the exact bytes the client got.
func RawJSONString(lit []byte) ([]byte, bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return nil, false
	}
	lit = lit[1 : len(lit)-1]
	if bytes.IndexByte(lit, '\\') < 0 {
		return lit, true
	}
	out := make([]byte, 0, len(lit))
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		var ok bool
		if out, i, ok = appendEscape(out, lit, i+1); !ok {
			return nil, false
		}
	}
	return out, true
}

// appendEscape appends the character of the escape whose letter is lit[i] (just after its
// backslash); it returns the index of the escape's last byte.
func appendEscape(out, lit []byte, i int) ([]byte, int, bool) {
	if i >= len(lit) {
		return nil, i, false
	}
	switch lit[i] {
	case '"', '\\', '/':
		return append(out, lit[i]), i, true
	case 'b':
		return append(out, '\b'), i, true
	case 'f':
		return append(out, '\f'), i, true
	case 'n':
		return append(out, '\n'), i, true
	case 'r':
		return append(out, '\r'), i, true
	case 't':
		return append(out, '\t'), i, true
	case 'u':
		return appendUnicodeEscape(out, lit, i)
	}
	return nil, i, false
}

// appendUnicodeEscape appends the character of the \u escape whose 'u' is lit[i]: a surrogate
// pair is one character, a lone surrogate U+FFFD (as encoding/json decodes them).
func appendUnicodeEscape(out, lit []byte, i int) ([]byte, int, bool) {
	r, ok := hex4(lit[i+1:])
	if !ok {
		return nil, i, false
	}
	i += 4
	if utf16.IsSurrogate(r) {
		if i+6 < len(lit) && lit[i+1] == '\\' && lit[i+2] == 'u' {
			if r2, ok := hex4(lit[i+3:]); ok {
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					return utf8.AppendRune(out, d), i + 6, true
				}
			}
		}
		r = utf8.RuneError
	}
	return utf8.AppendRune(out, r), i, true
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// AppendRawJSONString writes b as a JSON string literal, keeping invalid UTF-8 bytes as they are
// (the counterpart of rawJSONString: the client gets the bytes the provider sent).
func AppendRawJSONString(dst, b []byte) []byte { return jsonraw.AppendString(dst, b) }
