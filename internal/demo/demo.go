// Package demo is `switchyard demo`: it plays an outage and a recovery on a real local gateway and
// shows the gateway's own view of it, live.
//
// It starts the switchyard binary's own subcommands as child processes on free loopback ports —
// one `mock-provider` per ProviderChannel of the demo manifests (config/samples/demo) and a
// standalone `proxy` on a temp copy of those manifests with the ports substituted — drives steady
// chat traffic through the proxy (streaming and not), and then tells the first channel's mock to
// fail (one model answers 503, the other hangs) and later to recover. While it runs it shows a
// refreshing table per channel×model and the health journal; at the end it prints a summary.
//
// Honesty: every figure shown comes from the running proxy (GET /admin/v1/channels,
// /admin/v1/events and /metrics); the only other source is the traffic generator's own count of
// what its requests saw, which is shown beside the proxy's for comparison. Nothing is scripted
// but the mocks' behaviour and when it changes. The demo exits non-zero when the story did not
// happen (no ejection, or no return to Healthy within the cap), so it doubles as a smoke test.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/procs"
	"github.com/switchyard-io/switchyard/internal/provider/bedrock"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Summary is the one-line description of the demo subcommand.
const Summary = "play an outage and a recovery on a local gateway with two mock providers, live (about 2 minutes)"

// Options configure a run. Durations are at scale 1; Run multiplies them (and the policies'
// timings) by Scale.
type Options struct {
	// Config is the directory (or file) of demo manifests (default config/samples/demo, looked
	// up in the parent directories too).
	Config string
	// Exe is the switchyard binary whose mock-provider and proxy subcommands run as children
	// (default: this executable).
	Exe string
	// Scale multiplies every duration of the demo: its stages and the policies' detection and
	// recovery timings (default 1).
	Scale float64
	// Rate is the target client requests per second (default 24); Workers the concurrent
	// clients (default 32: enough that hung requests do not starve the rest).
	Rate    float64
	Workers int
	// Steady, Incident: how long traffic runs before the failure, and how long the failure
	// lasts (default 20s, 40s). RecoveryCap bounds the wait for the return to Healthy (default
	// 100s); Tail is how long the demo keeps going once it is back (default 4s).
	Steady, Incident, RecoveryCap, Tail time.Duration
	// Refresh is the live view's period (default 1s).
	Refresh time.Duration
	// Live forces the in-place terminal view on (true) or off (false); nil decides by whether
	// stdout is a terminal.
	Live *bool
	// KeepDir keeps the temp directory (manifests and child logs) after a successful run.
	KeepDir bool
}

// ClaudeConfigDir is the manifests of `switchyard demo --claude`: the outage hits Claude on an
// Anthropic channel, and Claude on Bedrock takes over.
const ClaudeConfigDir = "config/samples/demo-claude"

func (o Options) withDefaults() Options {
	if o.Config == "" {
		o.Config = DefaultConfigDir
	}
	if o.Scale <= 0 {
		o.Scale = 1
	}
	if o.Rate <= 0 {
		o.Rate = 24
	}
	if o.Workers <= 0 {
		o.Workers = 32
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Steady, 20*time.Second)
	def(&o.Incident, 40*time.Second)
	def(&o.RecoveryCap, 100*time.Second)
	def(&o.Tail, 4*time.Second)
	def(&o.Refresh, time.Second)
	return o
}

func (o Options) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * o.Scale).Round(time.Millisecond)
}

