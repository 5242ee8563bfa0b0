// Package audit writes and verifies Switchyard's audit log: one JSON line per client request
// (who called, with which key, for which model, where it went, what it cost), each line holding
// the SHA-256 of the line before it, so that an edited, removed or reordered line shows. It must
// never hold prompt or answer text: the Line type has no field for either.
//
// Writing never blocks a request: Log.Record queues the line, and when the queue is full the
// line is dropped and counted; the next line written says how many were lost (Line.Lost), and
// Log.Lost counts them for a metric.
package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Line is one client request, in the contract's format. Seq and Lost are Switchyard's additions:
// Seq numbers the lines of a chain (so verify tells a removed line from an edited one), Lost
// says how many lines before this one were dropped because the writer fell behind.
type Line struct {
	TS        time.Time      `json:"ts"`
	RequestID string         `json:"requestId"`
	Client    string         `json:"client"`
	KeyID     string         `json:"keyId,omitempty"`
	Model     string         `json:"model,omitempty"`
	Policy    string         `json:"policy,omitempty"`
	Attempts  []Attempt      `json:"attempts"`
	Status    int            `json:"status"`
	Reason    string         `json:"reason,omitempty"`
	Tokens    Tokens         `json:"tokens"`
	Residency string         `json:"residency,omitempty"`
	PII       map[string]int `json:"pii,omitempty"`
	Seq       uint64         `json:"seq"`
	Lost      uint64         `json:"lost,omitempty"`
	Prev      string         `json:"prev"`

	// ServedModel is the model that answered, when one did: a fallbackModels or
	// contextOverflowModels hop answers for another model than the one requested.
	ServedModel string `json:"servedModel,omitempty"`
	// SkippedModels are the fallback and overflow hops passed over because the client may not
	// call them.
	SkippedModels []string `json:"skippedModels,omitempty"`
}

// Attempt is one upstream attempt of a request.
type Attempt struct {
	Channel string `json:"channel"`
	Status  int    `json:"status"`
	Outcome string `json:"outcome"`
	Ms      int64  `json:"ms"`
}

// Tokens are the request's tokens as the provider reported them. Estimated marks a recovered
// stream whose broken parts reported none: their share is the gateway's estimate (the sum the
// client's usage shows; docs/streams.md).
type Tokens struct {
	Prompt     int64 `json:"prompt"`
	Completion int64 `json:"completion"`
	Estimated  bool  `json:"estimated,omitempty"`
}

// Sum is the chain hash of a line: the hex SHA-256 of its bytes without the newline.
func Sum(line []byte) string {
	s := sha256.Sum256(line)
	return hex.EncodeToString(s[:])
}

// Options configure a Log.
type Options struct {
	// Path is the file to append to, or "-" for standard output (no rotation then).
	Path string
	// MaxBytes rotates the file when a line would take it past this size (default 100 MiB);
	// rotated files are Path.1 (newest) … Path.Keep.
	MaxBytes int64
	// Keep is the number of rotated files kept (default 5).
	Keep int
	// Queue is the number of lines held for the writer (default 8192).
	Queue int
	// Stdout replaces os.Stdout for Path "-" (tests).
	Stdout io.Writer
	// OnError is told about a failed write (the lines are then counted as lost).
	OnError func(error)
}

// Log is an audit log being written.
type Log struct {
	opts  Options
	queue chan *Line
	done  chan struct{}
	lost  atomic.Uint64 // dropped since the last line written
	total atomic.Uint64 // dropped since start (metric)

	// The writer goroutine's own state.
	w    io.Writer
	f    *os.File
	size int64
	seq  uint64
	prev string

	closeOnce sync.Once
}

// Open opens (or continues) the audit log at opts.Path: an existing file's last line is read so
// that the chain goes on from it.
func Open(opts Options) (*Log, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 100 << 20
	}
	if opts.Keep <= 0 {
		opts.Keep = 5
	}
	if opts.Queue <= 0 {
		opts.Queue = 8192
	}
	l := &Log{opts: opts, queue: make(chan *Line, opts.Queue), done: make(chan struct{})}
	if opts.Path == "-" {
		l.w = opts.Stdout
		if l.w == nil {
			l.w = os.Stdout
		}
	} else {
		if err := l.resume(); err != nil {
			return nil, err
		}
		if err := l.openFile(); err != nil {
			return nil, err
		}
	}
	go l.run()
	return l, nil
}

