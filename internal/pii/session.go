package pii

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Session masks and restores the text of one request. Its placeholders are stable within it: the
// same value found by the same detector gets the same placeholder in every message, role, tool
// argument and tool result. Values are compared exactly as written: "+7 701 234 56 78" and
// "87012345678" are two values.
//
// A Session is safe for concurrent use. Mask everything a request sends before restoring
// anything of its answer: a StreamRestorer decides what to hold back from the placeholders
// issued so far.
type Session struct {
	s *Scanner

	mu       sync.Mutex
	byValue  map[valueKey]string // (detector, value) -> placeholder
	original map[string]string   // placeholder -> value
	issued   []string            // placeholders, in the order they were issued
	last     map[string]int      // detector -> n of its last placeholder
	counts   map[string]int      // detector -> occurrences masked
	maxLen   int                 // the longest placeholder, in bytes
}

type valueKey struct{ detector, value string }

// NewSession starts a request's session. On a nil Scanner it returns a session that masks nothing.
func (s *Scanner) NewSession() *Session {
	return &Session{s: s}
}

// Mask returns text with each value Find returns replaced by its placeholder, [TYPE_n]: TYPE is
// the detector's name upper-cased with '-' as '_' (EMAIL, PHONE, CARD, IBAN, KZ_IIN, RU_INN,
// RU_SNILS, IPV4, custom names) and n counts the distinct values of that detector from 1.
//
// A placeholder that the caller's text already contains literally is issued anyway, and Restore
// turns both into the value; such text is the caller's own.
func (ss *Session) Mask(text string) string {
	if ss == nil {
		return text
	}
	ms := ss.s.Find(text)
	if len(ms) == 0 {
		return text
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.byValue == nil {
		ss.byValue = map[valueKey]string{}
		ss.original = map[string]string{}
		ss.last = map[string]int{}
		ss.counts = map[string]int{}
	}
	var b strings.Builder
	b.Grow(len(text) + 8*len(ms))
	prev := 0
	for _, m := range ms {
		b.WriteString(text[prev:m.Start])
		b.WriteString(ss.placeholder(m.Detector, text[m.Start:m.End]))
		ss.counts[m.Detector]++
		prev = m.End
	}
	b.WriteString(text[prev:])
	return b.String()
}

// placeholder returns value's placeholder, issuing the detector's next one for a new value.
func (ss *Session) placeholder(detector, value string) string {
	k := valueKey{detector, value}
	if p, ok := ss.byValue[k]; ok {
		return p
	}
	ss.last[detector]++
	p := "[" + ss.s.types[detector] + "_" + strconv.Itoa(ss.last[detector]) + "]"
	ss.byValue[k] = p
	ss.original[p] = value
	ss.issued = append(ss.issued, p)
	ss.maxLen = max(ss.maxLen, len(p))
	return p
}

// Counts returns, per detector, how many occurrences Mask replaced (a value found twice counts
// twice). It never holds the values themselves.
func (ss *Session) Counts() map[string]int {
	if ss == nil {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return maps.Clone(ss.counts)
}

// Found returns the names of the detectors that found something, sorted.
func (ss *Session) Found() []string {
	if ss == nil {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return slices.Sorted(maps.Keys(ss.counts))
}

// Restore returns text with every placeholder this session issued replaced by its original value.
// Anything else is left as it is: a placeholder it never issued ([EMAIL_9]), a mangled one
// ([EMAIL 1], [email_1]), brackets of any other kind.
func (ss *Session) Restore(text string) string {
	if ss == nil {
		return text
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.original) == 0 || strings.IndexByte(text, '[') < 0 {
		return text
	}
	var b strings.Builder
	ss.restore(&b, text, true)
	return b.String()
}

// restore writes text to b with issued placeholders replaced and returns how many bytes of text it
// consumed. Unless final, it stops before a trailing '[' that begins a proper prefix of an issued
// placeholder ("[EM", "[EMAIL_", "[EMAIL_1"), which more text could complete. Whole-text Restore
// and the stream restorer both use it, so where a stream is split never changes what it restores
// to: the decision at each '[' depends only on the next maxLen bytes, and is deferred while they
// are not all there and could still complete a placeholder. Callers hold ss.mu.
func (ss *Session) restore(b *strings.Builder, text string, final bool) int {
	prev, from := 0, 0
	for {
		k := strings.IndexByte(text[from:], '[')
		if k < 0 {
			break
		}
		at := from + k
		rest := text[at:]
		window := rest[:min(len(rest), ss.maxLen)]
		if j := strings.IndexByte(window, ']'); j >= 0 {
			if v, ok := ss.original[window[:j+1]]; ok {
				b.WriteString(text[prev:at])
				b.WriteString(v)
				prev, from = at+j+1, at+j+1
				continue
			}
		} else if !final && ss.isPrefix(rest) {
			b.WriteString(text[prev:at])
			return at
		}
		from = at + 1
	}
	b.WriteString(text[prev:])
	return len(text)
}

// isPrefix reports whether s is a proper prefix of an issued placeholder.
func (ss *Session) isPrefix(s string) bool {
	if len(s) >= ss.maxLen {
		return false
	}
	for _, p := range ss.issued {
		if len(s) < len(p) && p[:len(s)] == s {
			return true
		}
	}
	return false
}

// StreamRestorer restores a streamed answer piece by piece. It works on bytes and only ever holds
// back a trailing '[' and what follows it while that could still become an issued placeholder, so
// the concatenation of everything Write and Flush return is Restore of the concatenated input,
// wherever the stream was split. It splits no rune of its own: when every piece written is valid
// UTF-8, so is every piece returned. Splitting a rune between pieces is the caller's concern (the
// bytes pass through unchanged, but each returned piece is then not valid UTF-8 on its own).
//
// One StreamRestorer serves one stream, from one goroutine at a time.
type StreamRestorer struct {
	ss   *Session
	held string
}

// NewStreamRestorer starts restoring one streamed answer (one choice of it).
func (ss *Session) NewStreamRestorer() *StreamRestorer {
	return &StreamRestorer{ss: ss}
}

// Write takes the next piece of streamed text and returns what can be emitted now, restored; a
// possible placeholder prefix at its end is held back until it completes or cannot be one.
func (r *StreamRestorer) Write(chunk string) string {
	if r == nil || r.ss == nil {
		return chunk
	}
	ss := r.ss
	ss.mu.Lock()
	defer ss.mu.Unlock()
	// Nothing is held while the session has no placeholders: isPrefix has nothing to match.
	if len(ss.original) == 0 || r.held == "" && strings.IndexByte(chunk, '[') < 0 {
		return chunk
	}
	text := r.held + chunk
	var b strings.Builder
	n := ss.restore(&b, text, false)
	r.held = text[n:]
	return b.String()
}

// Flush returns whatever is still held back at the end of the stream: a proper prefix of a
// placeholder, which has no ']' and so restores to itself.
func (r *StreamRestorer) Flush() string {
	if r == nil {
		return ""
	}
	s := r.held
	r.held = ""
	return s
}
