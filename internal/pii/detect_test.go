package pii

import (
	"slices"
	"strings"
	"sync"
	"testing"
)

func mustCompile(t testing.TB, cfg Config) *Scanner {
	t.Helper()
	s, err := Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// found renders Find's result as "detector:value" strings.
func found(s *Scanner, text string) []string {
	var out []string
	for _, m := range s.Find(text) {
		out = append(out, m.Detector+":"+text[m.Start:m.End])
	}
	return out
}

func TestFind(t *testing.T) {
	s := mustCompile(t, Config{})
	tests := []struct {
		text string
		want []string
	}{
		// card
		{"card 4111 1111 1111 1111 exp 12/25", []string{"card:4111 1111 1111 1111"}},
		{"4111-1111-1111-1111.", []string{"card:4111-1111-1111-1111"}},
		{"Amex 3782 822463 10005", []string{"card:3782 822463 10005"}},
		{"(5555555555554444)", []string{"card:5555555555554444"}},
		{"4111 1111 1111 1111 2222", nil},                                // a longer grouped run
		{"4111-1111 1111-1111", nil},                                     // mixed separators
		{"ORD-4111111111111111", nil},                                    // part of an identifier
		{"1,4111111111111111", nil},                                      // a decimal
		{"x4111111111111111", nil},                                       // inside a word
		{"41111111111111111", nil},                                       // 17 digits, fails Luhn anyway; never a substring
		{"4111111111111112", nil},                                        // Luhn
		{"1234567812345670", nil},                                        // Luhn-valid, no issuer starts with 1
		{"Штрихкод 4607001771236", nil},                                  // 13 digits: EAN-13, not a card
		{"transaction 5557313230369996", nil},                            // labelled as something else
		{"ID карты 5557313230369996", []string{"card:5557313230369996"}}, // the card word wins
		{"refund 4111111111111111", []string{"card:4111111111111111"}},   // "ref" is a whole word
		// iban
		{"IBAN KZ86 125K ZT50 0410 0100 please", []string{"iban:KZ86 125K ZT50 0410 0100"}},
		{"DE89370400440532013000.", []string{"iban:DE89370400440532013000"}},
		{"DE89 3704 0044 0532 0130 00", []string{"iban:DE89 3704 0044 0532 0130 00"}},
		{"DE89370400440532013001", nil},   // mod 97
		{"DE8937040044053201300012", nil}, // longer than Germany's 22
		{"de89370400440532013000", nil},   // lower case: a documented miss
		{"XDE89370400440532013000", nil},  // inside a word
		{"DE89 3704 00440532013000", nil}, // broken grouping
		// kz-iin
		{"ИИН 900101300017", []string{"kz-iin:900101300017"}},
		{"900101300811,", []string{"kz-iin:900101300811"}},
		{"ИИН900101300017", nil}, // glued to the word
		{"9001013000171", nil},   // 13 digits
		// ru-inn
		{"ИНН 7707083893", []string{"ru-inn:7707083893"}},
		{"ИНН/КПП 7707083893/770701001", []string{"ru-inn:7707083893"}},
		{"Контрагент 7707083893", nil}, // ten digits need the keyword
		{"ИНН 500100732259", []string{"ru-inn:500100732259"}},
		{"500100732259", []string{"ru-inn:500100732259"}}, // twelve digits do not
		{"Иннокентий 7707083893", nil},                    // not the keyword
		{"/users/7707083893 ИНН", nil},
		// ru-snils
		{"СНИЛС 112-233-445 95", []string{"ru-snils:112-233-445 95"}},
		{"112 233 445 95", []string{"ru-snils:112 233 445 95"}},
		{"11223344595", []string{"ru-snils:11223344595"}},
		{"112-233-445 96", nil},
		{"001-001-998 00", nil},    // no check number below 001-001-999
		{"112-233-445 95-12", nil}, // longer run
		// phone
		{"звоните +7 (701) 234-56-78 или 8 701 234 56 78", []string{"phone:+7 (701) 234-56-78", "phone:8 701 234 56 78"}},
		{"+77012345678", []string{"phone:+77012345678"}},
		{"8(701)2345678", []string{"phone:8(701)2345678"}},
		{"(495) 123-45-67", []string{"phone:(495) 123-45-67"}},
		{"8 (7172) 12-34-56", []string{"phone:8 (7172) 12-34-56"}},
		{"+44 20 7946 0958", []string{"phone:+44 20 7946 0958"}},
		{"415.555.2671", []string{"phone:415.555.2671"}},
		{"1-800-555-0199", []string{"phone:1-800-555-0199"}},
		{"+7 701 234 56 7", nil}, // +7 needs 11 digits
		{"87012345678", nil},     // bare national: a documented miss
		{"+0 123 456 789", nil},
		{"2024-01-15", nil},
		{"12.34.56.78.90", nil},
		{"Итого 1 234 567 ₸", nil},
		{"8 500 000 000 тенге", nil},
		{"SKU 123-45-6789", nil},
		{"ISBN 978-5-17-118366-1", nil},
		{"+7 701 234 56 78-99", nil}, // longer run
		// ipv4
		{"host 10.0.0.1:8080 and 192.168.1.0/24", []string{"ipv4:10.0.0.1", "ipv4:192.168.1.0"}},
		{"ssh admin@172.16.0.5", []string{"ipv4:172.16.0.5"}},
		{"server 10.1.2.3", []string{"ipv4:10.1.2.3"}},
		{"1.2.3.4.5", nil},
		{"v1.2.3.4", nil},
		{"version 1.0.0.1", nil},
		{"Версия 4.2.0.15", nil},
		{"256.1.1.1", nil},
		{"192.168.001.001", nil},                 // leading zeros
		{"127.0.0.1 0.0.0.0 255.255.255.0", nil}, // loopback, unspecified, netmask
		{"OID 1.3.6.1.4.1.2620", nil},
		{"Chrome/120.0.6099.109", nil},
		{"10.0.0.1.", []string{"ipv4:10.0.0.1"}}, // end of sentence
		// email
		{"mail ivan.petrov+tag@mail.ru, иван@почта.рф", []string{"email:ivan.petrov+tag@mail.ru", "email:иван@почта.рф"}},
		{"<a.smirnova@corp.example.com>.", []string{"email:a.smirnova@corp.example.com"}},
		{"mailto:x@y.kz", []string{"email:x@y.kz"}},
		{"https://user:secret@example.com/x", []string{"email:secret@example.com"}},
		{"git@github.com:org/repo.git", nil},
		{"icon@2x.png", nil},
		{"user@localhost", nil},
		{"lodash@4.17.21", nil},
		{".ivan@mail.ru", []string{}}, // see below: a leading dot is refused
		{"ivan..p@mail.ru", nil},
		{"a@b@c.com", nil},
		// overlaps: the earlier and longer match wins
		{"4111111111111111@bank.com", []string{"email:4111111111111111@bank.com"}},
		{"+77012345678@s.whatsapp.net", []string{"email:+77012345678@s.whatsapp.net"}},
	}
	for _, tt := range tests {
		got := found(s, tt.text)
		if len(tt.want) == 0 && len(got) == 0 {
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Find(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

func TestFindOnlyEnabled(t *testing.T) {
	s := mustCompile(t, Config{Detectors: []string{Email, IPv4}})
	text := "ivan@mail.ru 4111111111111111 10.0.0.1 +77012345678"
	if got, want := found(s, text), []string{"email:ivan@mail.ru", "ipv4:10.0.0.1"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := mustCompile(t, Config{Detectors: []string{RUINN}}).Find("ИИН 900101300017"); len(got) != 0 {
		t.Fatalf("ru-inn alone found %v", got) // the IIN keyword still keeps the INN check off
	}
}

func TestCustom(t *testing.T) {
	s := mustCompile(t, Config{Detectors: []string{Email}, Custom: []Custom{
		{Name: "employee-id", Pattern: `\bEMP-[0-9]{6}\b`},
		{Name: "contract", Pattern: `Д-\d{4}/\d{2}`},
	}})
	text := "EMP-123456 signed Д-0042/24 and wrote to hr@company.kz; EMP-12345 is short"
	want := []string{"employee-id:EMP-123456", "contract:Д-0042/24", "email:hr@company.kz"}
	if got := found(s, text); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got, want := s.Detectors(), []string{Email, "employee-id", "contract"}; !slices.Equal(got, want) {
		t.Fatalf("Detectors = %q, want %q", got, want)
	}
}

func TestCustomOverlapsBuiltin(t *testing.T) {
	// The earlier start wins; at the same start the longer; at the same span the builtin.
	s := mustCompile(t, Config{Custom: []Custom{{Name: "ticket", Pattern: `T\d+`}, {Name: "mail", Pattern: `ivan@mail\.ru`}}})
	got := found(s, "T4111111111111111 ivan@mail.ru")
	want := []string{"ticket:T4111111111111111", "email:ivan@mail.ru"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{Detectors: []string{"email", "passport"}}, `unknown detector "passport"`},
		{Config{Detectors: []string{"email", "email"}}, `detector "email" listed twice`},
		{Config{Custom: []Custom{{Name: "Bad_Name", Pattern: "x"}}}, `custom detector "Bad_Name": name`},
		{Config{Custom: []Custom{{Name: "-x", Pattern: "x"}}}, `custom detector "-x": name`},
		{Config{Custom: []Custom{{Name: "email", Pattern: "x"}}}, `custom detector "email": name is a builtin`},
		{Config{Custom: []Custom{{Name: "a", Pattern: "x"}, {Name: "a", Pattern: "y"}}}, `custom detector "a" defined twice`},
		{Config{Custom: []Custom{{Name: "re", Pattern: "(unclosed"}}}, `custom detector "re": invalid pattern`},
		{Config{Custom: []Custom{{Name: "re", Pattern: "a*"}}}, `custom detector "re": pattern matches the empty string`},
		{Config{Custom: []Custom{{Name: "re", Pattern: ""}}}, `custom detector "re": empty pattern`},
	}
	for _, tt := range tests {
		_, err := Compile(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Compile(%+v) = %v, want an error containing %q", tt.cfg, err, tt.want)
		}
	}
}

func TestNilScanner(t *testing.T) {
	var s *Scanner
	if !s.Off() || s.Find("ivan@mail.ru") != nil || s.Detectors() != nil {
		t.Fatal("a nil Scanner must be off and find nothing")
	}
}

func TestFindNoAllocationsWithoutPII(t *testing.T) {
	s := mustCompile(t, Config{})
	text := strings.Repeat("Summarize the meeting of 12.03.2024 at 10:30: revenue 1 234 567 ₸, v1.2.3, order #12345. ", 20)
	if n := testing.AllocsPerRun(100, func() { s.Find(text) }); n != 0 {
		t.Fatalf("Find allocated %.0f times on text without PII", n)
	}
}

func TestScannerConcurrent(t *testing.T) {
	s := mustCompile(t, Config{Custom: []Custom{{Name: "emp", Pattern: `EMP-\d+`}}})
	text := "ivan@mail.ru +7 701 234 56 78 EMP-42 4111111111111111"
	want := found(s, text)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if got := found(s, text); !slices.Equal(got, want) {
					t.Errorf("got %q", got)
					return
				}
			}
		})
	}
	wg.Wait()
}

// FuzzFind checks that Find never panics and keeps its promises: matches in order, inside the
// text, non-overlapping, non-empty, with a known detector.
func FuzzFind(f *testing.F) {
	s := mustCompile(f, Config{Custom: []Custom{{Name: "emp", Pattern: `EMP-\d+`}}})
	for _, seed := range []string{
		"card 4111 1111 1111 1111 exp 12/25", "1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9", "+7 (701) 234-56-78",
		"1.2.3.4.5.6.7.8.9.10", "ИНН 7707083893 ИИН 900101300017", "KZ86 125K ZT50 0410 0100", "a@b.cd@e.fg",
		"8 (((701) 2", "((((", "+", "@", "EMP-1 10.0.0.1:80/24",
	} {
		f.Add(seed)
	}
	known := append(slices.Clone(Builtin), "emp")
	f.Fuzz(func(t *testing.T, text string) {
		end := 0
		for _, m := range s.Find(text) {
			if m.Start < end || m.End <= m.Start || m.End > len(text) || !slices.Contains(known, m.Detector) {
				t.Fatalf("bad match %+v after %d in %q", m, end, text)
			}
			end = m.End
		}
	})
}
