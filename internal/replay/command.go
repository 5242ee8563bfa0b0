package replay

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// Summary is the one-line description of the replay subcommand.
const Summary = "replay an access log against a RoutingPolicy, offline"

// Command runs `switchyard replay` with the arguments after the subcommand's name. stdin is
// read when --log is "-".
func Command(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policy := fs.String("policy", "", "RoutingPolicy manifest file or directory (required; scenario defaults are resolved as usual)")
	channels := fs.String("channels", "", "ProviderChannel manifests (optional: models served, weights, residency)")
	logPath := fs.String("log", "", `proxy access log, JSON Lines, gzip accepted; "-" for stdin (required)`)
	incidents := fs.String("incidents", "", `known outages, JSON Lines {"channel","model","start","end"} (optional)`)
	format := fs.String("format", "table", "output format: table or json")
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
