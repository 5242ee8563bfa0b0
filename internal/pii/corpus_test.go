package pii

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/corpus.tsv from the generator")

const corpusPath = "testdata/corpus.tsv"

func TestCorpusFileIsGenerated(t *testing.T) {
	want := corpusFile()
	if *update {
		if err := os.MkdirAll(filepath.Dir(corpusPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(corpusPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(corpusPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s differs from the generator's output; run go test -run TestCorpusFileIsGenerated -update ./internal/pii", corpusPath)
	}
}

// corpusCase is one corpus line: the input text and the matches expected in it.
type corpusCase struct {
	line     int
	category string
	text     string
	want     []Match
}

// parseMarked strips {{detector:value}} markers from s and returns the text and the spans.
func parseMarked(s string) (string, []Match, error) {
	var b strings.Builder
	var ms []Match
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			b.WriteString(s)
			return b.String(), ms, nil
		}
		b.WriteString(s[:i])
		s = s[i+2:]
		j := strings.Index(s, "}}")
		c := strings.IndexByte(s, ':')
		if j < 0 || c < 0 || c > j {
			return "", nil, fmt.Errorf("unterminated marker")
		}
		start := b.Len()
		b.WriteString(s[c+1 : j])
		ms = append(ms, Match{Start: start, End: b.Len(), Detector: s[:c]})
		s = s[j+2:]
	}
}

func readCorpus(t *testing.T) []corpusCase {
	t.Helper()
	f, err := os.Open(corpusPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusCase
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cat, marked, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("%s:%d: no tab", corpusPath, n)
		}
		text, want, err := parseMarked(marked)
		if err != nil {
			t.Fatalf("%s:%d: %v", corpusPath, n, err)
		}
		out = append(out, corpusCase{line: n, category: cat, text: text, want: want})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Floors the corpus must hold. Checksum detectors: precision 0.99; the pattern-only ones 0.95.
// Recall 0.90 for all (the corpus labels a few documented misses as what they are).
var corpusFloors = map[string]struct{ precision, recall float64 }{
	Card: {0.99, 0.90}, IBAN: {0.99, 0.90}, KZIIN: {0.99, 0.90}, RUINN: {0.99, 0.90}, RUSNILS: {0.99, 0.90},
	Email: {0.95, 0.90}, Phone: {0.95, 0.90}, IPv4: {0.95, 0.90},
}

func TestCorpus(t *testing.T) {
	cases := readCorpus(t)
	if len(cases) < 500 {
		t.Fatalf("corpus has %d lines, want at least 500", len(cases))
	}
	s, err := Compile(Config{})
	if err != nil {
		t.Fatal(err)
	}
	type tally struct{ tp, fp, fn int }
	per := map[string]*tally{}
	for _, d := range Builtin {
		per[d] = &tally{}
	}
	var misses []string
	for _, c := range cases {
		got := s.Find(c.text)
		for _, m := range got {
			if slices.Contains(c.want, m) {
				per[m.Detector].tp++
			} else {
				per[m.Detector].fp++
				misses = append(misses, fmt.Sprintf("line %d %s: false %s %q in %q", c.line, c.category, m.Detector, c.text[m.Start:m.End], c.text))
			}
		}
		for _, m := range c.want {
			if !slices.Contains(got, m) {
				per[m.Detector].fn++
				misses = append(misses, fmt.Sprintf("line %d %s: missed %s %q in %q", c.line, c.category, m.Detector, c.text[m.Start:m.End], c.text))
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "corpus: %d lines\n", len(cases))
	fmt.Fprintf(&b, "%-9s %5s %4s %4s %9s %7s  %s\n", "detector", "tp", "fp", "fn", "precision", "recall", "floors (p/r)")
	for _, d := range Builtin {
		x := per[d]
		p, r := ratio(x.tp, x.tp+x.fp), ratio(x.tp, x.tp+x.fn)
		fl := corpusFloors[d]
		fmt.Fprintf(&b, "%-9s %5d %4d %4d %9.3f %7.3f  %.2f/%.2f\n", d, x.tp, x.fp, x.fn, p, r, fl.precision, fl.recall)
		if p < fl.precision || r < fl.recall {
			t.Errorf("%s: precision %.3f recall %.3f, below the floors %.2f/%.2f", d, p, r, fl.precision, fl.recall)
		}
	}
	t.Log("\n" + b.String())
	for _, m := range misses {
		t.Log(m)
	}
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}

// The generator's check digits (corpus_gen_test.go, written separately) agree with the validators.
func TestGeneratorsAgreeWithValidators(t *testing.T) {
	r := &rng{s: 7}
	for range 2000 {
		if d, _ := r.cardNumber(); !luhn([]byte(d)) || !cardPrefixOK([]byte(d)) {
			t.Fatalf("card %s", d)
		}
		if s := r.iban(); !ibanMod97([]byte(s)) || ibanLengths[s[:2]] != len(s) {
			t.Fatalf("iban %s", s)
		}
		if s := r.kzIIN(); !kzIIN([]byte(s)) {
			t.Fatalf("iin %s", s)
		}
		if s := r.kzBIN(); !kzIIN([]byte(s)) {
			t.Fatalf("bin %s", s)
		}
		if s := r.inn10(); !ruINN([]byte(s)) {
			t.Fatalf("inn10 %s", s)
		}
		if s := r.inn12(); !ruINN([]byte(s)) {
			t.Fatalf("inn12 %s", s)
		}
		if s := r.snils(); !ruSNILS([]byte(s)) {
			t.Fatalf("snils %s", s)
		}
	}
}

// TestRandomNumberRates measures, rather than asserts, how often an unlabelled random number of
// each length is taken for PII: the rate at which order numbers and IDs get masked. It fails only
// if a rate is far above what the checks should let through.
func TestRandomNumberRates(t *testing.T) {
	s := mustCompile(t, Config{})
	r := &rng{s: 42}
	const n = 20000
	limits := map[int]float64{10: 0.001, 11: 0.015, 12: 0.025, 14: 0.04, 15: 0.02, 16: 0.05, 19: 0.05}
	var b strings.Builder
	for _, l := range []int{10, 11, 12, 14, 15, 16, 19} {
		hits := map[string]int{}
		total := 0
		for range n {
			if ms := s.Find("Число " + r.digits(l) + " в отчёте"); len(ms) > 0 {
				hits[ms[0].Detector]++
				total++
			}
		}
		rate := float64(total) / n
		fmt.Fprintf(&b, "%2d digits: %.4f %v\n", l, rate, hits)
		if rate > limits[l] {
			t.Errorf("%d random digits are PII %.4f of the time, want at most %.4f", l, rate, limits[l])
		}
	}
	t.Log("\n" + b.String())
}
