// Package pii finds personal data in prompt text, masks it with placeholders and puts the
// originals back into answers.
//
// THIS FILE IS A STAND-IN, to be replaced by the real package (branch pii): it has the real
// package's API but detects only e-mail addresses (and custom regexps); the other builtin names
// are accepted and find nothing. Code outside this package must depend on the API only.
package pii

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Builtin detector names.
const (
	Email   = "email"
	Phone   = "phone"
	Card    = "card"
	IBAN    = "iban"
	KZIIN   = "kz-iin"
	RUINN   = "ru-inn"
	RUSNILS = "ru-snils"
	IPv4    = "ipv4"
)

// Builtin lists every builtin detector, in a fixed order.
var Builtin = []string{Email, Phone, Card, IBAN, KZIIN, RUINN, RUSNILS, IPv4}

// Custom is a detector defined by a regular expression (RE2).
type Custom struct{ Name, Pattern string }

// Config selects detectors.
type Config struct {
	Detectors []string // empty: all builtin
	Custom    []Custom
}

type detector struct {
	name string
	re   *regexp.Regexp // nil: a builtin this stand-in does not implement
}

// Scanner is a compiled Config. It is safe for concurrent use.
type Scanner struct{ detectors []detector }

var emailRE = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)

// Compile checks and compiles cfg; the error names the bad detector or regexp.
func Compile(cfg Config) (*Scanner, error) {
	names := cfg.Detectors
	if len(names) == 0 {
		names = Builtin
	}
	s := &Scanner{}
	for _, n := range names {
		known := false
		for _, b := range Builtin {
			known = known || b == n
		}
		if !known {
			return nil, fmt.Errorf("unknown detector %q", n)
		}
		d := detector{name: n}
		if n == Email {
			d.re = emailRE
		}
		s.detectors = append(s.detectors, d)
	}
	for _, c := range cfg.Custom {
		if c.Name == "" {
			return nil, fmt.Errorf("custom detector: empty name")
		}
		re, err := regexp.Compile(c.Pattern)
		if err != nil {
			return nil, fmt.Errorf("custom detector %q: invalid pattern: %v", c.Name, err)
		}
		s.detectors = append(s.detectors, detector{name: c.Name, re: re})
	}
	return s, nil
}

// NewSession starts one request's masking: placeholders are stable within it.
func (s *Scanner) NewSession() *Session {
	return &Session{s: s, byValue: map[string]string{}, byHolder: map[string]string{}, counts: map[string]int{}, next: map[string]int{}}
}

// Session masks one request and restores its answer.
type Session struct {
	s        *Scanner
	byValue  map[string]string // original -> placeholder
	byHolder map[string]string // placeholder -> original
	counts   map[string]int
	next     map[string]int
	longest  int
}

type match struct {
	start, end int
	det        string
}

// Mask replaces every value found with its placeholder ([EMAIL_1], ...).
func (ss *Session) Mask(text string) string {
	var ms []match
	for _, d := range ss.s.detectors {
		if d.re == nil {
			continue
		}
		for _, loc := range d.re.FindAllStringIndex(text, -1) {
			if loc[1] > loc[0] {
				ms = append(ms, match{loc[0], loc[1], d.name})
			}
		}
	}
	if len(ms) == 0 {
		return text
	}
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].start != ms[j].start {
			return ms[i].start < ms[j].start
		}
		return ms[i].end > ms[j].end
	})
	var b strings.Builder
	prev := 0
	for _, m := range ms {
		if m.start < prev {
			continue // overlaps a match already replaced
		}
		b.WriteString(text[prev:m.start])
		v := text[m.start:m.end]
		h, ok := ss.byValue[v]
		if !ok {
			ss.next[m.det]++
			h = fmt.Sprintf("[%s_%d]", strings.ToUpper(strings.ReplaceAll(m.det, "-", "_")), ss.next[m.det])
			ss.byValue[v], ss.byHolder[h] = h, v
			ss.longest = max(ss.longest, len(h))
		}
		ss.counts[m.det]++
		b.WriteString(h)
		prev = m.end
	}
	b.WriteString(text[prev:])
	return b.String()
}

// Counts returns, per detector, how many values were masked.
func (ss *Session) Counts() map[string]int {
	out := make(map[string]int, len(ss.counts))
	for k, v := range ss.counts {
		out[k] = v
	}
	return out
}

// Found returns the names of the detectors that found something, sorted.
func (ss *Session) Found() []string {
	out := make([]string, 0, len(ss.counts))
	for k := range ss.counts {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Restore puts the originals back for this session's placeholders (and no others).
func (ss *Session) Restore(text string) string {
	if len(ss.byHolder) == 0 || !strings.Contains(text, "[") {
		return text
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(text, '[')
		if i < 0 {
			break
		}
		j := strings.IndexByte(text[i:], ']')
		if j < 0 {
			break
		}
		if v, ok := ss.byHolder[text[i:i+j+1]]; ok {
			b.WriteString(text[:i])
			b.WriteString(v)
			text = text[i+j+1:]
			continue
		}
		b.WriteString(text[:i+1])
		text = text[i+1:]
	}
	b.WriteString(text)
	return b.String()
}

// NewStreamRestorer restores a text that arrives in pieces.
func (ss *Session) NewStreamRestorer() *StreamRestorer { return &StreamRestorer{ss: ss} }

// StreamRestorer restores one stream of text pieces, holding back a piece's tail that may be the
// start of a placeholder until the next piece (or Flush) tells.
type StreamRestorer struct {
	ss   *Session
	held string
}

// Write returns the restored text that can be sent now.
func (r *StreamRestorer) Write(chunk string) string {
	buf := r.held + chunk
	r.held = ""
	if i := strings.LastIndexByte(buf, '['); i >= 0 && !strings.Contains(buf[i:], "]") && r.prefix(buf[i:]) {
		r.held = buf[i:]
		buf = buf[:i]
	}
	return r.ss.Restore(buf)
}

// Flush returns whatever is held back.
func (r *StreamRestorer) Flush() string {
	h := r.held
	r.held = ""
	return r.ss.Restore(h)
}

func (r *StreamRestorer) prefix(tail string) bool {
	if len(tail) >= r.ss.longest {
		return false
	}
	for h := range r.ss.byHolder {
		if strings.HasPrefix(h, tail) {
			return true
		}
	}
	return false
}
