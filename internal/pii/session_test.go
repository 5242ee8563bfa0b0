package pii

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMaskRestoreRoundTrip(t *testing.T) {
	s := mustCompile(t, Config{})
	ss := s.NewSession()
	msgs := []string{
		"Клиент Иванов, ИНН 500100732259, тел. +7 (701) 234-56-78, email ivanov@mail.ru",
		"Карта 4111 1111 1111 1111, IBAN KZ86 125K ZT50 0410 0100, ИИН 900101300017, СНИЛС 112-233-445 95",
		`{"tool":"lookup","arguments":{"ip":"10.20.30.40","email":"ivanov@mail.ru"}}`,
		"Nothing to see here [EMAIL_7] and [brackets].",
	}
	for _, m := range msgs {
		masked := ss.Mask(m)
		for _, v := range []string{"500100732259", "ivanov@mail.ru", "4111", "KZ86", "900101300017", "112-233", "10.20.30.40"} {
			if strings.Contains(masked, v) {
				t.Errorf("Mask(%q) = %q still holds %q", m, masked, v)
			}
		}
		if got := ss.Restore(masked); got != m {
			t.Errorf("Restore(Mask(%q)) = %q", m, got)
		}
	}
	// A caller's own text that spells an issued placeholder restores to its value (documented
	// on Mask): the one thing that does not round-trip.
	if got := ss.Restore(ss.Mask("literal [EMAIL_1]")); got != "literal ivanov@mail.ru" {
		t.Fatalf("Restore = %q", got)
	}
}

func TestSamePlaceholderAcrossMessages(t *testing.T) {
	ss := mustCompile(t, Config{}).NewSession()
	a := ss.Mask("user: my mail is ivan@mail.ru")
	b := ss.Mask(`tool result: {"owner": "ivan@mail.ru", "backup": "olga@mail.ru"}`)
	c := ss.Mask("assistant: I will write to ivan@mail.ru and olga@mail.ru, and anna@mail.ru")
	want := []string{
		"user: my mail is [EMAIL_1]",
		`tool result: {"owner": "[EMAIL_1]", "backup": "[EMAIL_2]"}`,
		"assistant: I will write to [EMAIL_1] and [EMAIL_2], and [EMAIL_3]",
	}
	if got := []string{a, b, c}; !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if got, want := ss.Counts(), map[string]int{Email: 6}; !maps.Equal(got, want) {
		t.Fatalf("Counts = %v, want %v (occurrences)", got, want)
	}
}

func TestPlaceholdersPerDetector(t *testing.T) {
	ss := mustCompile(t, Config{}).NewSession()
	got := ss.Mask("+7 701 234 56 78, +7 701 234 56 79, 4111111111111111, 10.0.0.1, 10.0.0.2, 10.0.0.1, " +
		"ИИН 900101300017, ИНН 7707083893, СНИЛС 112-233-445 95, DE89370400440532013000")
	want := "[PHONE_1], [PHONE_2], [CARD_1], [IPV4_1], [IPV4_2], [IPV4_1], " +
		"ИИН [KZ_IIN_1], ИНН [RU_INN_1], СНИЛС [RU_SNILS_1], [IBAN_1]"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	wantCounts := map[string]int{Phone: 2, Card: 1, IPv4: 3, KZIIN: 1, RUINN: 1, RUSNILS: 1, IBAN: 1}
	if c := ss.Counts(); !maps.Equal(c, wantCounts) {
		t.Fatalf("Counts = %v, want %v", c, wantCounts)
	}
	if f, want := ss.Found(), []string{Card, IBAN, IPv4, KZIIN, Phone, RUINN, RUSNILS}; !slices.Equal(f, want) {
		t.Fatalf("Found = %q, want %q", f, want)
	}
	// Counts is a copy: the caller cannot change the session's.
	ss.Counts()[Phone] = 99
	if ss.Counts()[Phone] != 2 {
		t.Fatal("Counts leaked the session's map")
	}
}

func TestRestoreLeavesOthersAlone(t *testing.T) {
	ss := mustCompile(t, Config{}).NewSession()
	ss.Mask("ivan@mail.ru and 10.0.0.1")
	in := "[EMAIL_1] [EMAIL_9] [EMAIL 1] [email_1] [EMAIL_1 [EMAIL_01] [[EMAIL_1]] [IPV4_1] [PHONE_1] [] [ [EMAIL_1x]"
	want := "ivan@mail.ru [EMAIL_9] [EMAIL 1] [email_1] [EMAIL_1 [EMAIL_01] [ivan@mail.ru] 10.0.0.1 [PHONE_1] [] [ [EMAIL_1x]"
	if got := ss.Restore(in); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	fresh := mustCompile(t, Config{}).NewSession()
	if got := fresh.Restore("[EMAIL_1]"); got != "[EMAIL_1]" {
		t.Fatalf("a session that issued nothing restored %q", got)
	}
}

