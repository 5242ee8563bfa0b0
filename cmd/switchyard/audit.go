package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/switchyard-io/switchyard/internal/audit"
)

func init() {
	commands["audit"] = command{"check the audit log's chain: 'switchyard audit verify FILE...' (oldest first)", runAudit}
}

func runAudit(_ context.Context, args []string, stdout, stderr io.Writer) error {
	usage := func() {
		fmt.Fprintln(stderr, "Usage: switchyard audit verify FILE...")
		fmt.Fprintln(stderr, "\nChecks that every line of the audit log holds the SHA-256 of the line before it, across the files")
		fmt.Fprintln(stderr, "given oldest first (after rotation: PATH.N ... PATH.1 PATH). Exits 1 naming the first line that was")
		fmt.Fprintln(stderr, "edited, removed or reordered. The last line is covered by no later one: compare the printed head")
		fmt.Fprintln(stderr, "with a copy kept elsewhere (a log shipper's) to see that nothing was cut from the end.")
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		usage()
		if len(args) == 0 {
			return errors.New("a subcommand is required: verify")
		}
		return flag.ErrHelp
	}
	if args[0] != "verify" {
		usage()
		return fmt.Errorf("unknown subcommand %q", args[0])
	}
	files := args[1:]
	if len(files) == 0 {
		usage()
		return errors.New("verify needs at least one FILE")
	}
	rep, err := audit.Verify(files...)
	if err != nil {
		var b *audit.Break
		if errors.As(err, &b) {
			return fmt.Errorf("the chain is broken: %s:%d: %s", b.File, b.Line, b.Message)
		}
		return err
	}
	fmt.Fprintf(stdout, "ok: %d line(s) in %d file(s), chain intact\n", rep.Lines, len(files))
	if rep.Lost > 0 {
		fmt.Fprintf(stdout, "%d line(s) were dropped by the proxy when its writer fell behind (recorded in the lines that followed)\n", rep.Lost)
	}
	if rep.FirstPrev != "" {
		fmt.Fprintf(stdout, "the first line continues a chain from an earlier file (prev %s)\n", rep.FirstPrev)
	}
	fmt.Fprintf(stdout, "head: %s\n", rep.Head)
	return nil
}
