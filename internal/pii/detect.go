package pii

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Builtin detector indexes, in priority order: when two candidates start at the same byte and are
// as long as each other, the lower index wins (checksum detectors before pattern-only ones).
const (
	dCard = iota
	dIBAN
	dKZIIN
	dRUINN
	dRUSNILS
	dIPv4
	dPhone
	dEmail
	numBuiltin
)

var builtinNames = [numBuiltin]string{
	dCard: Card, dIBAN: IBAN, dKZIIN: KZIIN, dRUINN: RUINN, dRUSNILS: RUSNILS,
	dPhone: Phone, dIPv4: IPv4, dEmail: Email,
}

// isWord reports whether r belongs to a word: a letter, a digit, a combining mark or '_'. A match
// never starts or ends next to one, so nothing is found inside a longer run of letters or digits.
func isWord(r rune) bool {
	if r < utf8.RuneSelf {
		return r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isDigitRune(r rune) bool { return r >= '0' && r <= '9' }

// connectors join the parts of one token ("ORD-1234", "v1.2", "id/77", "#12", "a_b"): a number
// attached by one to a word or a number is part of that token, not a value of its own.
const connectors = "-./\\_#"

// edge is what may stand next to a match: its own separators and the connectors it tolerates.
type edge struct {
	seps  string // the separators used inside the match (" ", "-", ...)
	allow string // marks that may follow the match whatever comes after them (see endOK)
}

// startOK reports whether a match may start at i: the rune before is not part of a word, is not a
// connector attached to a word ("ORD-4111..."), and is not a decimal/time/grouping mark or one of
// the match's own separators after a digit ("1,4111...", "12 4111 1111...": a longer number).
func startOK(text string, i int, e edge) bool {
	if i == 0 {
		return true
	}
	r, n := utf8.DecodeLastRuneInString(text[:i])
	if isWord(r) {
		return false
	}
	if i == n {
		return true
	}
	r2, _ := utf8.DecodeLastRuneInString(text[:i-n])
	switch {
	case strings.ContainsRune(connectors, r):
		return !isWord(r2)
	case r == ',' || r == ':' || strings.ContainsRune(e.seps, r):
		return !isDigitRune(r2)
	}
	return true
}

// endOK is startOK's mirror for a match ending at j; e.allow lists marks that may follow it
// whatever comes next (an IPv4 address's ":8080" or "/24"; a bare number's "/" in "ИНН/КПП
// 7707083893/770701001"). allow is not consulted before a match: "/users/123456789012" is a path.
func endOK(text string, j int, e edge) bool {
	if j == len(text) {
		return true
	}
	r, n := utf8.DecodeRuneInString(text[j:])
	if isWord(r) {
		return false
	}
	if j+n == len(text) {
		return true
	}
	if strings.ContainsRune(e.allow, r) {
		return true
	}
	r2, _ := utf8.DecodeRuneInString(text[j+n:])
	switch {
	case strings.ContainsRune(connectors, r):
		return !isWord(r2)
	case r == ',' || r == ':' || strings.ContainsRune(e.seps, r):
		return !isDigitRune(r2)
	}
	return true
}

// maxGroups bounds how many digit groups one candidate may have; longer runs are cut there and fail.
const maxGroups = 8

// groups is a run of digit groups joined by single separator bytes ("4111 1111", "123-456-789 01").
type groups struct {
	n          int
	start, end [maxGroups]int
	sep        [maxGroups]byte // sep[k] joins group k-1 and group k; sep[0] is unused
}

// readGroups reads digit groups from i (a digit) joined by exactly one byte of seps. Each group is
// a maximal run of digits, so a candidate never ends inside one.
func readGroups(text string, i int, seps string) groups {
	var g groups
	for g.n < maxGroups {
		j := i
		for j < len(text) && isDigit(text[j]) {
			j++
		}
		g.start[g.n], g.end[g.n] = i, j
		g.n++
		if g.n == maxGroups || j+1 >= len(text) || strings.IndexByte(seps, text[j]) < 0 || !isDigit(text[j+1]) {
			break // past maxGroups, endOK sees the separator and the digit and refuses the end
		}
		g.sep[g.n] = text[j]
		i = j + 1
	}
	return g
}

// digits appends the digits of groups [0, k) to dst.
func (g *groups) digits(dst []byte, text string, k int) []byte {
	for x := range k {
		dst = append(dst, text[g.start[x]:g.end[x]]...)
	}
	return dst
}

func (g *groups) length(x int) int { return g.end[x] - g.start[x] }

// seps returns the separators used in groups [0, k) as a string of distinct bytes (no allocation
// for the common single-separator case).
func (g *groups) seps(k int) string {
	var s string
	for x := 1; x < k; x++ {
		c := g.sep[x]
		if strings.IndexByte(s, c) < 0 {
			switch {
			case s == "":
				s = sepString(c)
			default:
				s += sepString(c)
			}
		}
	}
	return s
}

func sepString(c byte) string {
	switch c {
	case ' ':
		return " "
	case '-':
		return "-"
	case '.':
		return "."
	}
	return string(rune(c))
}

// ---- card ----

// cardPrefixOK reports whether digits d (13..19 of them) start with a known issuer prefix for that
// length: Visa 4 (16, 19); Mastercard 51-55 and 2221-2720 (16); Mir 2200-2204 (16-19); Amex 34, 37
// (15); JCB 3528-3589 (16-19); Diners 300-305, 36, 38, 39 (14-19); Maestro and local schemes 50,
// 56-59 (16-19); Discover, UnionPay, RuPay, Maestro 60-69 (16-19); UzCard 8600 and Humo 9860 (16).
//
// No 13-digit number is a card: Visa has not issued them for years, and EAN-13 barcodes (Russia
// 460-469, Kazakhstan 487, Germany 400-440) start with 4 and pass Luhn one time in ten.
func cardPrefixOK(d []byte) bool {
	n := len(d)
	p2 := int(d[0]-'0')*10 + int(d[1]-'0')
	p4 := p2*100 + int(d[2]-'0')*10 + int(d[3]-'0')
	switch d[0] {
	case '4':
		return n == 16 || n == 19
	case '5':
		if p2 >= 51 && p2 <= 55 {
			return n == 16
		}
		return n >= 16
	case '2':
		switch {
		case p4 >= 2200 && p4 <= 2204:
			return n >= 16
		case p4 >= 2221 && p4 <= 2720:
			return n == 16
		}
	case '3':
		switch {
		case p2 == 34 || p2 == 37:
			return n == 15
		case p4 >= 3528 && p4 <= 3589:
			return n >= 16
		case p2 == 36 || p2 == 38 || p2 == 39 || p4/10 >= 300 && p4/10 <= 305:
			return n >= 14
		}
	case '6':
		return n >= 16
	case '8':
		return p4 == 8600 && n == 16
	case '9':
		return p4 == 9860 && n == 16
	}
	return false
}

// cardGroupsOK reports whether groups [0, k) are a way cards are written: all digits in one run,
// or one separator throughout with groups of four (the last one 1-4 long, at least four groups),
// 4-6-5 (Amex) or 4-6-4 (Diners).
func cardGroupsOK(g *groups, k int) bool {
	if k == 1 {
		return true
	}
	for x := 2; x < k; x++ {
		if g.sep[x] != g.sep[1] {
			return false
		}
	}
	if k == 3 {
		return g.length(0) == 4 && g.length(1) == 6 && (g.length(2) == 5 || g.length(2) == 4)
	}
	if k < 4 {
		return false
	}
	for x := range k - 1 {
		if g.length(x) != 4 {
			return false
		}
	}
	return g.length(k-1) >= 1 && g.length(k-1) <= 4
}

// idLabels and idStems are words that, right before a long number, say it identifies something
// other than a card ("transaction 5557313230369996", "заказ № 4276...", "trace_id=5489..."):
// about one random 16-digit number in twenty-five passes a card's prefix and Luhn checks.
// idLabels match the whole lower-cased word (or its plural in s); idStems its start, for Russian
// inflections ("транзакции", "заказа").
var (
	idLabels = []string{"id", "uid", "uuid", "order", "transaction", "txn", "invoice", "trace", "request",
		"tracking", "ticket", "barcode", "ean", "sku", "ref", "reference", "session", "serial", "ид"}
	idStems = []string{"заказ", "транзакц", "накладн", "трек", "тикет", "штрихкод", "артикул", "заявк",
		"обращени", "документ", "договор", "огрн"}
)

// cardWords anywhere in the keywordWindow before a number win over an idLabel ("ID карты").
var cardWords = []string{"card", "Card", "CARD", "карт", "Карт", "КАРТ", "PAN", "Visa", "VISA", "Mastercard", "Мир"}

// idLabelled reports whether the word right before i, past spaces and the marks ':', '=', '#',
// '№' and '.', is an idLabel or starts with an idStem (the part after the last '_' for
// snake_case: "trace_id"), and no card word precedes.
func idLabelled(text string, i int) bool {
	j := i
	for j > 0 {
		r, n := utf8.DecodeLastRuneInString(text[:j])
		if r != ' ' && r != ':' && r != '=' && r != '#' && r != '№' && r != '.' {
			break
		}
		j -= n
	}
	k := j
	for k > 0 {
		r, n := utf8.DecodeLastRuneInString(text[:k])
		if !isWord(r) || r == '_' {
			break
		}
		k -= n
	}
	if k == j {
		return false
	}
	word := strings.ToLower(text[k:j])
	labelled := slices.Contains(idLabels, strings.TrimSuffix(word, "s"))
	for _, st := range idStems {
		labelled = labelled || strings.HasPrefix(word, st)
	}
	if !labelled {
		return false
	}
	lo := max(0, i-keywordWindow)
	for _, c := range cardWords {
		if strings.Contains(text[lo:i], c) {
			return false
		}
	}
	return true
}

// matchCard matches a card at i, given the groups joined by spaces and dashes there.
func matchCard(text string, i int, g *groups) int {
	var buf [19]byte
	for k := g.n; k >= 1; k-- {
		if n := g.end[k-1] - g.start[0] - (k - 1); n < 13 || n > 19 || !cardGroupsOK(g, k) {
			continue // n: the digits, the groups' separators being one byte each
		}
		d := g.digits(buf[:0], text, k)
		if !cardPrefixOK(d) || !luhn(d) {
			continue
		}
		e := edge{seps: g.seps(k)}
		if startOK(text, i, e) && endOK(text, g.end[k-1], e) && !idLabelled(text, i) {
			return g.end[k-1]
		}
	}
	return -1
}

// ---- single-run numbers: kz-iin, ru-inn, ru-snils ----

// bareEdge: a bare number may be followed by "/" ("ИНН/КПП 7707083893/770701001").
var bareEdge = edge{allow: "/"}

// bareRun returns the end of the digit run at i if it is a token of its own, else -1.
func bareRun(text string, i int) int {
	j := i
	for j < len(text) && isDigit(text[j]) {
		j++
	}
	if !startOK(text, i, bareEdge) || !endOK(text, j, bareEdge) {
		return -1
	}
	return j
}

// innKeywords mark a nearby Russian INN; iinKeywords a Kazakh IIN/BIN. A ten-digit INN is only
// matched after an INN keyword: its single check digit passes one random number in ten.
var (
	innKeywords = []string{"ИНН", "инн", "Инн", "INN", "inn", "Inn", "TIN", "tin"}
	iinKeywords = []string{"ИИН", "иин", "Иин", "БИН", "бин", "Бин", "IIN", "iin", "BIN", "bin", "ЖСН", "БСН"}
)

// keywordWindow is how far before a number (in bytes) a keyword counts.
const keywordWindow = 48

// keywordBefore reports whether one of words stands as a whole word in the keywordWindow bytes
// before i.
func keywordBefore(text string, i int, words []string) bool {
	lo := max(0, i-keywordWindow)
	w := text[lo:i]
	for _, kw := range words {
		k := strings.LastIndex(w, kw)
		if k < 0 {
			continue
		}
		if k > 0 {
			if r, _ := utf8.DecodeLastRuneInString(w[:k]); isWord(r) {
				continue
			}
		} else if lo > 0 {
			continue // the keyword may be the tail of a longer word cut by the window
		}
		if r, _ := utf8.DecodeRuneInString(w[k+len(kw):]); k+len(kw) < len(w) && isWord(r) && !isDigitRune(r) {
			continue
		}
		return true
	}
	return false
}

// ---- SNILS ----

// matchSNILS matches a SNILS at i, given the groups joined by spaces and dashes there.
func matchSNILS(text string, i int, g *groups) int {
	var buf [11]byte
	var k int
	switch {
	case g.n >= 4 && g.length(0) == 3 && g.length(1) == 3 && g.length(2) == 3 && g.length(3) == 2:
		k = 4
	case g.length(0) == 11:
		k = 1
	default:
		return -1
	}
	d := g.digits(buf[:0], text, k)
	if !ruSNILS(d) {
		return -1
	}
	e := edge{seps: g.seps(k)}
	if startOK(text, i, e) && endOK(text, g.end[k-1], e) {
		return g.end[k-1]
	}
	return -1
}

// ---- phone ----

// phoneGroup is one group of digits in a phone number; paren: written in parentheses.
type phoneGroup struct {
	start, end int
	paren      bool
}

// readPhone reads a phone-shaped run at i: an optional '+', digit groups joined by one of ' ', '-',
// '.', and at most one group in parentheses ("8 (701) 234-56-78", "+7(701)2345678"). It returns the
// groups, the distinct separators used before each group and whether the number started with '+'.
func readPhone(text string, i int) (gs [maxGroups]phoneGroup, n int, plus bool, seps [maxGroups]string) {
	p := i
	if text[p] == '+' {
		plus = true
		p++
	}
	parenUsed := false
	sepSoFar := ""
	for n < maxGroups && p < len(text) {
		open := false
		if text[p] == '(' {
			if parenUsed {
				break
			}
			open = true
			p++
		}
		q := p
		for q < len(text) && isDigit(text[q]) {
			q++
		}
		if q == p {
			break
		}
		g := phoneGroup{start: p, end: q}
		if open {
			if q >= len(text) || text[q] != ')' {
				break
			}
			g.paren, parenUsed = true, true
			q++
		}
		gs[n], seps[n] = g, sepSoFar
		n++
		p = q
		if p >= len(text) {
			break
		}
		c := text[p]
		switch {
		case (c == ' ' || c == '-' || c == '.') && p+1 < len(text) && (isDigit(text[p+1]) || text[p+1] == '(' && !parenUsed && c == ' '):
			if strings.IndexByte(sepSoFar, c) < 0 {
				sepSoFar += sepString(c)
			}
			p++
		case c == '(' && !parenUsed, g.paren && isDigit(c):
			// "8(701)", ")234": no separator needed next to parentheses.
		default:
			return gs, n, plus, seps
		}
	}
	return gs, n, plus, seps
}

// phoneShapeOK checks groups [0, k) of a phone number:
//   - '+' (E.164): 8-15 digits, not starting with 0; exactly 11 for +7 (Russia, Kazakhstan) and
//     +1 (North America); a parenthesised group only right after the country code;
//   - national, 11 digits after the trunk prefix 8 (Russia, Kazakhstan) or 1 (North America)
//     written as a group of its own: "8 (701) 234-56-78", "8-701-234-56-78", "1-800-555-0199";
//   - national, 10 digits: a three-digit area code (3-5 digits in parentheses), then the
//     subscriber number: "(495) 123-45-67", "415-555-2671", "(7172) 12-34-56"; with dots only
//     415.555.2671 (172.18.55.227 is an address).
//
// National numbers always have separators: a bare run of 10-11 digits is an ID as often as a phone.
// After the area code, groups are 2-4 digits long, or one group of 5-7.
func phoneShapeOK(text string, gs *[maxGroups]phoneGroup, k int, plus bool) bool {
	total := 0
	for x := range k {
		total += gs[x].end - gs[x].start
		if gs[x].paren && x > 1 {
			return false
		}
	}
	first := text[gs[0].start:gs[0].end]
	if plus {
		if first[0] == '0' || gs[0].paren {
			return false
		}
		if first[0] == '7' || first[0] == '1' {
			return total == 11
		}
		return total >= 8 && total <= 15
	}
	if k < 2 {
		return false
	}
	area := 1
	switch {
	case total == 11 && (first == "8" || first == "1") && !gs[0].paren:
		if l := gs[1].end - gs[1].start; l < 3 || l > 5 {
			return false
		}
		area = 2
	case total == 10 && gs[0].paren:
		if l := gs[0].end - gs[0].start; l < 3 || l > 5 {
			return false
		}
	case total == 10 && len(first) == 3:
	default:
		return false
	}
	if dotted(text, gs, k) {
		// Dots only in the North American 3.3.4 form: other dotted digit groups are addresses,
		// versions and dates.
		return k == 3 && !gs[0].paren && first != "8" && first != "1" &&
			gs[1].end-gs[1].start == 3 && gs[2].end-gs[2].start == 4
	}
	rest := k - area
	if rest == 0 {
		return false
	}
	if rest == 1 {
		l := gs[area].end - gs[area].start
		return l >= 5 && l <= 7
	}
	for x := area; x < k; x++ {
		if l := gs[x].end - gs[x].start; l < 2 || l > 4 {
			return false
		}
	}
	return true
}

// dotted reports whether any of groups [1, k) is preceded by a '.'.
func dotted(text string, gs *[maxGroups]phoneGroup, k int) bool {
	for x := 1; x < k; x++ {
		if s := gs[x].start; s > 0 && text[s-1] == '.' {
			return true
		}
	}
	return false
}

func matchPhone(text string, i int) int {
	gs, n, plus, seps := readPhone(text, i)
	for k := n; k >= 1; k-- {
		if !phoneShapeOK(text, &gs, k, plus) {
			continue
		}
		end := gs[k-1].end
		if gs[k-1].paren {
			end++
		}
		e := edge{seps: seps[k-1]}
		if startOK(text, i, e) && endOK(text, end, e) {
			return end
		}
	}
	return -1
}

// ---- IPv4 ----

var ipv4Edge = edge{seps: ".", allow: ":/"}

// ipv4Skipped are first octets never masked: 0 (this network, 0.0.0.0), 127 (loopback) and 255
// (netmasks and broadcast): they say nothing about anyone and are everywhere in code and configs.
func ipv4Skipped(first int) bool { return first == 0 || first == 127 || first == 255 }

// versionWords right before a dotted quad make it a version number ("version 1.0.0.1").
var versionWords = []string{"version", "Version", "VERSION", "ver", "Ver", "версия", "Версия", "версии", "Версии", "build", "Build", "сборка", "Сборка"}

func matchIPv4(text string, i int) int {
	g := readGroups(text, i, ".")
	if g.n != 4 {
		return -1 // fewer parts, or a longer dotted run such as 1.2.3.4.5 or an OID
	}
	first := -1
	for x := range 4 {
		l := g.length(x)
		if l > 3 || l > 1 && text[g.start[x]] == '0' {
			return -1 // leading zeros: a date or a version, not an address
		}
		v := 0
		for _, c := range []byte(text[g.start[x]:g.end[x]]) {
			v = v*10 + int(c-'0')
		}
		if v > 255 {
			return -1
		}
		if x == 0 {
			first = v
		}
	}
	if ipv4Skipped(first) {
		return -1
	}
	if !startOK(text, i, ipv4Edge) || !endOK(text, g.end[3], ipv4Edge) || versionWordAdjacent(text, i) {
		return -1
	}
	return g.end[3]
}

// versionWordAdjacent reports whether the word right before i (past spaces and a colon) is a
// version word, so that "version 1.0.0.1" is skipped but "version 2 runs on 10.0.0.1" and
// "server 10.0.0.1" are not.
func versionWordAdjacent(text string, i int) bool {
	j := i
	for j > 0 && (text[j-1] == ' ' || text[j-1] == ':') {
		j--
	}
	for _, w := range versionWords {
		if !strings.HasSuffix(text[:j], w) {
			continue
		}
		if r, _ := utf8.DecodeLastRuneInString(text[:j-len(w)]); j == len(w) || !isWord(r) {
			return true
		}
	}
	return false
}

// ---- IBAN ----

// ibanLengths is the IBAN length of each country in the SWIFT IBAN registry.
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
	"BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
	"DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
	"GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
	"IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32,
	"LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
	"MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
	"PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31,
	"SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28, "TL": 23,
	"TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}

func isUpperAlnum(c byte) bool { return isDigit(c) || c >= 'A' && c <= 'Z' }

// matchIBAN matches at i (an upper-case letter) an IBAN of its country's exact length, written
// in one run or in groups of four separated by single spaces, with a valid mod-97 check.
// Lower-case IBANs are not matched.
func matchIBAN(text string, i int) int {
	if i+4 > len(text) || !isDigit(text[i+2]) || !isDigit(text[i+3]) {
		return -1
	}
	n, ok := ibanLengths[text[i:i+2]]
	if !ok || !startOK(text, i, edge{}) {
		return -1
	}
	var buf [34]byte
	d := append(buf[:0], text[i:i+4]...)
	p := i + 4
	grouped := p < len(text) && text[p] == ' '
	for len(d) < n {
		if grouped && (len(d)%4 == 0) {
			if p >= len(text) || text[p] != ' ' {
				return -1
			}
			p++
		}
		if p >= len(text) || !isUpperAlnum(text[p]) {
			return -1
		}
		d = append(d, text[p])
		p++
	}
	if !ibanMod97(d) || !endOK(text, p, edge{}) {
		return -1
	}
	return p
}

// ---- email ----

func isLocalByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || strings.IndexByte("._%+-", c) >= 0
}

// findEmails appends the e-mail addresses in text: a local part of letters, digits and ._%+-
// (no leading, trailing or doubled dot), '@', and a domain of at least two dot-separated labels
// of letters, digits and inner hyphens whose last label (the TLD) is at least two letters or
// xn--punycode. Letters may be non-ASCII ("иван@почта.рф"). Not matched: "user@localhost" (no
// TLD), "git@github.com:org/repo" (an scp-style path), "icon@2x.png" (an image density suffix).
func findEmails(dst []Match, text string) []Match {
	from := 0
	for from < len(text) {
		k := strings.IndexByte(text[from:], '@')
		if k < 0 {
			break
		}
		at := from + k
		from = at + 1
		start := localStart(text, at)
		if start < 0 {
			continue
		}
		end := domainEnd(text, at+1)
		if end < 0 {
			continue
		}
		dst = append(dst, Match{Start: start, End: end, Detector: Email})
		from = end
	}
	return dst
}

// localStart returns where the local part ending before at starts, or -1.
func localStart(text string, at int) int {
	s := at
	for s > 0 {
		c := text[s-1]
		if c < utf8.RuneSelf {
			if !isLocalByte(c) {
				break
			}
			s--
			continue
		}
		r, n := utf8.DecodeLastRuneInString(text[:s])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			break
		}
		s -= n
	}
	local := text[s:at]
	if local == "" || local[0] == '.' || local[len(local)-1] == '.' || strings.Contains(local, "..") {
		return -1
	}
	if s > 0 {
		if r, _ := utf8.DecodeLastRuneInString(text[:s]); r == '@' || isWord(r) {
			return -1
		}
	}
	return s
}