// streamSession has several placeholders of different lengths, and values that contain '[' and
// multi-byte runes.
func streamSession(t testing.TB) (*Session, string) {
	s := mustCompile(t, Config{Custom: []Custom{{Name: "nick", Pattern: `\[[a-zа-я]+\]`}}})
	ss := s.NewSession()
	ss.Mask("ivan@mail.ru olga@почта.рф +7 701 234 56 78 ИИН 900101300017 10.0.0.1 [зверь]")
	answer := "Готово: [EMAIL_1] и [EMAIL_2] — ☎ [PHONE_1]; [KZ_IIN_1]/[IPV4_1] [NICK_1]! " +
		"[EMAIL_9] [EMAIL 1] [[EMAIL_1]] [EMAIL_ [PHONE_1"
	return ss, answer
}

func streamAll(ss *Session, chunks []string) string {
	r := ss.NewStreamRestorer()
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString(r.Write(c))
	}
	b.WriteString(r.Flush())
	return b.String()
}

func TestStreamRestorerEverySplit(t *testing.T) {
	ss, answer := streamSession(t)
	want := ss.Restore(answer)
	if !strings.Contains(want, "ivan@mail.ru") || !strings.Contains(want, "[EMAIL_9]") || !strings.Contains(want, "[PHONE_1") {
		t.Fatalf("Restore = %q", want)
	}
	// One split, at every byte (inside runes too).
	for i := 0; i <= len(answer); i++ {
		if got := streamAll(ss, []string{answer[:i], answer[i:]}); got != want {
			t.Fatalf("split at %d: got %q", i, got)
		}
	}
	// Every byte its own chunk.
	var bytes []string
	for i := range len(answer) {
		bytes = append(bytes, answer[i:i+1])
	}
	if got := streamAll(ss, bytes); got != want {
		t.Fatalf("byte by byte: got %q", got)
	}
	// Every pair of split points of a short text.
	short := "a[EMAIL_1]б[IPV4_1][EMAIL_2"
	wantShort := ss.Restore(short)
	for i := 0; i <= len(short); i++ {
		for j := i; j <= len(short); j++ {
			if got := streamAll(ss, []string{short[:i], short[i:j], short[j:]}); got != wantShort {
				t.Fatalf("splits %d,%d: got %q, want %q", i, j, got, wantShort)
			}
		}
	}
}

func TestStreamRestorerHoldsOnlyPrefixes(t *testing.T) {
	ss, _ := streamSession(t)
	tests := []struct{ chunk, now string }{
		{"see [EM", "see "},              // could become [EMAIL_1]
		{"see [EMAIL_", "see "},          //
		{"see [EMAIL_1", "see "},         //
		{"see [EMAIL_3", "see [EMAIL_3"}, // no third e-mail was issued
		{"see [X", "see [X"},             // no placeholder starts so
		{"see [", "see "},                //
		{"see [EMAIL_1]", "see ivan@mail.ru"},
		{"a]b", "a]b"},
	}
	for _, tt := range tests {
		r := ss.NewStreamRestorer()
		if got := r.Write(tt.chunk); got != tt.now {
			t.Errorf("Write(%q) = %q, want %q", tt.chunk, got, tt.now)
		}
		if got := r.Flush(); got != strings.TrimPrefix(tt.chunk, tt.now) && !strings.Contains(tt.chunk, "]") {
			t.Errorf("Flush after %q = %q", tt.chunk, got)
		}
	}
	r := ss.NewStreamRestorer()
	if got := r.Write("[EMA") + r.Write("IL_2] ok"); got != "olga@почта.рф ok" {
		t.Fatalf("completed across writes: %q", got)
	}
}

// Each piece a StreamRestorer returns is valid UTF-8 when each piece written is: it holds back only
// from a '[' on, and restores whole values.
func TestStreamRestorerKeepsRunesWhole(t *testing.T) {
	ss, answer := streamSession(t)
	var pieces []string
	for i := 0; i < len(answer); {
		n := 1 + i%7
		j := min(len(answer), i+n)
		for j < len(answer) && !utf8.RuneStart(answer[j]) {
			j++
		}
		pieces = append(pieces, answer[i:j])
		i = j
	}
	r := ss.NewStreamRestorer()
	var b strings.Builder
	for _, p := range pieces {
		out := r.Write(p)
		if !utf8.ValidString(out) {
			t.Fatalf("Write(%q) returned invalid UTF-8 %q", p, out)
		}
		b.WriteString(out)
	}
	b.WriteString(r.Flush())
	if b.String() != ss.Restore(answer) {
		t.Fatalf("got %q", b.String())
	}
}

