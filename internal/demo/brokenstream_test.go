package demo

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The scene's pieces never split a character and are never longer than asked.
func TestRunePieces(t *testing.T) {
	for _, s := range []string{brokenStreamText, "ab", "", "ёёёёёёёё", "a—b—c—d—e—f"} {
		for _, n := range []int{1, 3, 8} {
			splits := runePieces(s, n)
			prev := 0
			var pieces []string
			for _, at := range append(splits, len(s)) {
				if at <= prev && len(s) > 0 {
					t.Fatalf("%q by %d: splits %v do not increase", s, n, splits)
				}
				pieces = append(pieces, s[prev:at])
				prev = at
			}
			for _, p := range pieces {
				if !utf8.ValidString(p) {
					t.Fatalf("%q by %d: piece %q splits a character", s, n, p)
				}
				if len(p) > max(n, utf8.UTFMax) {
					t.Fatalf("%q by %d: piece %q is longer than asked", s, n, p)
				}
			}
			if strings.Join(pieces, "") != s {
				t.Fatalf("%q by %d: pieces %q do not make the text", s, n, pieces)
			}
		}
	}
}