// Command runs `switchyard demo` with the arguments after the subcommand's name.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	fs.StringVar(&o.Config, "config", DefaultConfigDir, "the demo manifests (ProviderChannel, RoutingPolicy, Secret); their baseURLs must be loopback")
	fs.Float64Var(&o.Scale, "duration-scale", 1, "multiply every duration (stages, detection window, cooldown, probes, ramp) by this; 0.3 runs in about 40 s")
	fs.Float64Var(&o.Rate, "rate", 24, "target client requests per second")
	claude := fs.Bool("claude", false, "play the outage on Claude: Claude Sonnet and Haiku on an Anthropic and a Bedrock mock ("+ClaudeConfigDir+"); the Anthropic channel fails")
	plain := fs.Bool("plain", false, "no in-place terminal view: print a status line every few seconds (the default when stdout is not a terminal)")
	fs.BoolVar(&o.KeepDir, "keep", false, "keep the temp directory with the manifests and the children's logs")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard demo [flags]")
		fmt.Fprintln(stderr, "\nStarts two mock providers and a standalone proxy on free loopback ports, drives chat traffic")
		fmt.Fprintln(stderr, "through it, makes provider-a fail (503s and hangs) and recover, and shows the proxy's own view")
		fmt.Fprintln(stderr, "of it live. Exits 1 if the channel was not ejected or did not come back to Healthy.")
		fmt.Fprintln(stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.Scale <= 0 || o.Scale > 10 {
		return fmt.Errorf("--duration-scale must be in (0, 10], got %g", o.Scale)
	}
	if *plain {
		o.Live = new(bool)
	}
	if *claude {
		configSet := false
		fs.Visit(func(f *flag.Flag) { configSet = configSet || f.Name == "config" })
		if configSet {
			return errors.New("--claude picks its own manifests (" + ClaudeConfigDir + "): leave out --config")
		}
		o.Config = ClaudeConfigDir
	}
	return Run(ctx, o, stdout, stderr)
}

// isTerminal reports whether w is a character device (a terminal) and TERM allows redrawing.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Run plays the demo and writes the live view and the summary to stdout. It returns an error
// when the demo could not run or the story did not happen.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) (err error) {
	o = o.withDefaults()
	live := isTerminal(stdout)
	if o.Live != nil {
		live = *o.Live
	}
	cfg, err := findConfig(o.Config)
	if err != nil {
		return err
	}
	exe := o.Exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("finding the switchyard binary: %w", err)
		}
	}
	tmp, err := os.MkdirTemp("", "switchyard-demo-")
	if err != nil {
		return err
	}
	defer func() {
		if err == nil && !o.KeepDir {
			_ = os.RemoveAll(tmp)
		} else {
			fmt.Fprintf(stderr, "demo: manifests and the children's logs are in %s\n", tmp)
		}
	}()

	// Ports: one per channel's mock, two for the proxy.
	in, err := routing.LoadManifests(cfg)
	if err != nil {
		return err
	}
	free, err := procs.FreePorts(len(in.Channels) + 2)
	if err != nil {
		return err
	}
	ports := map[string]int{}
	for i, c := range in.Channels {
		ports[c.Name] = free[i]
	}
	apiPort, adminPort := free[len(free)-2], free[len(free)-1]
	st, err := prepareManifests(cfg, filepath.Join(tmp, "config"), ports, o.Scale)
	if err != nil {
		return err
	}
	failing := st.firstChannel()
	if failing == "" {
		return errors.New("the demo manifests route no model to any channel")
	}

	hc := &http.Client{Timeout: 5 * time.Second}
	var children []*procs.Child
	defer func() {
		// The proxy first (it drains), then the mocks.
		for i := len(children) - 1; i >= 0; i-- {
			_ = children[i].Stop(5 * time.Second)
		}
	}()
	fmt.Fprintf(stdout, "Starting %d mock providers and the proxy on free loopback ports (manifests: %s, duration scale %g)...\n",
		len(st.Table.Channels), cfg, o.Scale)
	for i := range st.Table.Channels {
		ch := &st.Table.Channels[i]
		args, env, err := mockArgs(ch, st.Table.Credentials[ch.Name].Reveal())
		if err != nil {
			return err
		}
		args = append(args, "--listen", "127.0.0.1:"+strconv.Itoa(st.Ports[ch.Name]), "--name", ch.Name)
		c, err := startChild(exe, tmp, "mock-"+ch.Name, env, args...)
		if err != nil {
			return err
		}
		children = append(children, c)
	}
	for i, c := range children {
		base := mockBase(st, st.Table.Channels[i].Name)
		if err := procs.WaitHTTP(ctx, base+"/_mock/stats", 20*time.Second, c); err != nil {
			return err
		}
		if err := setBehavior(ctx, hc, base, "", ptr(healthyBehavior(i))); err != nil {
			return fmt.Errorf("mock %s: %w", c.Name, err)
		}
	}
	apiBase := "http://127.0.0.1:" + strconv.Itoa(apiPort)
	adminBase := "http://127.0.0.1:" + strconv.Itoa(adminPort)
	proxyArgs := []string{"proxy", "--config", st.Dir, "--listen", "127.0.0.1:" + strconv.Itoa(apiPort),
		"--admin-listen", "127.0.0.1:" + strconv.Itoa(adminPort), "--drain-timeout", "3s",
		"--access-log", filepath.Join(tmp, "access.log")}
	if o.Scale < 1 {
		tick := max(time.Duration(float64(time.Second)*o.Scale).Round(10*time.Millisecond), 200*time.Millisecond)
		proxyArgs = append(proxyArgs, "--tick", tick.String())
	}
	px, err := startChild(exe, tmp, "proxy", nil, proxyArgs...)
	if err != nil {
		return err
	}
	children = append(children, px)
	if err := procs.WaitHTTP(ctx, adminBase+"/readyz", 30*time.Second, px); err != nil {
		return err
	}

	m := &monitor{o: o, st: st, hc: hc, admin: adminBase, api: apiBase, out: stdout, live: live, failing: failing, proxy: px,
		accessLog: filepath.Join(tmp, "access.log"),
		mk:        marks{Channel: failing, FailMode: map[string]string{}, FailAt: map[string]time.Time{}, RecoverAt: map[string]time.Time{}}}
	for _, model := range st.Models {
		if ch := st.channel(failing); ch != nil {
			if _, ok := ch.Upstream(model); ok {
				m.mk.Models = append(m.mk.Models, model)
			}
		}
	}
	gen := newGenerator(apiBase, st.Models, o.Rate, o.Workers)
	m.gen = gen
	return m.run(ctx)
}