func FuzzStreamRestorer(f *testing.F) {
	ss, answer := streamSession(f)
	f.Add(answer, uint16(3), uint16(17), uint16(40))
	f.Add("[EMAIL_1][EMAIL_1][[EMAIL_2]]", uint16(1), uint16(2), uint16(9))
	f.Add("[PHONE_1", uint16(0), uint16(4), uint16(8))
	f.Fuzz(func(t *testing.T, text string, a, b, c uint16) {
		want := ss.Restore(text)
		cuts := []int{int(a) % (len(text) + 1), int(b) % (len(text) + 1), int(c) % (len(text) + 1)}
		slices.Sort(cuts)
		chunks := []string{text[:cuts[0]], text[cuts[0]:cuts[1]], text[cuts[1]:cuts[2]], text[cuts[2]:]}
		if got := streamAll(ss, chunks); got != want {
			t.Fatalf("chunks %q: got %q, want %q", chunks, got, want)
		}
		// Byte by byte too, for short inputs.
		if len(text) <= 64 {
			var bs []string
			for i := range len(text) {
				bs = append(bs, text[i:i+1])
			}
			if got := streamAll(ss, bs); got != want {
				t.Fatalf("byte by byte: got %q, want %q", got, want)
			}
		}
	})
}

func TestSessionConcurrent(t *testing.T) {
	ss := mustCompile(t, Config{}).NewSession()
	done := make(chan string, 4)
	for i := range 4 {
		go func() {
			var b strings.Builder
			for range 100 {
				b.WriteString(ss.Mask("ivan@mail.ru and 10.0.0." + string(rune('1'+i))))
			}
			done <- b.String()
		}()
	}
	for range 4 {
		<-done
	}
	if c := ss.Counts(); c[Email] != 400 || c[IPv4] != 400 {
		t.Fatalf("Counts = %v", c)
	}
	if got := ss.Restore("[EMAIL_1] [EMAIL_2]"); got != "ivan@mail.ru [EMAIL_2]" {
		t.Fatalf("Restore = %q", got)
	}
}

func TestNilScannerSession(t *testing.T) {
	var s *Scanner
	ss := s.NewSession()
	if got := ss.Mask("ivan@mail.ru"); got != "ivan@mail.ru" {
		t.Fatalf("Mask = %q", got)
	}
	if ss.Restore("[EMAIL_1]") != "[EMAIL_1]" || len(ss.Counts()) != 0 || len(ss.Found()) != 0 {
		t.Fatal("a nil Scanner's session must restore nothing")
	}
	r := ss.NewStreamRestorer()
	if r.Write("[EMA") != "[EMA" || r.Flush() != "" {
		t.Fatal("nothing to hold back without placeholders")
	}
	var nss *Session
	if nss.Mask("x@y.kz") != "x@y.kz" || nss.Restore("[EMAIL_1]") != "[EMAIL_1]" || nss.Counts() != nil || nss.Found() != nil {
		t.Fatal("nil Session")
	}
	var nr *StreamRestorer
	if nr.Write("a") != "a" || nr.Flush() != "" || nss.NewStreamRestorer().Write("[E") != "[E" {
		t.Fatal("nil StreamRestorer")
	}
}

func TestCustomPlaceholders(t *testing.T) {
	s := mustCompile(t, Config{Detectors: []string{Email}, Custom: []Custom{
		{Name: "employee-id", Pattern: `\bEMP-[0-9]{6}\b`},
		{Name: "contract", Pattern: `Д-\d{4}/\d{2}`},
	}})
	ss := s.NewSession()
	text := "EMP-123456 signed Д-0042/24 and wrote to hr@company.kz; EMP-12345 is short"
	if got, want := ss.Mask(text), "[EMPLOYEE_ID_1] signed [CONTRACT_1] and wrote to [EMAIL_1]; EMP-12345 is short"; got != want {
		t.Fatalf("Mask = %q, want %q", got, want)
	}
	if got, want := ss.Counts(), map[string]int{"employee-id": 1, "contract": 1, Email: 1}; !maps.Equal(got, want) {
		t.Fatalf("Counts = %v, want %v", got, want)
	}
}

// FuzzMaskRestore: Restore(Mask(text)) is text, unless text already spells a placeholder.
func FuzzMaskRestore(f *testing.F) {
	s := mustCompile(f, Config{Custom: []Custom{{Name: "emp", Pattern: `EMP-\d+`}}})
	for _, seed := range []string{"ivan@mail.ru +7 701 234 56 78 EMP-7 10.0.0.1", "4111 1111 1111 1111, 4111111111111111", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if strings.Contains(text, "[") {
			return
		}
		ss := s.NewSession()
		masked := ss.Mask(text)
		if got := ss.Restore(masked); got != text {
			t.Fatalf("round trip of %q gave %q (masked %q)", text, got, masked)
		}
	})
}
