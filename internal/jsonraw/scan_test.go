package jsonraw

import "testing"

// TestJSONWalkerOnMalformedInput: on input json.Valid refuses the walker stays in bounds (a
// panic fails the test), and the walks report failure; SkipValue, which only balances brackets
// and strings, says -1 or an index within b.
func TestJSONWalkerOnMalformedInput(t *testing.T) {
	for _, s := range []string{`{`, `{"a`, `{"a":`, `{"a":[`, `{"a":"\`, `{"a":1`, `{"a" 1}`, `{1:2}`, `[1,`, `[`, `{"a":{"b":[}`} {
		b := []byte(s)
		all := func([]byte, int, int) bool { return true }
		if EachMember(b, 0, all) && EachElement(b, 0, func(int, int) bool { return true }) {
			t.Errorf("%s: walked as an object and an array", s)
		}
		if n := SkipValue(b, 0); n != -1 && (n < 0 || n > len(b)) {
			t.Errorf("SkipValue(%s) = %d, out of bounds", s, n)
		}
	}
}