// startChild runs the switchyard binary's subcommand in its own process group (a Ctrl-C reaches
// the demo, which then stops its children in order), its output in dir/name.log.
func startChild(exe, dir, name string, env []string, args ...string) (*procs.Child, error) {
	return procs.Start(procs.Spec{Name: name, Path: exe, Args: args, Env: env, Log: filepath.Join(dir, name+".log"), OwnGroup: true})
}

// mockArgs are the mock-provider arguments (and environment) of a channel's mock: the OpenAI and
// Anthropic wire formats with the channel's key, or Bedrock's with its credentials (the secret
// in the environment, not on the command line).
func mockArgs(ch *routing.Channel, creds string) (args, env []string, err error) {
	switch ch.Provider {
	case "bedrock":
		c, err := bedrock.ParseCredentials(creds)
		if err != nil {
			return nil, nil, fmt.Errorf("channel %s: %w", ch.Name, err)
		}
		return []string{"mock-provider", "--wire", "bedrock", "--region", ch.Region, "--access-key-id", c.AccessKeyID},
			[]string{"MOCK_AWS_SECRET_ACCESS_KEY=" + c.SecretAccessKey}, nil
	case "vertex":
		return nil, nil, fmt.Errorf("channel %s: the demo plays openai, azure-openai, anthropic and bedrock channels, not vertex", ch.Name)
	}
	args = []string{"mock-provider"}
	if creds != "" {
		args = append(args, "--api-key", creds)
	}
	return args, nil, nil
}

func ptr[T any](v T) *T { return &v }

// healthyBehavior is how mock i answers when all is well: LLM-like latency, streamed in chunks.
// The second mock is a little slower, so the two channels' p95 differ.
func healthyBehavior(i int) mockprovider.Behavior {
	lat := time.Duration(300+100*i) * time.Millisecond
	return mockprovider.Behavior{Mode: mockprovider.ModeOK, Latency: lat, FirstTokenDelay: lat, ChunkDelay: 30 * time.Millisecond, Chunks: 4}
}

// failure is what the failing channel's mock does for its i-th model: the first (and every
// other) answers 503 at once, the second (and every other) hangs until the proxy gives up.
func failure(i int) (mockprovider.Behavior, string) {
	if i%2 == 1 {
		return mockprovider.Behavior{Mode: mockprovider.ModeHang}, "hangs (no answer)"
	}
	return mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: http.StatusServiceUnavailable}, "answers HTTP 503"
}

func mockBase(st *setup, channel string) string {
	return "http://127.0.0.1:" + strconv.Itoa(st.Ports[channel])
}

// setBehavior sets (b != nil) or clears (nil) a mock's behaviour for an upstream model ("" is the default).
func setBehavior(ctx context.Context, hc *http.Client, base, upstream string, b *mockprovider.Behavior) error {
	body, err := json.Marshal(mockprovider.BehaviorUpdate{Model: upstream, Behavior: b})
	if err != nil {
		return err
	}
	return postJSON(ctx, hc, base+"/_mock/behavior", body)
}

