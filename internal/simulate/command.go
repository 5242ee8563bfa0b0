package simulate

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary is the one-line description of the simulate subcommand.
const Summary = "simulate a month of outages on 1, 2 and 3 channels with the real health engine"

// Command runs `switchyard simulate` with the arguments after the subcommand's name.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	def := DefaultConfig()
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	channels := fs.String("channels", "1,2,3", "comma-separated channel counts to compare")
	days := fs.Float64("days", def.Duration.Hours()/24, "simulated days")
	rate := fs.Float64("rate", def.Rate, "client requests per second (Poisson); a month at 1/s runs in seconds")
	upMean := fs.Duration("up-mean", def.UpMean, "mean time between outages of one channel (exponential)")
	outageMean := fs.Duration("outage-mean", def.OutageMean, "mean outage duration (log-normal)")
	sigma := fs.Float64("outage-sigma", def.OutageSigma, "log-normal sigma of outage durations (0: all equal)")
	hang := fs.Float64("hang-share", def.HangShare, "share of outages that hang until the timeout instead of answering 503")
	noise := fs.Float64("noise", def.Noise, "chance that a healthy channel fails one attempt anyway")
	timeout := fs.Duration("timeout", def.Timeout, "what a hanging attempt costs (the first-byte timeout)")
	scenario := fs.String("scenario", def.Scenario, "RoutingPolicy scenario whose settings the engine runs: chat or batch")
	attempts := fs.Int("max-attempts", def.MaxAttempts, "attempts per client request")
	seed := fs.Uint64("seed", def.Seed, "random seed: the same seed gives the same numbers")
	rollout := fs.Int("rollout-percent", 100, "spec.rollout.percent: the share of requests (by request-id hash) that get the policy's failover and ejection; the rest walk the channels in order")
	replicas := fs.Int("replicas", 1, "proxy replicas; each request goes to one at random, each judges with its own engine")
	fleet := fs.String("fleet", "local,shared", "with --replicas > 1, comma-separated fleet modes to compare: local (each replica judges alone), shared (evidence and verdicts shared through one fleet store)")
	fleetSync := fs.Duration("fleet-sync-interval", time.Second, "how often shared replicas exchange evidence, in simulated time")
	format := fs.String("format", "table", "output format: table or json")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard simulate [flags]")
		fmt.Fprintln(stderr, "\nSimulates one model's traffic on N independent channels whose outages follow a seeded random")
		fmt.Fprintln(stderr, "process, routed with failover through the real health engine. See docs/replay.md.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *format != "table" && *format != "json" {
		return fmt.Errorf("--format must be table or json, got %q", *format)
	}
	cfg := Config{Duration: time.Duration(*days * 24 * float64(time.Hour)), Rate: *rate, UpMean: *upMean,
		OutageMean: *outageMean, OutageSigma: *sigma, HangShare: *hang, Noise: *noise, Timeout: *timeout,
		Scenario: *scenario, MaxAttempts: *attempts, Seed: *seed, RolloutPercent: *rollout,
		Replicas: *replicas, FleetSyncInterval: *fleetSync}
	for _, m := range strings.Split(*fleet, ",") {
		m = strings.TrimSpace(m)
		if m != FleetLocal && m != FleetShared {
			return fmt.Errorf("--fleet: %q is not local or shared", m)
		}
		cfg.Fleet = append(cfg.Fleet, m)
	}
	if *replicas < 1 {
		return fmt.Errorf("--replicas must be at least 1, got %d", *replicas)
	}
	if *days <= 0 {
		return errors.New("--days must be positive")
	}
	for _, f := range strings.Split(*channels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("--channels: %q is not a number", f)
		}
		cfg.Channels = append(cfg.Channels, n)
	}
	if cfg.Rate <= 0 || cfg.UpMean <= 0 || cfg.OutageMean <= 0 || cfg.Timeout <= 0 || cfg.MaxAttempts <= 0 {
		return errors.New("--rate, --up-mean, --outage-mean, --timeout and --max-attempts must be positive")
	}
	if *rollout < 1 || *rollout > 100 {
		return fmt.Errorf("--rollout-percent must be 1-100, got %d", *rollout)
	}
	results, err := Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *format == "json" {
		b, err := json.MarshalIndent(struct {
			Config  Config   `json:"config"`
			Results []Result `json:"results"`
		}{cfg, results}, "", "  ")
		if err != nil {
			return err
		}
		_, err = stdout.Write(append(b, '\n'))
		return err
	}
	return WriteTable(stdout, cfg, results)
}

