package pii

import (
	"strconv"
	"testing"
)

// Published example values: the test card numbers of the card schemes and payment processors,
// the IBAN registry's examples, the INNs of Sberbank (7707083893), Yandex (7736207543) and the
// FNS documentation's individual INN, SNILS examples from the Pension Fund's description of the
// check number. The KZ values are worked by hand in the comments.
func TestChecksums(t *testing.T) {
	tests := []struct {
		name string
		f    func([]byte) bool
		ok   []string
		bad  []string
	}{
		{"luhn", luhn,
			[]string{"4111111111111111", "5555555555554444", "378282246310005", "6011111111111117",
				"4012888888881881", "3530111333300000", "30569309025904", "5105105105105100", "2200000000000004"},
			[]string{"4111111111111112", "5555555555554445", "378282246310006", "1234567812345678"}},
		{"iban", ibanMod97,
			[]string{"DE89370400440532013000", "GB82WEST12345698765432", "FR1420041010050500013M02606",
				"KZ86125KZT5004100100", "NL91ABNA0417164300", "CH9300762011623852957", "TR330006100519786457841326"},
			[]string{"DE89370400440532013001", "GB82WEST12345698765423", "KZ87125KZT5004100100", "XX"}},
		{"ru-inn", ruINN,
			[]string{"7707083893", "7736207543", "500100732259"},
			[]string{"7707083894", "500100732258", "500100732269", "0007083893", "77070838", "7707083893123"}},
		{"ru-snils", ruSNILS,
			// 087-654-303 00: sum 202, 202 mod 101 = 0. 001-001-999 65: the first checked number
			// (7+4+27+18+9).
			[]string{"11223344595", "08765430300", "00100199965"},
			// 001-001-998 and below are never matched, whatever their last two digits.
			[]string{"11223344596", "08765430301", "00100199800", "00100100100", "1122334459"}},
		{"kz-iin", kzIIN,
			[]string{
				// 900101 3 0001 7: 9·1+1·4+1·6+3·7+1·11 = 51, 51 mod 11 = 7.
				"900101300017",
				// 900101 3 0008 1: the first pass gives 131 mod 11 = 10; the second, weights
				// 3..11,1,2: 27+6+8+27+8+2 = 78, 78 mod 11 = 1.
				"900101300811",
				// A BIN: registered 2004-05, resident (4), head office (0), serial 00123.
				withCheck("04054000121"),
				withCheck("00022950001"), // 29 February 2000
			},
			[]string{
				"900101300018",           // wrong check digit
				"900101300810",           // the first pass's 10 taken as a digit
				withCheck("90130130001"), // month 13
				withCheck("90023030001"), // 30 February
				withCheck("00022930001"), // 29 February 1900 (century digit 3; 1900 is no leap year)
				withCheck("90010170001"), // century digit 7
				withCheck("04057000121"), // a BIN with entity type 7
			}},
	}
	for _, tt := range tests {
		for _, s := range tt.ok {
			if !tt.f([]byte(s)) {
				t.Errorf("%s(%s) = false, want true", tt.name, s)
			}
		}
		for _, s := range tt.bad {
			if tt.f([]byte(s)) {
				t.Errorf("%s(%s) = true, want false", tt.name, s)
			}
		}
	}
}

// withCheck appends the KZ check digit to 11 digits, so that only the structure is under test.
func withCheck(first11 string) string {
	c, ok := kzCheckDigit([]byte(first11))
	if !ok {
		panic("never issued: " + first11)
	}
	return first11 + strconv.Itoa(c)
}

// The hand-worked KZ examples above hold for kzCheckDigit; check that the second pass is the only
// way a first-pass 10 becomes a digit, and that a double 10 is refused.
func TestKZCheckDigitSecondPass(t *testing.T) {
	seen10, seenNever := false, false
	for n := range 200000 {
		d := []byte(pad11(n * 7919))
		s1 := 0
		for i := range 11 {
			s1 += int(d[i]-'0') * (i + 1)
		}
		c, ok := kzCheckDigit(d)
		switch {
		case s1%11 != 10:
			if !ok || c != s1%11 {
				t.Fatalf("%s: first pass %d, got %d %v", d, s1%11, c, ok)
			}
		case ok:
			seen10 = true
		default:
			seenNever = true
		}
	}
	if !seen10 || !seenNever {
		t.Fatalf("second pass seen %v, never-issued seen %v", seen10, seenNever)
	}
}

func pad11(n int) string {
	s := strconv.Itoa(n % 100000000000)
	for len(s) < 11 {
		s = "0" + s
	}
	return s
}
