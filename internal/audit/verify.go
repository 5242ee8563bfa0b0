package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// The kinds of Break.
const (
	BreakEdited    = "edited"
	BreakRemoved   = "removed"
	BreakReordered = "reordered"
	BreakMalformed = "malformed"
	// BreakHeadCut: the first line given neither begins a chain (seq 1, empty prev) nor is a
	// start record: the lines before it were removed, or older files were not given.
	BreakHeadCut = "head_cut"
	// BreakTailCut: the last line is not an end record: lines were cut from the end, or the log
	// is still being written (VerifyOptions.AllowTailCut).
	BreakTailCut = "tail_cut"
	// BreakEmpty: the files hold no line.
	BreakEmpty = "empty"
)

// Break is the first place a chain does not hold.
type Break struct {
	File string
	Line int // 1-based, within File
	// Kind is one of the Break* constants.
	Kind    string
	Message string
}

func (b *Break) Error() string { return fmt.Sprintf("%s:%d: %s", b.File, b.Line, b.Message) }

// Segment is a run of the chain without a break: from its first line (seq 1, or a start record
// that began a new segment) to the line before the next such start.
type Segment struct {
	From, To uint64
	// Start is the reason of the start record it begins with ("" for seq 1).
	Start string
}

// Report is what Verify found in a chain that holds.
type Report struct {
	// Lines counts the request lines, Records every line (request lines and records).
	Lines, Records int
	// Lost is the sum of the lines' lost counts: lines the writer dropped, or lost to failed
	// writes (gap records), and said so.
	Lost uint64
	// Gaps counts the gap records, Torn the lines cut short that a gap or start record follows.
	Gaps, Torn int
	// Segments are the covered seq ranges, oldest first.
	Segments []Segment
	// Ended: the last line is an end record (the log was closed cleanly).
	Ended bool
	// Head is the hash of the last line: compare it with a copy kept elsewhere to see that no
	// line was cut from the end of a log still being written.
	Head string
	// FirstPrev is the first line's prev: the head of the file before the oldest one given
	// ("" when the chain starts there).
	FirstPrev string
	// FirstStart is the reason of the start record the first file begins with ("" when it begins
	// at seq 1): "rotated" says older files were rotated away or not given.
	FirstStart string
}

// VerifyOptions change what Verify accepts.
type VerifyOptions struct {
	// AllowTailCut accepts a chain without an end record, and a last line cut short: a log that
	// is still being written.
	AllowTailCut bool
}

// Verify checks the chain of a closed log (VerifyWith without options).
func Verify(files ...string) (*Report, error) { return VerifyWith(VerifyOptions{}, files...) }

// VerifyWith checks the chain across files given oldest first (the rotated files Path.N …
// Path.1, then Path). It returns the first break: the line that was edited (its hash no longer
// matches what the next line recorded, and the next line's number follows it), the place lines
// were removed (a gap in the numbers no gap record explains), a line out of order (its number
// does not grow), a line that is not an audit line (unless it is a line cut short that a gap or
// start record follows), a head or tail cut, or no line at all. The last line's own edit cannot
// show in a chain (no line comes after it): Report.Head is the hash to compare.
func VerifyWith(o VerifyOptions, files ...string) (*Report, error) {
	v := &verifier{o: o, rep: &Report{}}
	if len(files) > 0 {
		v.last.file = files[len(files)-1]
	}
	for _, name := range files {
		if err := v.file(name); err != nil {
			return v.rep, err
		}
	}
	return v.rep, v.end()
}

type verifier struct {
	o    VerifyOptions
	rep  *Report
	prev *seen
	// torn is a line that is not an audit line, held until the next line says whether it was a
	// write cut short (a gap or start record follows it).
	torn      *Break
	tornWhole bool // the last held line ended in a newline (not a write in progress)
	tornRun   int  // the lines held
	last      struct {
		file string
		line int
	}
}

type seen struct {
	file   string
	line   int
	seq    uint64
	sum    string
	record string
}

func (v *verifier) file(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
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
		whole := raw[len(raw)-1] == '\n'
		if whole {
			raw = raw[:len(raw)-1]
		}
		v.last.file, v.last.line = name, n
		if err := v.line(name, n, raw, whole); err != nil {
			return err
		}
		if err == io.EOF {
			return nil
		}
	}
}