// resume reads the chain's head from the current file, or from the newest rotated one when the
// current file is empty or missing.
func (l *Log) resume() error {
	for _, p := range []string{l.opts.Path, l.opts.Path + ".1"} {
		last, err := lastLine(p)
		if errors.Is(err, os.ErrNotExist) || (err == nil && last == nil) {
			continue
		}
		if err != nil {
			return fmt.Errorf("failed to read the audit log %s to continue its chain: %w", p, err)
		}
		var h struct {
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal(last, &h); err != nil {
			return fmt.Errorf("the last line of the audit log %s is not an audit line (%v); move the file away to start a new chain", p, err)
		}
		l.seq, l.prev = h.Seq, Sum(last)
		return nil
	}
	return nil
}

// lastLine returns a file's last non-empty line (nil for an empty file). A line cut short by a
// crash (no newline) is not a line: the next write starts on a new line after it.
func lastLine(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	const tail = 1 << 20 // an audit line is well under a kilobyte or two
	off := max(st.Size()-tail, 0)
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	} else {
		return nil, nil
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	return b, nil
}

func (l *Log) openFile() error {
	f, err := os.OpenFile(l.opts.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("failed to open the audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("failed to open the audit log: %w", err)
	}
	l.f, l.w, l.size = f, f, st.Size()
	if l.size > 0 {
		// A crash may have left a partial last line; make sure the next line starts on its own.
		var b [1]byte
		if _, err := f.ReadAt(b[:], l.size-1); err == nil && b[0] != '\n' {
			n, _ := f.Write([]byte{'\n'})
			l.size += int64(n)
		}
	}
	return nil
}

// Record queues a line. It never blocks: when the writer is behind by Options.Queue lines the
// line is dropped, and the next line written records the count.
func (l *Log) Record(line *Line) {
	if l == nil {
		return
	}
	select {
	case l.queue <- line:
	default:
		l.lost.Add(1)
		l.total.Add(1)
	}
}

// Lost is the number of lines dropped since the log was opened.
func (l *Log) Lost() uint64 {
	if l == nil {
		return 0
	}
	return l.total.Load()
}

// Close writes the queued lines and closes the file.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.closeOnce.Do(func() { close(l.queue) })
	<-l.done
	if l.f != nil {
		return l.f.Close()
	}
	return nil
}

func (l *Log) run() {
	defer close(l.done)
	bw := bufio.NewWriterSize(nil, 64<<10)
	for line := range l.queue {
		bw.Reset(l.w)
		l.write(bw, line)
		// Drain what is queued already into the same buffer: one write for a burst.
		for more := true; more; {
			select {
			case next, ok := <-l.queue:
				if !ok {
					more = false
					break
				}
				l.write(bw, next)
			default:
				more = false
			}
		}
		if err := bw.Flush(); err != nil && l.opts.OnError != nil {
			l.opts.OnError(err)
		}
	}
}

// write appends one line to bw, rotating first when it would take the file past MaxBytes.
func (l *Log) write(bw *bufio.Writer, line *Line) {
	line.Lost = l.lost.Swap(0)
	line.Seq = l.seq + 1
	line.Prev = l.prev
	b, err := json.Marshal(line)
	if err != nil {
		l.lost.Add(1)
		l.total.Add(1)
		return
	}
	if l.f != nil && l.size > 0 && l.size+int64(len(b))+1 > l.opts.MaxBytes {
		if err := bw.Flush(); err != nil && l.opts.OnError != nil {
			l.opts.OnError(err)
		}
		if err := l.rotate(); err != nil {
			if l.opts.OnError != nil {
				l.opts.OnError(err)
			}
		}
		bw.Reset(l.w)
	}
	_, _ = bw.Write(b)
	_ = bw.WriteByte('\n')
	l.size += int64(len(b)) + 1
	l.seq, l.prev = line.Seq, Sum(b)
}

// rotate moves Path to Path.1 (and Path.1 to Path.2, …, dropping the oldest) and opens a new
// Path. The chain goes on: the new file's first line holds the hash of the old file's last.
func (l *Log) rotate() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("failed to close the audit log for rotation: %w", err)
	}
	p := l.opts.Path
	_ = os.Remove(p + "." + strconv.Itoa(l.opts.Keep))
	for i := l.opts.Keep - 1; i >= 1; i-- {
		_ = os.Rename(p+"."+strconv.Itoa(i), p+"."+strconv.Itoa(i+1))
	}
	if err := os.Rename(p, p+".1"); err != nil {
		return fmt.Errorf("failed to rotate the audit log: %w", err)
	}
	return l.openFile()
}
