package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

func decode(t *testing.T, b []byte) Line {
	t.Helper()
	var l Line
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("line %.200q: %v", b, err)
	}
	return l
}

func reqLine(model string) *Line {
	return &Line{RequestID: "r", Client: "ns/c", Model: model, Status: 403, Reason: "model_not_allowed", Attempts: []Attempt{}}
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		in  string
		max int
	}{{"short", 256}, {strings.Repeat("a", 257), 256}, {strings.Repeat("é", 300), 256}, {strings.Repeat("x", 5000), 1024}, {"abcdef", 3}} {
		out := Truncate(tc.in, tc.max)
		if len(tc.in) <= tc.max {
			if out != tc.in {
				t.Fatalf("Truncate(%q) = %q, want it unchanged", tc.in, out)
			}
			continue
		}
		if len(out) > max(tc.max, len(TruncatedMark)) || !strings.HasSuffix(out, TruncatedMark) || !utf8.ValidString(out) ||
			!strings.HasPrefix(tc.in, strings.TrimSuffix(out, TruncatedMark)) {
			t.Fatalf("Truncate(%d bytes, %d) = %q", len(tc.in), tc.max, out)
		}
	}
}

// One request with a 1.2 MiB model name used to make the next start fail (the resume read only
// the last MiB): the line is bounded, and the replica starts and goes on with the chain.
func TestOversizedModelThenRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	l.Record(reqLine(strings.Repeat("m", 1200<<10)))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ls := lines(t, path)
	got := decode(t, ls[0])
	if len(got.Model) > MaxField || !strings.HasSuffix(got.Model, TruncatedMark) || len(ls[0]) > 2*MaxField+400 {
		t.Fatalf("model of %d bytes in a line of %d bytes", len(got.Model), len(ls[0]))
	}
	l, err = Open(Options{Path: path})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	l.Record(reqLine("gpt-4o"))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(l.Segments()) != 0 {
		t.Fatalf("segments %v: the chain goes on", l.Segments())
	}
	rep, err := Verify(path)
	if err != nil || rep.Lines != 2 || len(rep.Segments) != 1 {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// Whatever the file's tail, Open starts: it goes on with the chain where it can, and begins a new
// segment, saying why in a start record and in Segments, where it cannot.
func TestOpenResumesFromAnyTail(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tail     string // appended after a closed chain of 3 lines
		reason   string
		linked   bool // the start record continues the chain
		segments int  // in verify's report
	}{
		{"huge last line", `{"ts":"2026-01-01T00:00:00Z","model":"` + strings.Repeat("m", 1200<<10) + `","seq":5,"prev":"x"}` + "\n", StartUnreadableTail, false, 2},
		{"torn tail", `{"ts":"2026-01-01T00:00:00Z","requestId":"r","cli`, StartTornTail, true, 1},
		{"huge torn tail", `{"model":"` + strings.Repeat("m", 1200<<10), StartUnreadableTail, false, 2},
		// The line the writer could not read is acknowledged by the start record after it.
		{"not an audit line", "hello\n", StartUnreadableTail, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			writeLines(t, Options{Path: path}, 3)
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.WriteString(tc.tail)
			f.Close()
			var logs bytes.Buffer
			l, err := Open(Options{Path: path, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			l.Record(reqLine("gpt-4o"))
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if l.Segments()[tc.reason] != 1 {
				t.Fatalf("segments %v, want one %s", l.Segments(), tc.reason)
			}
			if !strings.Contains(logs.String(), `"reason":"`+tc.reason+`"`) || logs.Len() > 4096 {
				t.Fatalf("log: %.500s", logs.String())
			}
			ls := lines(t, path)
			start := decode(t, ls[len(ls)-3])
			if start.Record != RecordStart || start.Reason != tc.reason || (start.Prev != "") != tc.linked {
				t.Fatalf("start record %s", ls[len(ls)-3])
			}
			if tc.linked && (start.Seq != 5 || start.Prev != Sum(ls[3])) {
				t.Fatalf("start record %s does not go on from %s", ls[len(ls)-3], ls[3])
			}
			if !tc.linked && start.Seq != 1 {
				t.Fatalf("a new segment's start %s", ls[len(ls)-3])
			}
			if tc.name == "huge last line" {
				return // verify rightly finds the foreign line's chain broken
			}
			rep, err := Verify(path)
			if err != nil || len(rep.Segments) != tc.segments || rep.Lines != 4 {
				t.Fatalf("verify: %v %+v", err, rep)
			}
		})
	}
}

// A file that cannot be read or opened does not stop the replica: the log starts not writable,
// a new segment is counted, and the lines of the meantime are counted as lost.
func TestOpenUnreadableFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.Mkdir(path, 0o700); err != nil { // reads and opens for writing both fail
		t.Fatal(err)
	}
	l, err := Open(Options{Path: path})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if l.Writable() || l.Segments()[StartUnreadableFile] != 1 {
		t.Fatalf("writable %v, segments %v", l.Writable(), l.Segments())
	}
	l.Record(reqLine("a"))
	if err := l.Close(); err == nil || l.Lost() != 1 {
		t.Fatalf("Close = %v, lost %d", err, l.Lost())
	}
}

