package report

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/replay"
)

// Summary is the one-line description of the report subcommand.
const Summary = "the monthly review of the health rules, from the access log"

// priceFlag collects --price MODEL=USD_PER_1K_TOKENS.
type priceFlag map[string]float64

func (p priceFlag) String() string { return "" }
func (p priceFlag) Set(v string) error {
	model, price, ok := strings.Cut(v, "=")
	f, err := strconv.ParseFloat(price, 64)
	if !ok || model == "" || err != nil || f < 0 {
		return fmt.Errorf("want MODEL=USD_PER_1K_TOKENS, got %q", v)
	}
	p[model] = f
	return nil
}

// Command runs `switchyard report`. now is the wall clock, read by the caller: --since is a
// duration back from it (or an RFC 3339 time).
func Command(ctx context.Context, args []string, now time.Time, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	since := fs.String("since", "720h", "review the lines from this long before now (a duration), or from this RFC 3339 time; empty: the whole log")
	logPath := fs.String("log", "", `proxy access log, JSON Lines, gzip accepted; "-" for stdin (required)`)
	config := fs.String("config", "", "RoutingPolicy (and ProviderChannel) manifests the proxy ran, a file or directory (required)")
	channels := fs.String("channels", "", "ProviderChannel manifests, when not in --config (optional)")
	auditLog := fs.String("audit-log", "", "the proxy's audit log (JSON Lines with requestId and tokens), for the tokens moved (optional)")
	format := fs.String("output", "table", "output format: table or json")
	fs.StringVar(format, "format", "table", "the same as --output")
	margin := fs.Float64("same-rate-margin", DefaultSameRateMargin, "percentage points: an ejection is false when the other channels' error rate is at least the channel's minus this")
	outageRate := fs.Int("outage-rate", 0, "error rate (percent) of an outage window; 0: each policy's errorRatePercent")
	outageMin := fs.Int("outage-min-requests", 0, "attempts an outage window needs; 0: each policy's minRequests")
	seed := fs.Uint64("seed", 1, "seed of the replay's routing draws")
	prices := priceFlag{}
	fs.Var(prices, "price", "MODEL=USD_PER_1K_TOKENS, repeatable: money of the moved tokens")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard report --log FILE --config DIR [--since 720h] [--audit-log FILE] [--price MODEL=USD] [--output table|json]")
		fmt.Fprintln(stderr, "\nThe monthly review: per channel × model the error rate, ejections, time ejected and time to recover,")
		fmt.Fprintln(stderr, "and the four questions (false ejections, missed outages, recovery, cost). See docs/report.md.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *logPath == "" || *config == "" {
		fs.Usage()
		return errors.New("--log and --config are required")
	}
	if *format != "table" && *format != "json" {
		return fmt.Errorf("--output must be table or json, got %q", *format)
	}
	if *margin < 0 || *outageRate < 0 || *outageRate > 100 || *outageMin < 0 {
		return errors.New("--same-rate-margin and --outage-min-requests must not be negative, --outage-rate must be 0..100")
	}
	ropts := replay.Options{Seed: *seed}
	if *since != "" {
		if d, err := time.ParseDuration(*since); err == nil {
			ropts.Since = now.Add(-d)
		} else if t, err := time.Parse(time.RFC3339, *since); err == nil {
			ropts.Since = t
		} else {
			return fmt.Errorf("--since: want a duration (720h) or an RFC 3339 time, got %q", *since)
		}
	}
	setup, err := replay.LoadSetup(*config, *channels)
	if err != nil {
		return err
	}
	log, err := replay.OpenLog(*logPath, stdin)
	if err != nil {
		return err
	}
	defer log.Close()
	var audit io.Reader
	if *auditLog == "-" {
		return errors.New("--audit-log must be a file (stdin may carry the access log)")
	}
	if *auditLog != "" {
		f, err := replay.OpenLog(*auditLog, nil)
		if err != nil {
			return fmt.Errorf("--audit-log: %w", err)
		}
		defer f.Close()
		audit = f
	}
	rv, err := Run(ctx, setup, log, ropts, Options{SameRateMargin: *margin, OutageRatePercent: *outageRate,
		OutageMinRequests: *outageMin, Prices: prices}, audit)
	if err != nil {
		return err
	}
	if *format == "json" {
		return rv.WriteJSON(stdout)
	}
	return rv.WriteTable(stdout)
}
