package pii

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Detector names, as in RoutingPolicy spec.pii.detectors.
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

// Builtin lists the built-in detectors, in the order the API documents them.
var Builtin = []string{Email, Phone, Card, IBAN, KZIIN, RUINN, RUSNILS, IPv4}

// Custom is a policy's own detector: a regular expression (RE2 syntax) whose every non-empty match
// is masked. Name is lower-case [a-z0-9-], starts and ends with a letter or digit, and must not be
// a builtin name; its placeholders are the upper-cased name with '-' as '_' ("employee-id":
// [EMPLOYEE_ID_1]). Custom matches get no boundary or checksum checks: the pattern is taken as
// written.
type Custom struct {
	Name    string
	Pattern string
}

// Config selects the detectors of one policy.
type Config struct {
	// Detectors are builtin detector names; empty: all builtin.
	Detectors []string
	// Custom detectors are always on, in addition to Detectors.
	Custom []Custom
}

// Scanner finds PII in text for one compiled Config. It is immutable and safe for concurrent use;
// build it once per config load. A nil *Scanner means PII handling is off: Find returns nil and
// its sessions mask nothing.
type Scanner struct {
	on       [numBuiltin]bool
	numeric  bool // any of the detectors the byte scan runs
	names    []string
	types    map[string]string // detector name -> placeholder type
	custom   []customDetector
	priority map[string]int
}

type customDetector struct {
	name string
	re   *regexp.Regexp
}

