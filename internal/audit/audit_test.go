package audit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func writeLines(t *testing.T, opts Options, n int) *Log {
	t.Helper()
	l, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		l.Record(&Line{TS: time.Unix(int64(i), 0).UTC(), RequestID: "r-" + string(rune('a'+i%26)), Client: "ns/c", KeyID: "3f9a1c2e",
			Model: "gpt-4o", Attempts: []Attempt{{Channel: "ns/a", Status: 200, Outcome: "success", Ms: 5}}, Status: 200,
			Tokens: Tokens{Prompt: 3, Completion: 4}})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return l
}

func lines(t *testing.T, path string) [][]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

func rewrite(t *testing.T, path string, ls [][]byte) {
	if err := os.WriteFile(path, append(bytes.Join(ls, []byte("\n")), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestChainVerifies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	writeLines(t, Options{Path: path}, 10)
	// Reopened, the chain continues from the last line.
	writeLines(t, Options{Path: path}, 5)
	rep, err := Verify(path)
	if err != nil {
		t.Fatal(err)
	}
	ls := lines(t, path)
	if rep.Lines != 15 || rep.FirstPrev != "" || rep.Head != Sum(ls[len(ls)-1]) || !rep.Ended {
		t.Fatalf("report %+v", rep)
	}
}

func TestVerifyNamesTheBreak(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func([][]byte) [][]byte
		kind   string
		line   int
	}{
		{"edited", func(ls [][]byte) [][]byte {
			ls[3] = bytes.Replace(ls[3], []byte(`"completion":4`), []byte(`"completion":1`), 1)
			return ls
		}, "edited", 4},
		{"removed", func(ls [][]byte) [][]byte { return append(ls[:5:5], ls[6:]...) }, "removed", 6},
		{"reordered", func(ls [][]byte) [][]byte { ls[6], ls[7] = ls[7], ls[6]; return ls }, "removed", 7},
		{"moved back", func(ls [][]byte) [][]byte {
			out := append([][]byte{}, ls[:3]...)
			out = append(out, ls[8])
			return append(out, ls[3:8]...)
		}, "removed", 4},
		{"malformed", func(ls [][]byte) [][]byte { ls[2] = []byte("not json"); return ls }, "malformed", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			writeLines(t, Options{Path: path}, 10)
			rewrite(t, path, tc.tamper(lines(t, path)))
			_, err := Verify(path)
			var b *Break
			if !errors.As(err, &b) {
				t.Fatalf("Verify = %v, want a break", err)
			}
			if b.Kind != tc.kind || b.Line != tc.line {
				t.Fatalf("break %v (%s at line %d), want %s at line %d", b, b.Kind, b.Line, tc.kind, tc.line)
			}
		})
	}
}

// A line swapped with the next one is the removal of one line (seq jumps) at the earlier spot;
// a line whose seq goes back is reported as reordered.
func TestVerifyReordered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	writeLines(t, Options{Path: path}, 6)
	ls := lines(t, path)
	rewrite(t, path, append(append([][]byte{}, ls[:4]...), ls[5], ls[4]))
	_, err := Verify(path)
	var b *Break
	if !errors.As(err, &b) || b.Line != 5 {
		t.Fatalf("break %v, want at line 5", err)
	}
	// Seq going back: line 5 (seq 6) then line 6 (seq 5).
	_, err = Verify(path)
	if !strings.Contains(err.Error(), "removed") {
		t.Fatalf("%v", err)
	}
	rewrite(t, path, append(append([][]byte{}, ls[:5]...), ls[2]))
	_, err = Verify(path)
	if !errors.As(err, &b) || b.Kind != "reordered" || b.Line != 6 {
		t.Fatalf("break %v, want reordered at line 6", err)
	}
}

// Rotation by size continues the chain: the files verify together, oldest first, and a file left
// out in the middle shows.
func TestRotationContinuesTheChain(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	writeLines(t, Options{Path: path, MaxBytes: 2000, Keep: 20}, 40)
	var files []string
	for i := 20; i >= 1; i-- {
		p := path + "." + itoa(i)
		if _, err := os.Stat(p); err == nil {
			files = append(files, p)
		}
	}
	if len(files) < 3 {
		t.Fatalf("rotated into %d files, want several", len(files))
	}
	files = append(files, path)
	for _, f := range files {
		if st, _ := os.Stat(f); st.Size() > 2000 {
			t.Fatalf("%s is %d bytes, over MaxBytes", f, st.Size())
		}
	}
	rep, err := Verify(files...)
	if err != nil || rep.Lines != 40 {
		t.Fatalf("verify across files: %v %+v", err, rep)
	}
	_, err = Verify(append(append([]string{}, files[:1]...), files[2:]...)...)
	var b *Break
	if !errors.As(err, &b) || b.Kind != "removed" || b.File != files[2] || b.Line != 1 {
		t.Fatalf("a missing middle file: %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// A writer that falls behind drops lines instead of blocking the request, and the next line
// says how many.
func TestLostLinesAreRecorded(t *testing.T) {
	var out bytes.Buffer
	blocked := make(chan struct{})
	w := &gateWriter{gate: blocked, w: &out}
	l, err := Open(Options{Path: "-", Stdout: w, Queue: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		l.Record(&Line{RequestID: "r", Status: 200})
	}
	// The writer holds the line it took and what it drained from the queue with it (at most
	// two), and two more wait in the queue: at least 5 are lost.
	lost := l.Lost()
	if lost < 5 {
		t.Fatalf("lost %d, want at least 5", lost)
	}
	close(blocked)
	l.Record(&Line{RequestID: "after", Status: 200})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "a.log")
	if err := os.WriteFile(p, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(p)
	if err != nil {
		t.Fatal(err)
	}
	lost = l.Lost() // the last line may have found the queue still full
	if rep.Lost != lost || uint64(rep.Lines)+lost != 11 {
		t.Fatalf("report %+v, lost %d: every request is a line or counted as lost", rep, lost)
	}
}

type gateWriter struct {
	gate chan struct{}
	w    *bytes.Buffer
}

func (g *gateWriter) Write(b []byte) (int, error) {
	<-g.gate
	return g.w.Write(b)
}