// faults makes the log's writes fail while on: after keep bytes (a partial write, as on a full
// disk), with ENOSPC.
type faults struct {
	mu   sync.Mutex
	on   bool
	keep int
}

func (f *faults) set(on bool, keep int) {
	f.mu.Lock()
	f.on, f.keep = on, keep
	f.mu.Unlock()
}

func (f *faults) write(w io.Writer, b []byte) (int, error) {
	f.mu.Lock()
	on, keep := f.on, f.keep
	f.mu.Unlock()
	if !on {
		return w.Write(b)
	}
	n, _ := w.Write(b[:min(keep, len(b))])
	return n, &os.PathError{Op: "write", Path: "audit.log", Err: syscall.ENOSPC}
}

// A write that fails loses its lines, counted, and not the chain: once writing works again a gap
// record says how many were lost, and the file verifies, a torn line included.
func TestWriteErrorThenRecovery(t *testing.T) {
	for _, keep := range []int{0, 40} {
		t.Run(map[int]string{0: "nothing written", 40: "torn line"}[keep], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			fs := &faults{}
			var errs int
			l, err := Open(Options{Path: path, write: fs.write, OnError: func(error) { errs++ }})
			if err != nil {
				t.Fatal(err)
			}
			l.Record(reqLine("before"))
			waitFor(t, func() bool { return len(readFile(t, path)) > 0 })
			fs.set(true, keep)
			for i := 0; i < 3; i++ {
				l.Record(reqLine("lost"))
			}
			waitFor(t, func() bool { return l.Lost() == 3 })
			if l.Writable() {
				t.Fatal("writable after failed writes")
			}
			fs.set(false, 0)
			l.Record(reqLine("after"))
			waitFor(t, l.Writable)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			rep, err := Verify(path)
			if err != nil {
				t.Fatalf("verify: %v\n%s", err, readFile(t, path))
			}
			if rep.Lines != 2 || rep.Gaps != 1 || rep.Lost != 3 || (rep.Torn >= 1) != (keep > 0) || l.Lost() != 3 || errs == 0 {
				t.Fatalf("report %+v, lost %d, errors %d\n%s", rep, l.Lost(), errs, readFile(t, path))
			}
		})
	}
}

func readFile(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return b
}

// waitFor waits for the writer goroutine to get somewhere (it runs on its own; no timing rule is
// tested), bounded.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 5000; i++ {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the writer did not get there")
}

