package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Break is the first place a chain does not hold.
type Break struct {
	File string
	Line int // 1-based, within File
	// Kind is "edited", "removed", "reordered" or "malformed".
	Kind    string
	Message string
}

func (b *Break) Error() string { return fmt.Sprintf("%s:%d: %s", b.File, b.Line, b.Message) }

// Report is what Verify found in a chain that holds.
type Report struct {
	Lines int
	// Lost is the sum of the lines' lost counts: lines the writer dropped (and said so).
	Lost uint64
	// Head is the hash of the last line: compare it with a copy kept elsewhere to see that no
	// line was cut from the end.
	Head string
	// FirstPrev is the first line's prev: the head of the file before the oldest one given
	// ("" when the chain starts there).
	FirstPrev string
}

// Verify checks the chain across files given oldest first (the rotated files Path.N … Path.1,
// then Path). It returns the first break: the line that was edited (its hash no longer matches
// what the next line recorded, and the next line's number follows it), the place lines were
// removed (a gap in the numbers), a line out of order (its number does not grow), or a line that
// is not an audit line. The last line's own edit cannot show in a chain (no line comes after it):
// Report.Head is the hash to compare.
func Verify(files ...string) (*Report, error) {
	rep := &Report{}
	type prevLine struct {
		file string
		line int
		seq  uint64
		sum  string
	}
	var prev *prevLine
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		err = func() error {
			defer f.Close()
			r := bufio.NewReaderSize(f, 64<<10)
			for n := 1; ; n++ {
				raw, err := r.ReadBytes('\n')
				if err == io.EOF && len(raw) == 0 {
					return nil
				}
				if err != nil && err != io.EOF {
					return err
				}
				if raw[len(raw)-1] == '\n' {
					raw = raw[:len(raw)-1]
				}
				var h struct {
					Seq  *uint64 `json:"seq"`
					Prev *string `json:"prev"`
					Lost uint64  `json:"lost"`
				}
				if json.Unmarshal(raw, &h) != nil || h.Seq == nil || h.Prev == nil {
					return &Break{File: name, Line: n, Kind: "malformed", Message: "not an audit line (no seq or prev): edited or corrupt"}
				}
				if prev == nil {
					rep.FirstPrev = *h.Prev
				} else if *h.Prev != prev.sum || *h.Seq != prev.seq+1 {
					switch {
					case *h.Seq == prev.seq+1:
						return &Break{File: prev.file, Line: prev.line, Kind: "edited",
							Message: fmt.Sprintf("line %d (seq %d) was edited: its hash is not the one %s:%d recorded", prev.line, prev.seq, name, n)}
					case *h.Seq > prev.seq+1:
						return &Break{File: name, Line: n, Kind: "removed",
							Message: fmt.Sprintf("%d line(s) removed before this one (seq %d follows seq %d at %s:%d)", *h.Seq-prev.seq-1, *h.Seq, prev.seq, prev.file, prev.line)}
					default:
						return &Break{File: name, Line: n, Kind: "reordered",
							Message: fmt.Sprintf("line out of order: seq %d after seq %d at %s:%d", *h.Seq, prev.seq, prev.file, prev.line)}
					}
				}
				rep.Lines++
				rep.Lost += h.Lost
				prev = &prevLine{file: name, line: n, seq: *h.Seq, sum: Sum(raw)}
				if err == io.EOF {
					return nil
				}
			}
		}()
		if err != nil {
			return rep, err
		}
	}
	if prev != nil {
		rep.Head = prev.sum
	}
	return rep, nil
}
