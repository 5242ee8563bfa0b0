package replay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
)

// maxLineBytes bounds one log line; a longer one is reported and skipped, so one corrupt line
// cannot make the replay's memory grow with the log.
const maxLineBytes = 1 << 20

// OpenLog opens an access log for reading: a file path, or "-" for stdin. A gzip stream is
// recognised by its magic bytes, whatever the file is called.
func OpenLog(path string, stdin io.Reader) (io.ReadCloser, error) {
	var r io.Reader
	var closer io.Closer = io.NopCloser(nil)
	if path == "-" {
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("failed to open log: %w", err)
		}
		r, closer = f, f
	}
	br := bufio.NewReaderSize(r, 256<<10)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			closer.Close()
			return nil, fmt.Errorf("failed to read gzip log: %w", err)
		}
		return readCloser{Reader: bufio.NewReaderSize(zr, 256<<10), close: func() error {
			return errors.Join(zr.Close(), closer.Close())
		}}, nil
	}
	return readCloser{Reader: br, close: closer.Close}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// lineReader yields lines with their 1-based numbers, without allocating per line.
type lineReader struct {
	r    *bufio.Reader
	long []byte // assembles a line longer than the bufio buffer
	n    int64
}

func newLineReader(r io.Reader) *lineReader {
	br, ok := r.(*bufio.Reader)
	if !ok || br.Size() < 64<<10 {
		br = bufio.NewReaderSize(r, 256<<10)
	}
	return &lineReader{r: br}
}

// next returns the next line without its line ending. tooLong reports a line over maxLineBytes
// (its content is not returned). At the end of input it returns io.EOF.
func (l *lineReader) next() (line []byte, tooLong bool, err error) {
	b, err := l.r.ReadSlice('\n')
	if err == nil || (errors.Is(err, io.EOF) && len(b) > 0) {
		l.n++
		return bytes.TrimRight(b, "\r\n"), false, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, false, err
	}
	l.long = append(l.long[:0], b...)
	for {
		b, err = l.r.ReadSlice('\n')
		if len(l.long)+len(b) > maxLineBytes {
			l.long = l.long[:0]
			for errors.Is(err, bufio.ErrBufferFull) { // discard the rest of the line
				_, err = l.r.ReadSlice('\n')
			}
			l.n++
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, false, err
			}
			return nil, true, nil
		}
		l.long = append(l.long, b...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, false, err
		}
		l.n++
		return bytes.TrimRight(l.long, "\r\n"), false, nil
	}
}