// WriteTable prints results for people.
func WriteTable(w io.Writer, cfg Config, results []Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Simulated %s of one model's traffic at %g requests/s (Poisson), seed %d; %s profile, HealthScore, up to %d attempts per request.\n",
		days(cfg.Duration), cfg.Rate, cfg.Seed, cfg.Scenario, cfg.MaxAttempts)
	fmt.Fprintf(&b, "Each channel: up ~ Exp(mean %s), outage ~ LogNormal(mean %s, sigma %g); %.0f%% of outages hang (%s timeouts), the rest answer 503; noise %g%%.\n",
		cfg.UpMean, cfg.OutageMean, cfg.OutageSigma, cfg.HangShare*100, cfg.Timeout, cfg.Noise*100)
	fmt.Fprintf(&b, "Long-run availability of one channel under this process: %.2f%%.\n", ExpectedSingle(cfg))
	if p := cfg.RolloutPercent; p > 0 && p < 100 {
		fmt.Fprintf(&b, "Rollout: %d%% of the requests (by request-id hash) get the policy's failover and ejection; the rest walk the channels in order.\n", p)
	}
	if len(results) > 0 && results[0].Fleet != nil {
		writeFleet(&b, cfg, results)
		_, err := io.WriteString(w, b.String())
		return err
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "channels\tavailability\tdowntime/month\trequests\tfailed\toutages\tejections\tfailed over\tfailover p50\tp95\ttraffic moved p50\tp95\t")
	for _, r := range results {
		fo50, fo95, mv50, mv95 := "n/a", "n/a", "n/a", "n/a"
		if r.FailedOver > 0 {
			fo50, fo95 = r.FailoverP50.String(), r.FailoverP95.String()
		}
		if r.Channels > 1 && r.MoveP95 > 0 {
			mv50, mv95 = r.MoveP50.String(), r.MoveP95.String()
		}
		fmt.Fprintf(tw, "%d\t%.4f%%\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", r.Channels, r.AvailabilityPercent,
			r.DowntimePerMonth, r.Requests, r.Failed, r.Outages, r.Ejections, r.FailedOver, fo50, fo95, mv50, mv95)
	}
	tw.Flush()
	if len(results) > 0 && results[0].Cohorts != nil {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "channels\tpolicy cohort\tavailability\tfailed\tlisted cohort\tavailability\tfailed\t")
		for _, r := range results {
			if c := r.Cohorts; c != nil {
				fmt.Fprintf(tw, "%d\t%d\t%.4f%%\t%d\t%d\t%.4f%%\t%d\t\n", r.Channels, c.Policy.Requests, c.Policy.AvailabilityPercent,
					c.Policy.Failed, c.Listed.Requests, c.Listed.AvailabilityPercent, c.Listed.Failed)
			}
		}
		tw.Flush()
	}
	b.WriteString("\navailability: share of client requests answered; downtime/month: (1 - availability) x 30 days.\n")
	b.WriteString("failover: arrival to answer of the requests answered by another channel after a failed attempt.\n")
	b.WriteString("traffic moved: start of an outage of the first-choice channel to the first request routed elsewhere first.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// writeFleet is WriteTable's body for runs with several replicas: one row per channel count and
// fleet mode.
func writeFleet(b *strings.Builder, cfg Config, results []Result) {
	fmt.Fprintf(b, "Fleet: %d replicas, each request served by one at random; local: each judges alone; shared: evidence and verdicts exchanged through one fleet store every %s.\n\n",
		results[0].Fleet.Replicas, cfg.FleetSyncInterval)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "channels\tfleet\tavailability\tdowntime/month\trequests\tfailed\tfailed attempts on broken channels\tprobes\tejections\ttraffic moved p50\tp90\tnot moved\t")
	for _, r := range results {
		f := r.Fleet
		mv50, mv90 := "n/a", "n/a"
		if r.Channels > 1 && f.MoveP90 > 0 {
			mv50, mv90 = f.MoveP50.String(), f.MoveP90.String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%.4f%%\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t\n", r.Channels, f.Mode, r.AvailabilityPercent,
			r.DowntimePerMonth, r.Requests, r.Failed, f.BrokenAttempts, f.Probes, r.Ejections, mv50, mv90, f.NotMoved)
	}
	tw.Flush()
	b.WriteString("\navailability: share of client requests answered; downtime/month: (1 - availability) x 30 days.\n")
	b.WriteString("failed attempts on broken channels: attempts (not probes) started on a channel in an outage; probes: sent by all replicas.\n")
	b.WriteString("ejections: summed over the replicas (a fleet verdict adopted by 200 replicas counts 200).\n")
	b.WriteString("traffic moved: start of an outage of the channel taking the first attempts to the last request any replica still sent it first;\n")
	b.WriteString("not moved: outages in which such requests kept coming in their last 5 s.\n")
}