// fakeClock is a settable time for the file checks.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// A file deleted, moved away or truncated under the writer is reopened, counted by reason, and
// the new file starts with a record linking it to the lines before.
func TestMovedFileIsReopened(t *testing.T) {
	for _, tc := range []struct {
		name, reopen, start string
		move                func(path string) string // returns the file holding the old lines, or ""
	}{
		{"deleted", ReopenDeleted, StartFileDeleted, func(p string) string { _ = os.Remove(p); return "" }},
		{"rotated by logrotate", ReopenReplaced, StartFileReplaced, func(p string) string {
			_ = os.Rename(p, p+".old")
			_ = os.WriteFile(p, nil, 0o600)
			return p + ".old"
		}},
		{"copytruncate", ReopenTruncated, StartFileTruncated, func(p string) string {
			b, _ := os.ReadFile(p)
			_ = os.WriteFile(p+".old", b, 0o600)
			_ = os.Truncate(p, 0)
			return p + ".old"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			clock := &fakeClock{t: time.Unix(1000, 0)}
			l, err := Open(Options{Path: path, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			l.Record(reqLine("a"))
			waitFor(t, func() bool { return len(readFile(t, path)) > 0 })
			old := tc.move(path)
			clock.Add(2 * time.Second)
			l.Record(reqLine("b"))
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if l.Reopened()[tc.reopen] != 1 {
				t.Fatalf("reopened %v, want %s", l.Reopened(), tc.reopen)
			}
			ls := lines(t, path)
			if s := decode(t, ls[0]); s.Record != RecordStart || s.Reason != tc.start || s.Seq != 2 {
				t.Fatalf("first line of the new file %s", ls[0])
			}
			rep, err := Verify(path)
			if err != nil || rep.Lines != 1 || rep.FirstStart != tc.start {
				t.Fatalf("verify the new file: %v %+v", err, rep)
			}
			if old != "" {
				if rep, err := Verify(old, path); err != nil || rep.Lines != 2 {
					t.Fatalf("verify old and new: %v %+v", err, rep)
				}
			}
		})
	}
}

// Verify fails on a chain cut at its head or tail, on an empty one, and names the covered range;
// --allow-tail-cut accepts a log still being written.
func TestVerifyTruncatedChain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tamper    func([][]byte) [][]byte
		allowTail bool
		kind      string // "" for ok
	}{
		{"intact", func(ls [][]byte) [][]byte { return ls }, false, ""},
		{"head cut", func(ls [][]byte) [][]byte { return ls[3:] }, false, BreakHeadCut},
		{"tail cut", func(ls [][]byte) [][]byte { return ls[:len(ls)-3] }, false, BreakTailCut},
		{"tail cut, allowed", func(ls [][]byte) [][]byte { return ls[:len(ls)-3] }, true, ""},
		{"torn last line, allowed", func(ls [][]byte) [][]byte {
			return append(ls[:len(ls)-1:len(ls)-1], ls[len(ls)-1][:10])
		}, true, ""},
		{"torn line in the middle", func(ls [][]byte) [][]byte { ls[4] = ls[4][:20]; return ls }, false, BreakMalformed},
		{"every line removed", func(ls [][]byte) [][]byte { return nil }, false, BreakEmpty},
		{"a gap no record explains", func(ls [][]byte) [][]byte { return append(ls[:4:4], ls[6:]...) }, false, BreakRemoved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			writeLines(t, Options{Path: path}, 8)
			ls := tc.tamper(lines(t, path))
			out := bytes.Join(ls, []byte("\n"))
			if len(ls) > 0 && !strings.HasPrefix(tc.name, "torn last") {
				out = append(out, '\n')
			}
			if err := os.WriteFile(path, out, 0o600); err != nil {
				t.Fatal(err)
			}
			rep, err := VerifyWith(VerifyOptions{AllowTailCut: tc.allowTail}, path)
			if tc.kind == "" {
				if err != nil || len(rep.Segments) != 1 || rep.Segments[0].From != 1 {
					t.Fatalf("verify: %v %+v", err, rep)
				}
				return
			}
			var b *Break
			if !errors.As(err, &b) || b.Kind != tc.kind {
				t.Fatalf("verify = %v, want %s", err, tc.kind)
			}
		})
	}
}

// After rotation the kept files verify on their own: each begins with a start record that links
// it to the file before, and leaving the oldest out is not a head cut.
func TestRotatedFilesVerifyWithoutTheOldest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	writeLines(t, Options{Path: path, MaxBytes: 2000, Keep: 2}, 40)
	rep, err := Verify(path+".2", path+".1", path)
	if err != nil || rep.FirstStart != StartRotated || rep.Segments[0].From <= 1 || rep.Segments[0].To != rep.Segments[0].From+uint64(rep.Records)-1 {
		t.Fatalf("verify the kept files: %v %+v", err, rep)
	}
}

// A log that cannot be written retries on its own: readiness comes back without a request.
func TestRetryWithoutTraffic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	tick := make(chan time.Time)
	l, err := Open(Options{Path: path, retry: tick})
	if err != nil {
		t.Fatal(err)
	}
	tick <- time.Time{} // still a directory: fails again
	if l.Writable() {
		t.Fatal("writable")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	tick <- time.Time{}
	waitFor(t, l.Writable)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(path)
	if err != nil || rep.FirstStart != StartUnreadableFile || rep.Records != 2 || l.Reopened()[ReopenWriteError] != 1 {
		t.Fatalf("verify: %v %+v, reopened %v", err, rep, l.Reopened())
	}
}
