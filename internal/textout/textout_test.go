package textout

import (
	"errors"
	"strings"
	"testing"
)

type failAfter struct {
	n   int
	out strings.Builder
}

func (f *failAfter) Write(b []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return f.out.Write(b)
}

func TestWriterKeepsTheFirstError(t *testing.T) {
	f := &failAfter{n: 1}
	w := &Writer{W: f}
	w.Printf("one %d\n", 1)
	w.Printf("two\n")
	w.Printf("three\n")
	if w.Err == nil || w.Err.Error() != "disk full" || f.out.String() != "one 1\n" {
		t.Fatalf("err %v, written %q", w.Err, f.out.String())
	}
}