func (v *verifier) line(name string, n int, raw []byte, whole bool) error {
	var h struct {
		Seq    *uint64 `json:"seq"`
		Prev   *string `json:"prev"`
		Lost   uint64  `json:"lost"`
		Record string  `json:"record"`
		Reason string  `json:"reason"`
	}
	if json.Unmarshal(raw, &h) != nil || h.Seq == nil || h.Prev == nil {
		if v.torn != nil {
			// Each retry of a failing write may leave a torn line: a run of them before the gap
			// record is one failure.
			v.tornRun++
			v.tornWhole = whole
			return nil
		}
		msg := "not an audit line (no seq or prev): edited or corrupt"
		if !whole {
			msg = "a line cut short (no newline) that no gap or start record follows"
		}
		v.torn, v.tornWhole, v.tornRun = &Break{File: name, Line: n, Kind: BreakMalformed, Message: msg}, whole, 1
		return nil
	}
	if v.torn != nil {
		if h.Record != RecordGap && h.Record != RecordStart {
			return v.torn
		}
		v.torn = nil
		v.rep.Torn += v.tornRun
	}
	seq, sum := *h.Seq, Sum(raw)
	newSegment := false
	switch {
	case v.prev == nil:
		v.rep.FirstPrev = *h.Prev
		switch {
		case h.Record == RecordStart:
			v.rep.FirstStart = h.Reason
		case seq == 1 && *h.Prev == "":
		default:
			return &Break{File: name, Line: n, Kind: BreakHeadCut,
				Message: fmt.Sprintf("the chain does not begin here: seq %d continues a chain whose earlier lines are not given (cut from the head, or older files left out)", seq)}
		}
		newSegment = true
	case h.Record == RecordStart && *h.Prev == "":
		newSegment = true // a segment the writer could not link to what came before
	case *h.Prev != v.prev.sum || seq != v.prev.seq+1:
		p := v.prev
		switch {
		case seq == p.seq+1:
			return &Break{File: p.file, Line: p.line, Kind: BreakEdited,
				Message: fmt.Sprintf("line %d (seq %d) was edited: its hash is not the one %s:%d recorded", p.line, p.seq, name, n)}
		case seq > p.seq+1:
			return &Break{File: name, Line: n, Kind: BreakRemoved,
				Message: fmt.Sprintf("%d line(s) removed before this one (seq %d follows seq %d at %s:%d, and no gap record says they were lost)", seq-p.seq-1, seq, p.seq, p.file, p.line)}
		default:
			return &Break{File: name, Line: n, Kind: BreakReordered,
				Message: fmt.Sprintf("line out of order: seq %d after seq %d at %s:%d", seq, p.seq, p.file, p.line)}
		}
	}
	if newSegment {
		start := ""
		if h.Record == RecordStart {
			start = h.Reason
		}
		v.rep.Segments = append(v.rep.Segments, Segment{From: seq, Start: start})
	}
	v.rep.Segments[len(v.rep.Segments)-1].To = seq
	v.rep.Records++
	if h.Record == "" {
		v.rep.Lines++
	}
	if h.Record == RecordGap {
		v.rep.Gaps++
	}
	v.rep.Lost += h.Lost
	v.prev = &seen{file: name, line: n, seq: seq, sum: sum, record: h.Record}
	return nil
}

func (v *verifier) end() error {
	if v.torn != nil {
		if v.o.AllowTailCut && !v.tornWhole && v.tornRun == 1 && v.prev != nil {
			// The writer is in the middle of this line.
			v.torn = nil
		} else {
			return v.torn
		}
	}
	if v.prev == nil {
		return &Break{File: v.last.file, Line: v.last.line, Kind: BreakEmpty, Message: "no audit line: the log is empty or every line was removed"}
	}
	v.rep.Head = v.prev.sum
	v.rep.Ended = v.prev.record == RecordEnd
	if !v.rep.Ended && !v.o.AllowTailCut {
		return &Break{File: v.prev.file, Line: v.prev.line, Kind: BreakTailCut,
			Message: fmt.Sprintf("the chain has no end record after seq %d: lines were cut from the end, or the proxy did not shut down cleanly (--allow-tail-cut for a log still being written)", v.prev.seq)}
	}
	return nil
}