// monitor runs the timeline, polls the proxy and draws the view.
type monitor struct {
	o       Options
	st      *setup
	hc      *http.Client
	admin   string
	api     string // the proxy's client API
	out     io.Writer
	live    bool
	failing string
	proxy   *procs.Child
	gen     *generator
	// accessLog is the proxy's access log (--access-log): what a failed client request met.
	accessLog string
	mk        marks

	stage    string
	stageEnd time.Time
	banner   string
	events   []adminapi.Event
	// journal is where the proxy's journal has been read to, across its restarts.
	journal   adminapi.Cursor
	channels  adminapi.ChannelsResponse
	metrics   Metrics
	log       []string
	printed   int // log lines already printed (plain mode)
	frames    int
	history   []servedPoint
	attempts  map[string][]countPoint // the failing channel's client attempts per model, per poll
	pollErr   error
	pollFails int
}

type servedPoint struct {
	at time.Time
	ok map[string]float64 // successful attempts per channel|model
}

func (m *monitor) elapsed(t time.Time) time.Duration { return t.Sub(m.mk.Start) }

func (m *monitor) action(msg string) {
	m.log = append(m.log, formatAction(m.elapsed(time.Now()), msg))
}

func (m *monitor) run(ctx context.Context) error {
	o := m.o
	genCtx, stopGen := context.WithCancel(context.Background())
	genDone := make(chan struct{})
	m.mk.Start = time.Now()
	go func() {
		m.gen.run(genCtx)
		close(genDone)
	}()
	defer func() {
		stopGen()
		<-genDone
	}()
	if m.live {
		fmt.Fprint(m.out, "\x1b[?25l\x1b[2J\x1b[H")
		defer fmt.Fprint(m.out, "\x1b[?25h")
	}

	m.stage, m.stageEnd = "steady", m.mk.Start.Add(o.scaled(o.Steady))
	m.banner = "All channels healthy; steady traffic of mixed streaming and non-streaming chat requests."
	m.action(fmt.Sprintf("steady traffic, ~%.0f req/s over %d clients, %s of streaming and non-streaming chat", o.Rate, o.Workers, strings.Join(m.st.Models, " and ")))
	stage := time.NewTimer(o.scaled(o.Steady))
	defer stage.Stop()
	tick := time.NewTicker(o.Refresh)
	defer tick.Stop()

	var fatal error
loop:
	for {
		select {
		case <-ctx.Done():
			m.mk.Interrupted = true
			break loop
		case <-stage.C:
			switch m.stage {
			case "steady":
				if err := m.fail(ctx); err != nil {
					fatal = err
					break loop
				}
				m.stage, m.stageEnd = "incident", time.Now().Add(o.scaled(o.Incident))
				stage.Reset(o.scaled(o.Incident))
			case "incident":
				if err := m.restore(ctx); err != nil {
					fatal = err
					break loop
				}
				m.stage, m.stageEnd = "recovery", time.Time{}
				stage.Reset(o.scaled(o.RecoveryCap))
			case "recovery":
				m.mk.CapReached = true
				m.action(fmt.Sprintf("%s is not back to Healthy after %s: giving up", m.failing, o.scaled(o.RecoveryCap)))
				break loop
			case "finishing":
				break loop
			}
		case <-tick.C:
		}
		m.poll(ctx)
		if m.proxy.Exited() {
			fatal = fmt.Errorf("the proxy exited (%v):\n%s", m.proxy.Err(), m.proxy.Tail(20))
			break loop
		}
		if m.pollFails >= 10 {
			fatal = fmt.Errorf("the proxy's admin API does not answer: %w", m.pollErr)
			break loop
		}
		if m.stage == "recovery" && m.backToHealthy() {
			m.action(fmt.Sprintf("%s is back: Healthy at full traffic; finishing in %s", m.failing, o.scaled(o.Tail)))
			m.banner = "Recovered: " + m.failing + " is Healthy again and takes its full share."
			m.stage, m.stageEnd = "finishing", time.Now().Add(o.scaled(o.Tail))
			stage.Reset(o.scaled(o.Tail))
		}
		m.draw()
	}

	// Stop the traffic, let the last answers land in the proxy's counters, and read them.
	stopGen()
	<-genDone
	m.mk.End = time.Now()
	if fatal != nil {
		return fatal
	}
	time.Sleep(300 * time.Millisecond)
	m.poll(context.WithoutCancel(ctx))
	m.draw()
	if m.live {
		// The journal scrolled by in the redrawn view: print it whole once.
		fmt.Fprintf(m.out, "\nFull journal and demo actions:\n")
		for _, l := range m.log {
			fmt.Fprintln(m.out, l)
		}
	}
	results := m.gen.snapshot()
	s := summarize(m.events, m.mk, m.metrics, results, m.st.Table, m.channels.Channels, m.attempts)
	s.render(m.out)
	writeFailedRequests(m.out, results, m.mk.Start, m.accessLog)
	if !m.mk.Interrupted {
		// After the summary, whose figures it leaves alone: one stream cut halfway.
		bs, err := m.brokenStream(ctx, m.api)
		switch {
		case err != nil:
			s.Problems = append(s.Problems, "the broken-stream scene: "+err.Error())
		default:
			bs.render(m.out)
			if !bs.OK() {
				s.Problems = append(s.Problems, "the stream cut halfway was not finished as the unbroken answer")
			}
		}
	}
	if len(s.Problems) > 0 {
		return fmt.Errorf("the story did not happen: %s", strings.Join(s.Problems, "; "))
	}
	return nil
}

// fail tells the failing channel's mock to fail every model it serves.
func (m *monitor) fail(ctx context.Context) error {
	ch := m.st.channel(m.failing)
	base := mockBase(m.st, m.failing)
	var parts []string
	for i, model := range m.mk.Models {
		up, _ := ch.Upstream(model)
		b, label := failure(i)
		m.mk.FailAt[model], m.mk.FailMode[model] = time.Now(), label
		if err := setBehavior(ctx, m.hc, base, up, &b); err != nil {
			return fmt.Errorf("mock %s: %w", m.failing, err)
		}
		parts = append(parts, fmt.Sprintf("%s %s", model, label))
	}
	m.banner = fmt.Sprintf("INCIDENT: %s fails: %s. Clients should not notice.", m.failing, strings.Join(parts, "; "))
	m.action(fmt.Sprintf("%s starts failing: %s", m.failing, strings.Join(parts, "; ")))
	return nil
}

// restore puts the failing channel's mock back to normal answers.
func (m *monitor) restore(ctx context.Context) error {
	ch := m.st.channel(m.failing)
	base := mockBase(m.st, m.failing)
	for _, model := range m.mk.Models {
		up, _ := ch.Upstream(model)
		m.mk.RecoverAt[model] = time.Now()
		if err := setBehavior(ctx, m.hc, base, up, nil); err != nil {
			return fmt.Errorf("mock %s: %w", m.failing, err)
		}
	}
	m.banner = fmt.Sprintf("RECOVERY: %s answers normally again; the proxy brings it back through cooldown, probes and the ramp.", m.failing)
	m.action(fmt.Sprintf("%s answers normally again (waiting for cooldown, probes, ramp; cap %s)", m.failing, m.o.scaled(m.o.RecoveryCap)))
	return nil
}

// backToHealthy: every model of the failing channel has completed a ramp since the recovery and
// is Healthy at 100% now.
func (m *monitor) backToHealthy() bool {
	for _, model := range m.mk.Models {
		done := false
		for _, ev := range m.events {
			if ev.Channel == m.failing && ev.Model == model && ev.Reason == health.ReasonRampCompleted && !ev.Time.Before(m.mk.RecoverAt[model]) {
				done = true
			}
		}
		if !done {
			return false
		}
		for _, c := range m.channels.Channels {
			if c.Channel == m.failing && c.Model == model && (c.Phase != health.PhaseHealthy.String() || c.TrafficPercent != 100) {
				return false
			}
		}
	}
	return true
}

// poll reads the journal, the live state and the metrics from the proxy's admin port.
func (m *monitor) poll(ctx context.Context) {
	var errs []error
	admin := adminapi.Client{HTTP: m.hc, BaseURL: m.admin}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// The live state first: its BootID says where to read the journal from (all of it after a
	// restart, which numbers events from 1 again).
	if cr, err := admin.Channels(pctx); err != nil {
		errs = append(errs, err)
	} else {
		slices.SortFunc(cr.Channels, func(a, b adminapi.ChannelState) int {
			return strings.Compare(a.Channel+"|"+a.Model, b.Channel+"|"+b.Model)
		})
		m.channels = *cr
		if ev, err := admin.Events(pctx, m.journal.Since(cr.BootID)); err != nil {
			errs = append(errs, err)
		} else {
			fresh, restarted := m.journal.Next(ev)
			if restarted {
				m.action("the proxy restarted: its journal starts over")
			}
			for _, e := range fresh {
				m.events = append(m.events, e)
				m.log = append(m.log, formatEvent(e, m.mk.Start))
			}
		}
	}
	if b, err := get(ctx, m.hc, m.admin+"/metrics"); err != nil {
		errs = append(errs, err)
	} else if met, err := ParseMetrics(strings.NewReader(string(b))); err != nil {
		errs = append(errs, err)
	} else {
		m.metrics = met
		now := time.Now()
		m.history = append(m.history, servedPoint{at: now,
			ok: met.SumBy("switchyard_upstream_attempts_total", map[string]string{"outcome": "success"}, "channel", "model")})
		for len(m.history) > 1 && now.Sub(m.history[1].at) >= 5*time.Second {
			m.history = m.history[1:]
		}
		if m.attempts == nil {
			m.attempts = map[string][]countPoint{}
		}
		for _, model := range m.mk.Models {
			n := 0.0
			for k, v := range met.SumBy("switchyard_upstream_attempts_total", map[string]string{"channel": m.failing, "model": model}, "outcome") {
				if k != "canceled" {
					n += v
				}
			}
			m.attempts[model] = append(m.attempts[model], countPoint{At: now, Value: n})
		}
	}
	if len(errs) > 0 {
		m.pollErr, m.pollFails = errors.Join(errs...), m.pollFails+1
	} else {
		m.pollErr, m.pollFails = nil, 0
	}
}

// frame assembles the current view from what poll read.
func (m *monitor) frame() frame {
	now := time.Now()
	f := frame{Elapsed: now.Sub(m.mk.Start), Stage: m.stage, Banner: m.banner, LogTotal: len(m.log)}
	if !m.stageEnd.IsZero() {
		f.StageLeft = max(m.stageEnd.Sub(now), 0)
	}
	results := m.gen.snapshot()
	f.Rate = rateSince(results, now, 5*time.Second)
	var served map[string]float64
	if n := len(m.history); n >= 2 {
		served = servedShares(m.history[0].ok, m.history[n-1].ok)
	}
	f.Rows = rowsFrom(m.channels, m.metrics, served)
	f.Failovers = m.metrics.Sum("switchyard_failovers_total", nil)
	counts := countClients(results, m.st.Models)
	for _, c := range counts {
		match := map[string]string{}
		if c.Model != "" {
			match["model"] = c.Model
		}
		total, errs := 0.0, 0.0
		for k, v := range m.metrics.SumBy("switchyard_requests_total", match, "model", "outcome") {
			model, outcome, _ := strings.Cut(k, "|")
			if !slices.Contains(m.st.Models, model) {
				continue
			}
			total += v
			if outcome != "success" {
				errs += v
			}
		}
		f.Clients = append(f.Clients, clientRow{Model: c.Model, ProxyTotal: total, ProxyErrors: errs, Gen: c})
	}
	f.Log = m.log
	if n := 14; len(f.Log) > n {
		f.Log = f.Log[len(f.Log)-n:]
	}
	return f
}

// draw redraws the live view in place, or (plain) prints new log lines and, every few seconds, a
// status line.
func (m *monitor) draw() {
	f := m.frame()
	m.frames++
	if m.live {
		var b strings.Builder
		b.WriteString("\x1b[H")
		cols, rows := termSize(m.out)
		for _, l := range fitScreen(renderFrame(f), len(f.Log), cols, rows) {
			b.WriteString(l)
			b.WriteString("\x1b[K\n")
		}
		b.WriteString("\x1b[J")
		fmt.Fprint(m.out, b.String())
		return
	}
	for ; m.printed < len(m.log); m.printed++ {
		fmt.Fprintln(m.out, m.log[m.printed])
	}
	if m.frames%5 == 0 {
		fmt.Fprintln(m.out, renderStatus(f))
	}
}