// domainEnd returns where the domain starting at p ends, or -1.
func domainEnd(text string, p int) int {
	labels, lastStart, end := 0, p, p
	q := p
	for {
		// one label: letters and digits, inner hyphens
		ls := q
		for q < len(text) {
			c := text[q]
			if c < utf8.RuneSelf {
				if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c == '-' {
					q++
					continue
				}
				break
			}
			r, n := utf8.DecodeRuneInString(text[q:])
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r) {
				break
			}
			q += n
		}
		if q == ls || text[ls] == '-' || text[q-1] == '-' || q-ls > 63 {
			break
		}
		labels++
		lastStart, end = ls, q
		if q+1 < len(text) && text[q] == '.' {
			q++
			continue
		}
		break
	}
	if labels < 2 || !tldOK(text[lastStart:end]) {
		return -1
	}
	if r, _ := utf8.DecodeRuneInString(text[end:]); end < len(text) && (r == '@' || isWord(r) || r == '-') {
		return -1
	}
	if end+1 < len(text) && text[end] == ':' && text[end+1] != ' ' && text[end+1] != '\n' && text[end+1] != '\t' {
		return -1 // git@github.com:org/repo.git
	}
	if dom := text[p:end]; len(dom) > 3 && isDigit(dom[0]) && (strings.HasPrefix(dom[1:], "x.") || strings.HasPrefix(dom[2:], "x.")) {
		return -1 // icon@2x.png
	}
	return end
}

func tldOK(t string) bool {
	if strings.HasPrefix(t, "xn--") && len(t) > 4 {
		return true
	}
	n := 0
	for _, r := range t {
		if !unicode.IsLetter(r) {
			return false
		}
		n++
	}
	return n >= 2
}
