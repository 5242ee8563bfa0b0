// Package textout is the writer the text reports (replay, replay --compare, report) share: it
// keeps the first write error, so a report made of many Fprintf calls checks for one at the end.
package textout

import (
	"fmt"
	"io"
)

// Writer writes to W until a write fails; every write after that fails with the same error.
type Writer struct {
	W   io.Writer
	Err error
}

func (e *Writer) Write(b []byte) (int, error) {
	if e.Err != nil {
		return 0, e.Err
	}
	n, err := e.W.Write(b)
	e.Err = err
	return n, err
}

// Printf is fmt.Fprintf to e; the error, if any, stays in e.Err.
func (e *Writer) Printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }
