// Package audit writes and verifies Switchyard's audit log: one JSON line per client request
// (who called, with which key, for which model, where it went, what it cost), each line holding
// the SHA-256 of the line before it, so that an edited, removed or reordered line shows. It must
// never hold prompt or answer text: the Line type has no field for either.
//
// Writing never blocks a request: Log.Record queues the line, and when the queue is full the
// line is dropped and counted; the next line written says how many were lost (Line.Lost), and
// Log.Lost counts them for a metric. A write that fails loses its lines too, never the chain:
// the sequence goes on from the last line that reached the file, and when writing works again a
// gap record says how many lines were lost (Log.Writable says whether it works now).
//
// Besides request lines the chain holds records (Line.Record): "start" begins a file or a new
// chain segment (a replica always starts, even when the file's tail cannot be continued; the
// record says why), "gap" counts lost lines, "end" closes a log that shut down cleanly. Verify
// uses them to tell a chain cut at its head or tail from one that began or ended there.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Line is one client request, in the contract's format, or one of the chain's records. Seq,
// Lost and Record are Switchyard's additions: Seq numbers the lines of a chain (so verify tells
// a removed line from an edited one), Lost says how many lines before this one were lost (the
// writer fell behind, or, on a gap record, its writes failed).
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

	// Record is empty on a request line, else RecordStart, RecordGap or RecordEnd; a record is
	// written as a recordLine (no request fields) and reads back into a Line.
	Record string `json:"record,omitempty"`
}

// recordLine is how a record is written: only what a record has.
type recordLine struct {
	TS     time.Time `json:"ts"`
	Record string    `json:"record"`
	Reason string    `json:"reason,omitempty"`
	Seq    uint64    `json:"seq"`
	Lost   uint64    `json:"lost,omitempty"`
	Prev   string    `json:"prev"`
}

// The records of a chain besides request lines.
const (
	// RecordStart begins a file (Reason StartRotated, or StartFile* after the file was moved
	// away under the writer), linked to the line before it, or a new chain segment that is not
	// (Reason StartUnreadableTail, StartUnreadableFile, and StartTornTail when nothing before
	// the torn line could be read).
	RecordStart = "start"
	// RecordGap follows lines lost to failed writes: Lost is their number. A torn line (a write
	// cut short) may stand right before it.
	RecordGap = "gap"
	// RecordEnd is the last record of a log closed cleanly.
	RecordEnd = "end"
)

// Why a start record was written.
const (
	// StartTornTail: the file ended in a line cut short (a crash or a full disk); the chain goes
	// on from the line before it when there is one.
	StartTornTail = "torn_tail"
	// StartUnreadableTail: the file's last line is not an audit line, or too long to read back
	// (written before lines were bounded): a new segment begins.
	StartUnreadableTail = "unreadable_tail"
	// StartUnreadableFile: the file could not be read: a new segment begins.
	StartUnreadableFile = "unreadable_file"
	// StartRotated begins the file that follows a rotation.
	StartRotated = "rotated"
	// StartFile* begin a file reopened because the one written was deleted, replaced or
	// truncated under the writer (Log.Reopened counts the reasons).
	StartFileDeleted   = "file_deleted"
	StartFileReplaced  = "file_replaced"
	StartFileTruncated = "file_truncated"
)

// Why the writer reopened its file (Log.Reopened).
const (
	ReopenDeleted    = "deleted"
	ReopenReplaced   = "replaced"
	ReopenTruncated  = "truncated"
	ReopenWriteError = "write_error"
)

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
	// Logger says when the writer starts a chain segment, reopens its file or writes again.
	Logger *slog.Logger
	// Now is the clock of the records' timestamps and of the file checks (default time.Now).
	Now func() time.Time
	// CheckEvery is how often, at most, the writer looks whether its file was deleted, replaced
	// or truncated under it (default 1s; it looks only when it has something to write).
	CheckEvery time.Duration
	// RetryEvery is how often a writer whose writes fail tries again while no line comes
	// (default 1s): readiness comes back without traffic.
	RetryEvery time.Duration

	// write replaces the file's Write (tests inject failures); retry replaces the RetryEvery
	// ticker's channel (tests tick it).
	write func(w io.Writer, b []byte) (int, error)
	retry <-chan time.Time
}

// Log is an audit log being written.
type Log struct {
	opts     Options
	queue    chan *Line
	done     chan struct{}
	lost     atomic.Uint64 // dropped from the queue since the last line encoded
	total    atomic.Uint64 // lost since start (metric)
	writable atomic.Bool

	mu       sync.Mutex
	segments map[string]uint64 // start records that began a new segment, by reason
	reopened map[string]uint64 // by reason

	// The writer goroutine's own state.
	w    io.Writer
	f    *os.File // nil for "-", or while the file cannot be opened
	size int64
	// seq and prev are the last line encoded; dseq and dprev the last one that reached the file.
	seq, dseq   uint64
	prev, dprev string
	start       *Line  // the start record the next batch begins with
	failed      uint64 // lines lost to failed writes since the last that worked
	torn        bool   // the file may end in a partial line
	checked     time.Time
	buf         []byte
	marks       []mark
	closeErr    error
	closeOnce   sync.Once
}

// batchBytes bounds a batch: a burst is written in writes of about this size.
const batchBytes = 64 << 10

// mark is one record in the batch being written.
type mark struct {
	end    int // offset after its newline in buf
	seq    uint64
	sum    string
	record string // Line.Record; "" for a request line, "-" for the newline ending a torn line
	lost   uint64 // the request line's Lost (queue drops it carried)
}

// Open opens (or continues) the audit log at opts.Path: an existing file's last line is read so
// that the chain goes on from it. It fails only on bad options: a tail it cannot continue begins
// a new chain segment (a start record, a log line, Log.Segments), and a file it cannot open is a
// log that is not writable yet (Log.Writable) and keeps trying.
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
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CheckEvery <= 0 {
		opts.CheckEvery = time.Second
	}
	if opts.RetryEvery <= 0 {
		opts.RetryEvery = time.Second
	}
	if opts.write == nil {
		opts.write = func(w io.Writer, b []byte) (int, error) { return w.Write(b) }
	}
	if opts.Path == "" {
		return nil, errors.New("the audit log needs a path, or - for standard output")
	}
	l := &Log{opts: opts, queue: make(chan *Line, opts.Queue), done: make(chan struct{}),
		segments: map[string]uint64{}, reopened: map[string]uint64{}}
	if opts.Path == "-" {
		l.w = opts.Stdout
		if l.w == nil {
			l.w = os.Stdout
		}
		l.writable.Store(true)
	} else {
		l.resume()
		if err := l.openFile(); err != nil {
			l.fail(err)
		} else {
			l.writable.Store(true)
		}
	}
	go l.run()
	return l, nil
}

// resume finds where the chain goes on: the last line of the current file, or of the newest
// rotated one when the current file is empty or missing. What it cannot continue becomes the
// start record of a new segment.
func (l *Log) resume() {
	for i, p := range []string{l.opts.Path, l.opts.Path + ".1"} {
		t, err := readTail(p)
		if errors.Is(err, os.ErrNotExist) || (err == nil && t.empty) {
			continue
		}
		switch {
		case err != nil:
			l.newSegment(StartUnreadableFile, p, err)
		case t.last == nil:
			l.newSegment(t.reason, p, errors.New(t.detail))
		default:
			l.seq, l.prev = t.seq, Sum(t.last)
			l.dseq, l.dprev = l.seq, l.prev
			switch {
			case t.reason != "":
				// Linked: the chain goes on past the torn line, and the record says it is there.
				l.start = &Line{Record: RecordStart, Reason: t.reason}
				l.countSegment(t.reason, p, errors.New(t.detail))
			case i == 1:
				// The current file is new after a rotation that stopped before its first record.
				l.start = &Line{Record: RecordStart, Reason: StartRotated}
			}
		}
		return
	}
}

func (l *Log) newSegment(reason, path string, cause error) {
	l.seq, l.prev, l.dseq, l.dprev = 0, "", 0, ""
	l.start = &Line{Record: RecordStart, Reason: reason}
	l.countSegment(reason, path, cause)
}

func (l *Log) countSegment(reason, path string, cause error) {
	l.mu.Lock()
	l.segments[reason]++
	l.mu.Unlock()
	if l.opts.Logger != nil {
		l.opts.Logger.Warn("The audit log's tail cannot be continued as it is: a start record says why",
			"file", path, "reason", reason, "error", cause.Error())
	}
}

// tailBytes is how much of a file's end resume reads: far more than any bounded line.
const tailBytes = 1 << 20

// tail is what resume learns from a file's end.
type tail struct {
	empty  bool
	last   []byte // the last whole audit line, if one could be read
	seq    uint64
	reason string // why the chain cannot simply go on ("" when it can)
	detail string
}

// readTail reads a file's last whole line. A line cut short (no newline) is torn: the chain goes
// on from the line before it, past a start record that says so.
func readTail(path string) (tail, error) {
	f, err := os.Open(path)
	if err != nil {
		return tail{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return tail{}, err
	}
	off := max(st.Size()-tailBytes, 0)
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return tail{}, err
	}
	if len(bytes.TrimSpace(b)) == 0 && off == 0 {
		return tail{empty: true}, nil
	}
	var t tail
	if b[len(b)-1] != '\n' {
		t.reason, t.detail = StartTornTail, "the last line has no newline: a write was cut short"
		i := bytes.LastIndexByte(b, '\n')
		if i < 0 {
			if off == 0 {
				return t, nil // the torn line is all there is: a new segment
			}
			return tail{reason: StartUnreadableTail, detail: fmt.Sprintf("a torn last line longer than %d bytes", tailBytes)}, nil
		}
		b = b[:i+1]
	}
	b = b[:len(b)-1]
	i := bytes.LastIndexByte(b, '\n')
	if i < 0 && off > 0 {
		return tail{reason: StartUnreadableTail, detail: fmt.Sprintf("the last line is longer than %d bytes", tailBytes)}, nil
	}
	line := b[i+1:]
	var h struct {
		Seq  *uint64 `json:"seq"`
		Prev *string `json:"prev"`
	}
	if err := json.Unmarshal(line, &h); err != nil || h.Seq == nil || h.Prev == nil {
		return tail{reason: StartUnreadableTail, detail: "the last line is not an audit line"}, nil
	}
	t.last, t.seq = line, *h.Seq
	return t, nil
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
	l.f, l.w, l.size, l.torn = f, f, st.Size(), false
	if l.size > 0 {
		// A crash may have left a partial last line; the next line starts on its own.
		r, err := os.Open(l.opts.Path)
		if err == nil {
			var b [1]byte
			if _, err := r.ReadAt(b[:], l.size-1); err == nil && b[0] != '\n' {
				l.torn = true
			}
			r.Close()
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

// Lost is the number of lines lost since the log was opened: dropped from a full queue, or in
// a write that failed.
func (l *Log) Lost() uint64 {
	if l == nil {
		return 0
	}
	return l.total.Load()
}

// Writable reports whether the last write reached the file (true for a nil log: nothing to
// write). A proxy that must not serve without its audit trail stops while it is false.
func (l *Log) Writable() bool { return l == nil || l.writable.Load() }

// Segments counts the chain segments begun because a tail could not be continued, by reason.
func (l *Log) Segments() map[string]uint64 {
	return l.counts(func() map[string]uint64 { return l.segments })
}

// Reopened counts the times the writer reopened its file, by reason.
func (l *Log) Reopened() map[string]uint64 {
	return l.counts(func() map[string]uint64 { return l.reopened })
}

func (l *Log) counts(m func() map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	if l == nil {
		return out
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, v := range m() {
		out[k] = v
	}
	return out
}

// Close writes the queued lines and an end record, and closes the file. It returns the error of
// the last write when it failed (those lines are lost).
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.closeOnce.Do(func() { close(l.queue) })
	<-l.done
	err := l.closeErr
	if l.f != nil {
		if cerr := l.f.Close(); err == nil {
			err = cerr
		}
		l.f = nil
	}
	return err
}

func (l *Log) run() {
	defer close(l.done)
	retry := l.opts.retry
	if retry == nil {
		t := time.NewTicker(l.opts.RetryEvery)
		defer t.Stop()
		retry = t.C
	}
	if l.start != nil || l.torn {
		l.begin()
		l.commit()
	}
	for {
		select {
		case line, ok := <-l.queue:
			if !ok {
				l.begin()
				l.encode(&Line{Record: RecordEnd})
				l.commit()
				if !l.writable.Load() {
					l.closeErr = errors.New("the audit log's last write failed: its last lines and end record are lost")
				}
				return
			}
			l.begin()
			l.add(line)
			// What is queued already goes in the same write: a burst in few writes, bounded by
			// the queue's size so that a steady stream still gets flushed.
			for n := len(l.queue); n > 0; n-- {
				next, ok := <-l.queue
				if !ok {
					break
				}
				if len(l.buf) >= batchBytes {
					l.commit()
					l.begin()
				}
				l.add(next)
			}
			l.commit()
		case <-retry:
			if !l.writable.Load() {
				l.begin()
				l.commit()
			}
		}
	}
}

// begin starts a batch: it checks the file (reopening it when it was moved away or writes
// failed) and puts first what the file needs before new lines: the newline that ends a torn
// line, the start record, the gap record.
func (l *Log) begin() {
	l.buf, l.marks = l.buf[:0], l.marks[:0]
	l.checkFile()
	if l.torn {
		l.buf = append(l.buf, '\n')
		l.marks = append(l.marks, mark{end: len(l.buf), record: "-"})
	}
	if l.start != nil {
		s := *l.start
		l.encode(&s)
	}
	if l.failed > 0 {
		l.encode(&Line{Record: RecordGap, Reason: "write_failed", Lost: l.failed})
	}
}

// checkFile reopens the file when it was deleted, replaced or truncated under the writer, or
// after a failed write; at most every CheckEvery while writes work.
func (l *Log) checkFile() {
	if l.opts.Path == "-" {
		return
	}
	now := l.opts.Now()
	if l.writable.Load() && l.f != nil && now.Sub(l.checked) < l.opts.CheckEvery {
		return
	}
	l.checked = now
	reason := ReopenWriteError // no file, or one that cannot even be stat'ed
	if l.f != nil {
		if mine, err := l.f.Stat(); err == nil {
			cur, err := os.Stat(l.opts.Path)
			switch {
			case errors.Is(err, os.ErrNotExist):
				reason = ReopenDeleted
			case err == nil && !os.SameFile(mine, cur):
				reason = ReopenReplaced
			case err == nil && cur.Size() < l.size:
				reason = ReopenTruncated
			case l.writable.Load():
				reason = ""
			}
		}
	}
	if reason == "" {
		return
	}
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
	if err := l.openFile(); err != nil {
		l.fail(err)
		return
	}
	l.mu.Lock()
	l.reopened[reason]++
	l.mu.Unlock()
	start := map[string]string{ReopenDeleted: StartFileDeleted, ReopenReplaced: StartFileReplaced, ReopenTruncated: StartFileTruncated}[reason]
	if start != "" {
		// The lines before are elsewhere now (or gone): this file starts with a record that
		// links it to them.
		l.start = &Line{Record: RecordStart, Reason: start}
		if l.opts.Logger != nil {
			l.opts.Logger.Warn("Reopened the audit log: the file was moved away under the writer", "file", l.opts.Path, "reason", reason)
		}
	}
}

// add encodes a request line into the batch, rotating first when it would take the file past
// MaxBytes.
func (l *Log) add(line *Line) {
	line.bound()
	line.Lost = l.lost.Swap(0)
	line.Record = ""
	n, seq, prev := len(l.buf), l.seq, l.prev
	if !l.encode(line) {
		return
	}
	if l.f != nil && l.size+int64(n) > 0 && l.size+int64(len(l.buf)) > l.opts.MaxBytes {
		// Undo, write what is before it, rotate, and encode it again after the new file's start.
		l.buf, l.marks, l.seq, l.prev = l.buf[:n], l.marks[:len(l.marks)-1], seq, prev
		l.commit()
		if l.writable.Load() {
			l.rotate()
		}
		l.begin()
		l.encode(line)
	}
}

// encode appends a line or record to the batch as the next of the chain.
func (l *Log) encode(line *Line) bool {
	line.Seq, line.Prev = l.seq+1, l.prev
	var b []byte
	var err error
	if line.Record == "" {
		b, err = json.Marshal(line)
	} else {
		if line.TS.IsZero() {
			line.TS = l.opts.Now().UTC()
		}
		b, err = json.Marshal(recordLine{TS: line.TS, Record: line.Record, Reason: line.Reason, Seq: line.Seq, Lost: line.Lost, Prev: line.Prev})
	}
	if err != nil {
		l.lost.Add(1)
		l.total.Add(1)
		return false
	}
	sum := Sum(b)
	l.buf = append(append(l.buf, b...), '\n')
	l.marks = append(l.marks, mark{end: len(l.buf), seq: line.Seq, sum: sum, record: line.Record, lost: line.Lost})
	l.seq, l.prev = line.Seq, sum
	return true
}

// commit writes the batch in one write. The records that reached the file are the chain; those
// that did not are lost (request lines counted, records written again by the next batch).
func (l *Log) commit() {
	if len(l.buf) == 0 {
		return
	}
	var n int
	var err error
	if l.w == nil {
		err = errors.New("the audit log is not open")
	} else {
		n, err = l.opts.write(l.w, l.buf)
	}
	if err == nil && n < len(l.buf) {
		err = io.ErrShortWrite
	}
	l.size += int64(n)
	done := 0
	for _, m := range l.marks {
		if m.end > n {
			break
		}
		done = m.end
		switch m.record {
		case "-":
			l.torn = false
		case RecordStart:
			l.start = nil
		case RecordGap:
			l.failed = 0
		}
		if m.record != "-" {
			l.dseq, l.dprev = m.seq, m.sum
		}
	}
	if err == nil {
		if !l.writable.Swap(true) && l.opts.Logger != nil {
			l.opts.Logger.Info("The audit log is written again", "file", l.opts.Path)
		}
		l.buf, l.marks = l.buf[:0], l.marks[:0]
		return
	}
	for _, m := range l.marks {
		if m.end > done && m.record == "" {
			l.failed += 1 + m.lost // the queue drops it carried were in no line either
			l.total.Add(1)
		}
	}
	l.torn = l.torn || n > done
	l.seq, l.prev = l.dseq, l.dprev
	l.buf, l.marks = l.buf[:0], l.marks[:0]
	l.fail(err)
}

func (l *Log) fail(err error) {
	l.writable.Store(false)
	if l.opts.OnError != nil {
		l.opts.OnError(err)
	}
}

// rotate moves Path to Path.1 (and Path.1 to Path.2, …, dropping the oldest) and opens a new
// Path. The chain goes on: the new file's start record holds the hash of the old file's last.
func (l *Log) rotate() {
	if err := l.f.Close(); err != nil {
		l.fail(fmt.Errorf("failed to close the audit log for rotation: %w", err))
	}
	l.f = nil
	p := l.opts.Path
	_ = os.Remove(p + "." + strconv.Itoa(l.opts.Keep))
	for i := l.opts.Keep - 1; i >= 1; i-- {
		_ = os.Rename(p+"."+strconv.Itoa(i), p+"."+strconv.Itoa(i+1))
	}
	rotated := os.Rename(p, p+".1")
	if rotated != nil && l.opts.OnError != nil {
		l.opts.OnError(fmt.Errorf("failed to rotate the audit log: %w", rotated))
	}
	if rotated == nil {
		// Written when the new file opens, now or on a retry.
		l.start = &Line{Record: RecordStart, Reason: StartRotated}
	}
	if err := l.openFile(); err != nil {
		l.fail(err)
	}
}
