package replay

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Summary is the one-line description of the replay subcommand.
const Summary = "replay an access log against a RoutingPolicy, offline"

// Command runs `switchyard replay` with the arguments after the subcommand's name. stdin is
// read when --log is "-".
func Command(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	for i, a := range args {
		if a == "--compare" || a == "-compare" || strings.HasPrefix(a, "--compare=") || strings.HasPrefix(a, "-compare=") {
			return compareCommand(ctx, args, i, stdin, stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policy := fs.String("policy", "", "RoutingPolicy manifest file or directory (required; scenario defaults are resolved as usual)")
	channels := fs.String("channels", "", "ProviderChannel manifests (optional: models served, weights, residency)")
	logPath := fs.String("log", "", `proxy access log, JSON Lines, gzip accepted; "-" for stdin (required)`)
	incidents := fs.String("incidents", "", `known outages, JSON Lines {"channel","model","start","end"} (optional)`)
	format := fs.String("format", "table", "output format: table or json")
	fs.StringVar(format, "output", "table", "the same as --format")
	tolerance := fs.Duration("reorder-tolerance", DefaultReorderTolerance, "accept and sort lines up to this much out of order")
	evidence := fs.Duration("evidence-window", DefaultEvidenceWindow, "a channel's logged attempts this close to a request count as evidence for it")
	seed := fs.Uint64("seed", 1, "seed of the routing draws (Weighted strategy, share draws)")
	maxProblems := fs.Int("max-problems", DefaultMaxProblems, "input problems listed per kind (all are counted)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard replay --policy FILE --log FILE [--channels FILE] [--incidents FILE] [--format table|json]")
		fmt.Fprintln(stderr, "\nReplays every logged attempt through the health engine on a virtual clock and reports what the policy")
		fmt.Fprintln(stderr, "would have done: ejections and returns, time per phase, traffic carried, and client-visible failures.")
		fmt.Fprintln(stderr, "See docs/replay.md.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *policy == "" || *logPath == "" {
		fs.Usage()
		return errors.New("--policy and --log are required")
	}
	if *format != "table" && *format != "json" {
		return fmt.Errorf("--format must be table or json, got %q", *format)
	}
	if *tolerance < 0 || *evidence < 0 {
		return errors.New("--reorder-tolerance and --evidence-window must not be negative")
	}
	setup, err := LoadSetup(*policy, *channels)
	if err != nil {
		return err
	}
	opts := Options{ReorderTolerance: *tolerance, EvidenceWindow: *evidence, Seed: *seed, MaxProblems: *maxProblems}
	if *incidents != "" {
		f, err := os.Open(*incidents)
		if err != nil {
			return fmt.Errorf("failed to open --incidents: %w", err)
		}
		opts.Incidents, err = ParseIncidents(f)
		f.Close()
		if err != nil {
			return err
		}
	}
	log, err := OpenLog(*logPath, stdin)
	if err != nil {
		return err
	}
	defer log.Close()
	rep, err := Run(ctx, setup, log, opts)
	if err != nil {
		return err
	}
	if *format == "json" {
		return rep.WriteJSON(stdout)
	}
	return rep.WriteTable(stdout)
}

// ExitError is an error with the exit status the command gives it: replay --compare exits 1
// when NEW is worse and 2 on bad input, so that CI can tell a failing gate from a broken one.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the process exit status.
func (e *ExitError) ExitCode() int { return e.Code }

func badInput(err error) error {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return &ExitError{Code: 2, Err: err}
}

// compareCommand runs `switchyard replay --compare OLD NEW --log FILE`; args[at] is --compare.
func compareCommand(ctx context.Context, args []string, at int, stdin io.Reader, stdout, stderr io.Writer) error {
	if strings.Contains(args[at], "=") {
		return badInput(errors.New("--compare takes two paths: --compare OLD NEW"))
	}
	if at+2 >= len(args) || strings.HasPrefix(args[at+1], "-") || strings.HasPrefix(args[at+2], "-") {
		return badInput(errors.New("--compare takes two paths: --compare OLD NEW (RoutingPolicy manifests, files or directories)"))
	}
	oldPath, newPath := args[at+1], args[at+2]
	rest := append(append([]string{}, args[:at]...), args[at+3:]...)
	fs := flag.NewFlagSet("replay --compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	channels := fs.String("channels", "", "ProviderChannel manifests for both policies (optional)")
	logPath := fs.String("log", "", `proxy access log, JSON Lines, gzip accepted; "-" for stdin (required)`)
	incidents := fs.String("incidents", "", `known outages, JSON Lines (optional): both policies are scored`)
	format := fs.String("output", "table", "output format: table or json")
	fs.StringVar(format, "format", "table", "the same as --output")
	tolerance := fs.Duration("reorder-tolerance", DefaultReorderTolerance, "accept and sort lines up to this much out of order")
	evidence := fs.Duration("evidence-window", DefaultEvidenceWindow, "a channel's logged attempts this close to a request count as evidence for it")
	seed := fs.Uint64("seed", 1, "seed of the routing draws, the same for both policies")
	maxExamples := fs.Int("max-examples", DefaultMaxExamples, "requests listed per side among those failing under one policy only (all are counted)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard replay --compare OLD NEW --log FILE [--channels FILE] [--incidents FILE] [--output table|json]")
		fmt.Fprintln(stderr, "\nReplays one access log against two RoutingPolicy versions (files or directories) and prints the difference:")
		fmt.Fprintln(stderr, "failed requests, ejections gained and lost, time in each phase. Exit status 1 when NEW fails more requests")
		fmt.Fprintln(stderr, "than OLD, 2 on bad input, 0 otherwise. See docs/replay.md.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(rest); err != nil {
		return badInput(err)
	}
	if fs.NArg() > 0 {
		return badInput(fmt.Errorf("unexpected arguments: %v", fs.Args()))
	}
	if *logPath == "" {
		return badInput(errors.New("--log is required"))
	}
	if *format != "table" && *format != "json" {
		return badInput(fmt.Errorf("--output must be table or json, got %q", *format))
	}
	if *tolerance < 0 || *evidence < 0 {
		return badInput(errors.New("--reorder-tolerance and --evidence-window must not be negative"))
	}
	oldSetup, err := LoadSetup(oldPath, *channels)
	if err != nil {
		return badInput(fmt.Errorf("OLD %s: %w", oldPath, err))
	}
	newSetup, err := LoadSetup(newPath, *channels)
	if err != nil {
		return badInput(fmt.Errorf("NEW %s: %w", newPath, err))
	}
	opts := Options{ReorderTolerance: *tolerance, EvidenceWindow: *evidence, Seed: *seed}
	if *incidents != "" {
		f, err := os.Open(*incidents)
		if err != nil {
			return badInput(fmt.Errorf("failed to open --incidents: %w", err))
		}
		opts.Incidents, err = ParseIncidents(f)
		f.Close()
		if err != nil {
			return badInput(err)
		}
	}
	log, err := OpenLog(*logPath, stdin)
	if err != nil {
		return badInput(err)
	}
	defer log.Close()
	c, err := RunCompare(ctx, oldPath, oldSetup, newPath, newSetup, log, opts, *maxExamples)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return badInput(err)
	}
	if *format == "json" {
		err = c.WriteJSON(stdout)
	} else {
		err = c.WriteTable(stdout)
	}
	if err != nil {
		return err
	}
	if c.NewWorse {
		return &ExitError{Code: 1, Err: errors.New(c.Verdict)}
	}
	return nil
}
