package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/switchyard-io/switchyard/internal/audit"
)

func init() {
	commands["audit"] = command{"check the audit log's chain: 'switchyard audit verify [--allow-tail-cut] FILE...' (oldest first)", runAudit}
}

// auditExit gives verify's failures their exit status: 1 a broken chain, 2 bad usage or a file
// that cannot be read.
type auditExit struct {
	err  error
	code int
}

func (e auditExit) Error() string { return e.err.Error() }
func (e auditExit) Unwrap() error { return e.err }
func (e auditExit) ExitCode() int { return e.code }

func runAudit(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("audit verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	allowTail := fs.Bool("allow-tail-cut", false, "accept a chain without an end record (and a last line cut short): a log the proxy is still writing")
	usage := func() {
		fmt.Fprintln(stderr, "Usage: switchyard audit verify [--allow-tail-cut] FILE...")
		fmt.Fprintln(stderr, "\nChecks that every line of the audit log holds the SHA-256 of the line before it, across the files")
		fmt.Fprintln(stderr, "given oldest first (after rotation: PATH.N ... PATH.1 PATH), that the chain begins (seq 1, or a")
		fmt.Fprintln(stderr, "start record the proxy wrote) and ends (the end record of a clean shutdown), and that every gap is")
		fmt.Fprintln(stderr, "one the proxy recorded. Prints the covered seq ranges. Exits 0 when the chain holds, 1 naming the")
		fmt.Fprintln(stderr, "first line that was edited, removed or reordered or where the chain was cut, 2 on bad usage or a")
		fmt.Fprintln(stderr, "file that cannot be read. The last line is covered by no later one: compare the printed head with a")
		fmt.Fprintln(stderr, "copy kept elsewhere (a log shipper's).")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	fs.Usage = usage
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		usage()
		if len(args) == 0 {
			return auditExit{errors.New("a subcommand is required: verify"), 2}
		}
		return flag.ErrHelp
	}
	if args[0] != "verify" {
		usage()
		return auditExit{fmt.Errorf("unknown subcommand %q", args[0]), 2}
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return auditExit{err, 2}
	}
	files := fs.Args()
	if len(files) == 0 {
		usage()
		return auditExit{errors.New("verify needs at least one FILE"), 2}
	}
	rep, err := audit.VerifyWith(audit.VerifyOptions{AllowTailCut: *allowTail}, files...)
	if err != nil {
		var b *audit.Break
		if errors.As(err, &b) {
			return auditExit{fmt.Errorf("the chain is broken (%s): %s:%d: %s", b.Kind, b.File, b.Line, b.Message), 1}
		}
		return auditExit{err, 2}
	}
	end := "ends with the end record of a clean shutdown"
	if !rep.Ended {
		end = "has no end record yet (--allow-tail-cut: still being written)"
	}
	fmt.Fprintf(stdout, "ok: %d line(s) in %d file(s), chain intact, %s\n", rep.Lines, len(files), end)
	ranges := make([]string, 0, len(rep.Segments))
	for _, s := range rep.Segments {
		r := fmt.Sprintf("%d-%d", s.From, s.To)
		if s.Start != "" {
			r += " (from a start record: " + s.Start + ")"
		}
		ranges = append(ranges, r)
	}
	fmt.Fprintf(stdout, "covered seq: %s\n", strings.Join(ranges, ", "))
	if len(rep.Segments) > 1 {
		fmt.Fprintf(stdout, "%d segments: the proxy began a new chain where it could not continue the old one (the reason is in its start record and in switchyard_audit_segments_started_total)\n", len(rep.Segments))
	}
	if rep.Lost > 0 {
		fmt.Fprintf(stdout, "%d line(s) were lost by the proxy (its writer fell behind, or %d failed write(s) recorded in gap records)\n", rep.Lost, rep.Gaps)
	}
	if rep.Torn > 0 {
		fmt.Fprintf(stdout, "%d line(s) cut short by a failed write or a crash, each followed by the proxy's gap or start record\n", rep.Torn)
	}
	if rep.FirstStart == audit.StartRotated {
		fmt.Fprintf(stdout, "the first file begins after a rotation (prev %s): older files were rotated away or not given\n", rep.FirstPrev)
	}
	fmt.Fprintf(stdout, "head: %s\n", rep.Head)
	return nil
}