var customName = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$`)

// Compile validates cfg and returns its Scanner. An unknown detector name, a name listed twice, an
// invalid custom name, a custom name that repeats another, and a pattern that does not compile or
// matches the empty string are errors that name the detector.
func Compile(cfg Config) (*Scanner, error) {
	s := &Scanner{types: map[string]string{}, priority: map[string]int{}}
	names := cfg.Detectors
	if len(names) == 0 {
		names = Builtin
	}
	seen := map[string]bool{}
	for _, name := range names {
		idx := slices.Index(builtinNames[:], name)
		if idx < 0 {
			return nil, fmt.Errorf("pii: unknown detector %q", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("pii: detector %q listed twice", name)
		}
		seen[name] = true
		s.on[idx] = true
		if idx != dEmail {
			s.numeric = true
		}
	}
	for _, name := range Builtin {
		if seen[name] {
			s.names = append(s.names, name)
		}
	}
	for i, name := range builtinNames {
		s.types[name] = placeholderType(name)
		s.priority[name] = i
	}
	for i, c := range cfg.Custom {
		switch {
		case !customName.MatchString(c.Name):
			return nil, fmt.Errorf("pii: custom detector %q: name must be lower-case letters, digits and inner '-'", c.Name)
		case slices.Contains(builtinNames[:], c.Name):
			return nil, fmt.Errorf("pii: custom detector %q: name is a builtin detector", c.Name)
		case seen[c.Name]:
			return nil, fmt.Errorf("pii: custom detector %q defined twice", c.Name)
		case c.Pattern == "":
			return nil, fmt.Errorf("pii: custom detector %q: empty pattern", c.Name)
		}
		re, err := regexp.Compile(c.Pattern)
		if err != nil {
			return nil, fmt.Errorf("pii: custom detector %q: invalid pattern: %w", c.Name, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("pii: custom detector %q: pattern matches the empty string", c.Name)
		}
		typ := placeholderType(c.Name)
		for other, t := range s.types {
			if t == typ && other != c.Name {
				return nil, fmt.Errorf("pii: custom detector %q: placeholder type %s is also %q's", c.Name, typ, other)
			}
		}
		seen[c.Name] = true
		s.names = append(s.names, c.Name)
		s.types[c.Name] = typ
		s.priority[c.Name] = int(numBuiltin) + i
		s.custom = append(s.custom, customDetector{name: c.Name, re: re})
	}
	return s, nil
}

// placeholderType is a detector's placeholder stem: "kz-iin" -> "KZ_IIN".
func placeholderType(name string) string {
	return strings.ReplaceAll(strings.ToUpper(name), "-", "_")
}

// Off reports whether s does nothing (it is nil).
func (s *Scanner) Off() bool { return s == nil }

// Detectors returns the enabled detector names: builtin ones in Builtin order, then custom ones
// in config order.
func (s *Scanner) Detectors() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.names)
}

// Match is one value found: text[Start:End] (byte offsets), and the detector that found it.
type Match struct {
	Start, End int
	Detector   string
}

// Find returns the PII in text: non-overlapping matches in order. Where candidates overlap, the
// one that starts first wins, then the longer one, then builtin detectors in the order card, iban,
// kz-iin, ru-inn, ru-snils, ipv4, phone, email, then custom ones in config order. Text with
// nothing to find costs no allocation.
func (s *Scanner) Find(text string) []Match {
	if s == nil || text == "" {
		return nil
	}
	var out []Match
	if s.numeric {
		out = s.scan(out, text)
	}
	if s.on[dEmail] && strings.IndexByte(text, '@') >= 0 {
		n := len(out)
		out = findEmails(out, text)
		if n > 0 && len(out) > n {
			out = s.resolve(out)
		}
	}
	for _, c := range s.custom {
		n := len(out)
		for _, loc := range c.re.FindAllStringIndex(text, -1) {
			if loc[1] > loc[0] {
				out = append(out, Match{Start: loc[0], End: loc[1], Detector: c.name})
			}
		}
		if n > 0 && len(out) > n {
			out = s.resolve(out)
		}
	}
	return out
}

// resolve sorts matches and drops the ones that overlap an earlier winner (see Find).
func (s *Scanner) resolve(ms []Match) []Match {
	slices.SortFunc(ms, func(a, b Match) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(b.End, a.End),
			cmp.Compare(s.priority[a.Detector], s.priority[b.Detector]))
	})
	out := ms[:0]
	end := 0
	for _, m := range ms {
		if m.Start >= end {
			out = append(out, m)
			end = m.End
		}
	}
	return out
}

// scan runs the numeric detectors and IBAN in one pass: they are tried only where a token can
// start (a digit after a non-digit, '+' or '(' before a digit, an upper-case letter after a
// non-letter), so prose costs one byte comparison per byte.
func (s *Scanner) scan(out []Match, text string) []Match {
	for i := 0; i < len(text); {
		c := text[i]
		if !tokenStart[c] {
			i++
			continue
		}
		end, det := -1, -1
		switch {
		case isDigit(c):
			if i == 0 || !isDigit(text[i-1]) {
				if j, ok := worthTrying(text, i); ok {
					end, det = s.numericAt(text, i)
				} else {
					i = j
					continue
				}
			}
		case c == '+' || c == '(':
			if s.on[dPhone] && i+1 < len(text) && isDigit(text[i+1]) {
				if end = matchPhone(text, i); end >= 0 {
					det = dPhone
				}
			}
		case c >= 'A' && c <= 'Z':
			if s.on[dIBAN] && i+3 < len(text) && text[i+1] >= 'A' && text[i+1] <= 'Z' && isDigit(text[i+2]) {
				if end = matchIBAN(text, i); end >= 0 {
					det = dIBAN
				}
			}
		}
		if det < 0 {
			i++
			continue
		}
		out = append(out, Match{Start: i, End: end, Detector: builtinNames[det]})
		i = end
	}
	return out
}

// tokenStart marks the bytes scan looks at twice.
var tokenStart = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	t['+'], t['('] = true, true
	return t
}()

// worthTrying reports whether a numeric detector could match the digit run at i; if not, it
// returns the run's end. None matches after a letter, and every one needs ten digits in one run
// or a second group: a lone shorter number ("2024", "20%", "15:00") is skipped without parsing.
func worthTrying(text string, i int) (int, bool) {
	j := i
	for j < len(text) && isDigit(text[j]) {
		j++
	}
	if i > 0 {
		if r, _ := utf8.DecodeLastRuneInString(text[:i]); isWord(r) {
			return j, false // "v1.2.3", "sha256": startOK refuses them all
		}
	}
	if j-i >= 10 || j+1 >= len(text) {
		return j, j-i >= 10
	}
	switch c, n := text[j], text[j+1]; c {
	case ' ', '-', '.', ')':
		return j, isDigit(n) || n == '('
	case '(':
		return j, isDigit(n)
	}
	return j, false
}

// numericAt tries the numeric detectors at i (a digit that starts a run) and returns the longest
// match, ties going to the earlier detector (see Find), or (-1, -1).
func (s *Scanner) numericAt(text string, i int) (end, det int) {
	end, det = -1, -1
	try := func(d int, e int) {
		if e > end {
			end, det = e, d
		}
	}
	var g groups
	if s.on[dCard] || s.on[dRUSNILS] {
		g = readGroups(text, i, " -")
	}
	if s.on[dCard] {
		try(dCard, matchCard(text, i, &g))
	}
	if s.on[dKZIIN] || s.on[dRUINN] {
		if j := bareRun(text, i); j-i == 10 || j-i == 12 {
			var buf [12]byte
			d := append(buf[:0], text[i:j]...)
			innKW, iinKW := keywordBefore(text, i, innKeywords), keywordBefore(text, i, iinKeywords)
			kz := s.on[dKZIIN] && j-i == 12 && kzIIN(d)
			// A ten-digit INN needs its keyword; a twelve-digit one is not tried where the text
			// calls the number an IIN or BIN (and not an INN): one mistyped IIN in a hundred
			// passes the INN check digits.
			ru := s.on[dRUINN] && (j-i == 12 && (innKW || !iinKW) || j-i == 10 && innKW) && ruINN(d)
			switch {
			case kz && ru:
				// Both checksums pass (about one valid IIN in a hundred): the keyword decides,
				// else the IIN, whose date structure is the stricter check.
				if innKW && !iinKW {
					try(dRUINN, j)
				} else {
					try(dKZIIN, j)
				}
			case kz:
				try(dKZIIN, j)
			case ru:
				try(dRUINN, j)
			}
		}
	}
	if s.on[dRUSNILS] {
		try(dRUSNILS, matchSNILS(text, i, &g))
	}
	if s.on[dPhone] {
		try(dPhone, matchPhone(text, i))
	}
	if s.on[dIPv4] {
		try(dIPv4, matchIPv4(text, i))
	}
	return end, det
}
