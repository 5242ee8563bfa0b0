// Command bench measures what the Switchyard gateway costs and how fast it leaves a dead provider,
// with one command, side by side in one run: the same load straight to a mock upstream and
// through the real `switchyard proxy` binary (built at start), on loopback only.
//
//	go run ./hack/bench            # about 2-3 minutes
//	go run ./hack/bench --quick    # about 30 seconds
//
// It prints one markdown table and writes the figures as JSON (bin/bench-results.json by
// default). See docs/benchmarks.md for what each figure means.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/switchyard-io/switchyard/internal/procs"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchyard-io/switchyard/internal/adminapi"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case upstreamMode:
			exitOn(runUpstream(os.Args[2:]))
			return
		case profileMode:
			exitOn(runProfileProxy(os.Args[2:]))
			return
		case goProxyMode:
			exitOn(runGoProxy(os.Args[2:]))
			return
		}
	}
	exitOn(run(os.Args[1:]))
}

func exitOn(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// plan is how long each part runs: the default run or --quick.
type plan struct {
	rates         []int         // open-loop rates for the overhead
	targetRate    int           // the rate the latency targets are judged at
	rounds        int           // alternations direct/proxy per measurement
	slice         time.Duration // length of one open-loop slice
	satConns      int
	satSlice      time.Duration
	satRounds     int
	streamRate    int
	streamEvents  int
	streamGap     time.Duration // between a stream's events, as a model emitting tokens
	streamRounds  int
	streamSlice   time.Duration
	failoverPairs int
	ejectRate     int
	ejectWarm     time.Duration
	scaleRounds   int
	scaleSlice    time.Duration
	warm          time.Duration
	profileTime   time.Duration
}

func defaultPlan(quick bool) plan {
	// Many short alternations rather than a few long ones: a burst of load from elsewhere on the
	// machine then lands on both paths alike.
	p := plan{
		rates: []int{500, 1000, 2000}, targetRate: 1000, rounds: 10, slice: 800 * time.Millisecond,
		satConns: 64, satSlice: 2 * time.Second, satRounds: 4,
		streamRate: 100, streamEvents: 32, streamGap: 2 * time.Millisecond, streamRounds: 6, streamSlice: time.Second,
		failoverPairs: 400, ejectRate: 100, ejectWarm: 3 * time.Second,
		scaleRounds: 4, scaleSlice: time.Second, warm: 500 * time.Millisecond,
		profileTime: 10 * time.Second,
	}
	if quick {
		p.rounds, p.slice = 3, 500*time.Millisecond
		p.satRounds, p.satSlice = 2, 750*time.Millisecond
		p.streamRounds, p.streamSlice = 2, 750*time.Millisecond
		p.failoverPairs = 100
		p.ejectWarm = time.Second
		p.scaleRounds, p.scaleSlice = 2, 500*time.Millisecond
		p.warm = 300 * time.Millisecond
		p.profileTime = 5 * time.Second
	}
	return p
}

type options struct {
	quick    bool
	jsonPath string
	proxyBin string
	baseBin  string
	pprof    string
	pprofSc  string
	pprofAt  int
	noScale  bool
	noNginx  bool
	only     map[string]bool // nil: every part but realistic
	real     realPlan
}

// runs reports whether a part is measured. The realistic run takes about ten minutes and runs
// only when named.
func (o options) runs(part string) bool {
	if o.only == nil {
		return part != "realistic"
	}
	return o.only[part]
}

func run(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o options
	fs.BoolVar(&o.quick, "quick", false, "a shorter run (about 30 s) with fewer samples: p99.9 is rough")
	fs.StringVar(&o.jsonPath, "json", "", "write the results as JSON to this file (default bin/bench-results.json in the module root)")
	fs.StringVar(&o.proxyBin, "proxy-bin", "", "measure this switchyard binary instead of building ./cmd/switchyard (compare builds)")
	fs.StringVar(&o.baseBin, "baseline-bin", "", "also measure this switchyard binary (say, a build of main) side by side with the current one: before/after figures from one run")
	fs.StringVar(&o.pprof, "pprof", "", "also run the proxy code in-process under saturation and write its CPU profile to this file")
	fs.IntVar(&o.pprofAt, "pprof-rate", 0, "with --pprof: an open-loop rate in req/s instead of the closed-loop saturation load")
	fs.StringVar(&o.pprofSc, "pprof-scale", "", "also run the proxy code in-process with the 1,000-channel config at the target rate and write its CPU profile to this file")
	fs.BoolVar(&o.noScale, "no-scale", false, "skip the 1,000-channel scale measurement")
	fs.BoolVar(&o.noNginx, "no-nginx", false, "leave nginx out of the floors even when it is installed")
	fs.Func("proxy-env", "set KEY=VALUE in the proxy's environment, e.g. GOMAXPROCS=1 or GOGC=200 (repeatable; shown in the table)", func(v string) error {
		if !strings.Contains(v, "=") {
			return errors.New("want KEY=VALUE")
		}
		proxyEnv = append(proxyEnv, v)
		return nil
	})
	only := fs.String("only", "", "run only these parts, comma-separated: overhead, saturation, streaming, failover, ejection, clients, scale, goproxy, nginx, realistic (the table is partial); goproxy and nginx add those floors to the overhead and saturation runs, in the same slices; realistic (about 10 minutes) runs only when named")
	realConns := fs.String("realistic-conns", "200,1000,2000", "with --only realistic: the requests in flight, comma-separated")
	realRounds := fs.Int("realistic-rounds", 0, "with --only realistic: slices per path and load (default 2, 1 with --quick)")
	realNoTLS := fs.Bool("realistic-no-tls", false, "with --only realistic: plain HTTP upstream only")
	realNoStreams := fs.Bool("realistic-no-streams", false, "with --only realistic: plain answers only")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: go run ./hack/bench [flags]\n\nMeasures the gateway's overhead, failover cost and ejection time against a mock upstream on loopback.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *only != "" {
		o.only = map[string]bool{}
		known := []string{"overhead", "saturation", "streaming", "failover", "ejection", "clients", "scale", "goproxy", "nginx", "realistic"}
		for _, p := range strings.Split(*only, ",") {
			p = strings.TrimSpace(p)
			if !slices.Contains(known, p) {
				return fmt.Errorf("--only: unknown part %q (the parts: %s)", p, strings.Join(known, ", "))
			}
			o.only[p] = true
		}
	}
	o.real = defaultRealPlan(o.quick)
	o.real.conns = nil
	for _, f := range strings.Split(*realConns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 4000 {
			return fmt.Errorf("--realistic-conns: %q is not a count from 1 to 4000", f)
		}
		o.real.conns = append(o.real.conns, n)
	}
	if *realRounds > 0 {
		o.real.rounds = *realRounds
	}
	o.real.tls, o.real.streams = !*realNoTLS, !*realNoStreams
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	debug.SetGCPercent(400) // the load generator should disturb the measurement as little as it can

	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if o.jsonPath == "" {
		o.jsonPath = filepath.Join(root, "bin", "bench-results.json")
	}
	tmp, err := os.MkdirTemp("", "switchyard-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	b := &bench{ctx: ctx, opts: o, plan: defaultPlan(o.quick), real: o.real, tmp: tmp, began: time.Now()}
	b.res.Date = b.began.UTC().Format(time.RFC3339)
	b.res.Mode = map[bool]string{true: "quick", false: "default"}[o.quick]
	b.res.Machine = machine{Cores: runtime.NumCPU(), CPU: cpuModel(), Memory: memTotal(), OS: runtime.GOOS + "/" + runtime.GOARCH,
		Go: runtime.Version(), LoadAvgStart: loadAvg()}
	defer b.stopAll()

	if o.proxyBin == "" {
		b.logf("building ./cmd/switchyard")
		o.proxyBin = filepath.Join(tmp, "switchyard")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", o.proxyBin, "./cmd/switchyard")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/switchyard: %v\n%s", err, out)
		}
		b.res.Binary = "built from " + root
	} else {
		b.res.Binary = o.proxyBin
	}
	b.res.ProxyEnv = proxyEnv
	b.opts.proxyBin = o.proxyBin
	if err := b.runAll(); err != nil {
		return err
	}
	b.res.Machine.LoadAvgEnd = loadAvg()
	b.res.Seconds = round1(time.Since(b.began).Seconds())
	b.judge()

	fmt.Println(b.markdown())
	if err := os.MkdirAll(filepath.Dir(o.jsonPath), 0o755); err != nil {
		return err
	}
	out, _ := json.MarshalIndent(b.res, "", "  ")
	if err := os.WriteFile(o.jsonPath, append(out, '\n'), 0o644); err != nil {
		return err
	}
	b.logf("results written to %s", o.jsonPath)
	return nil
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("run the bench from inside the switchyard module (go run ./hack/bench)")
	}
	return filepath.Dir(gomod), nil
}

type bench struct {
	ctx   context.Context
	opts  options
	plan  plan
	real  realPlan
	tmp   string
	began time.Time
	res   results

	up       *procs.Child
	upAddr   string
	proxy    *proxyProc
	base     *proxyProc // --baseline-bin
	floors   []*floorProc
	children []*procs.Child
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%5.1fs] %s\n", time.Since(b.began).Seconds(), fmt.Sprintf(format, args...))
}

func (b *bench) stopAll() {
	for i := len(b.children) - 1; i >= 0; i-- {
		b.children[i].Stop(stopGrace)
	}
}

func (b *bench) runAll() error {
	var err error
	b.up, b.upAddr, err = startUpstream(b.tmp)
	if err != nil {
		return err
	}
	b.children = append(b.children, b.up)
	cfg, err := writeConfig(b.tmp, "main", mainConfig(b.upAddr))
	if err != nil {
		return err
	}
	b.proxy, err = startProxy(b.ctx, "proxy", b.tmp, b.opts.proxyBin, cfg)
	if err != nil {
		return err
	}
	b.children = append(b.children, b.proxy.Child)
	b.logf("upstream on %s, proxy on %s (admin %s), ready in %s", b.upAddr, b.proxy.api, b.proxy.admin, b.proxy.readyIn.Round(time.Millisecond))
	if b.opts.baseBin != "" {
		b.base, err = startProxy(b.ctx, "proxy-baseline", b.tmp, b.opts.baseBin, cfg)
		if err != nil {
			return err
		}
		b.children = append(b.children, b.base.Child)
		b.res.Baseline = &baselineResult{Binary: b.opts.baseBin}
		b.logf("baseline build %s on %s", b.opts.baseBin, b.base.api)
	}
	if err := b.startFloors(); err != nil {
		return err
	}

	steps := []struct {
		name string
		fn   func() error
	}{
		{"overhead", b.overhead},
		{"saturation", b.saturation},
		{"streaming", b.streaming},
		{"failover", b.failover},
		{"ejection", b.ejection},
		{"clients", b.clients},
		{"realistic", b.realistic},
	}
	for _, s := range steps {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		if !b.opts.runs(s.name) {
			continue
		}
		if err := s.fn(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if b.proxy.Exited() {
			return fmt.Errorf("the proxy exited during %s: %v\n%s", s.name, b.proxy.Err(), b.proxy.Tail(30))
		}
		for _, f := range b.floors {
			if f.c.Exited() {
				return fmt.Errorf("the %s exited during %s: %v\n%s", f.name, s.name, f.c.Err(), f.c.Tail(30))
			}
		}
	}
	b.stopFloors()
	if m, err := procStatus(b.proxy.PID()); err == nil {
		b.res.Proxy = procResult{RSSMiB: mib(m["VmRSS"]), PeakRSSMiB: mib(m["VmHWM"]), AnonMiB: mib(m["RssAnon"]), FileMiB: mib(m["RssFile"])}
	}
	b.proxy.Stop(stopGrace)
	if b.base != nil {
		rss, hwm := groupOf(b.base).mem()
		b.res.Baseline.Proxy = procResult{RSSMiB: mib(rss), PeakRSSMiB: mib(hwm)}
		b.base.Stop(stopGrace)
	}

	if b.opts.noScale || !b.opts.runs("scale") {
		b.res.Scale.Skipped = "not run"
	} else if err := b.scale(); err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	if b.opts.pprof != "" {
		if err := b.profile(b.opts.pprof, false); err != nil {
			return fmt.Errorf("pprof: %w", err)
		}
	}
	if b.opts.pprofSc != "" {
		if err := b.profile(b.opts.pprofSc, true); err != nil {
			return fmt.Errorf("pprof-scale: %w", err)
		}
	}
	return nil
}

const chatPath = "/v1/chat/completions"

var (
	plainBody  = []byte(`{"model":"` + modelOverhead + `","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Say hello in one short sentence."}],"temperature":0.2,"max_tokens":64}`)
	streamBody = []byte(`{"model":"` + modelOverhead + `","messages":[{"role":"user","content":"Say hello in one short sentence."}],"stream":true,"max_tokens":64}`)
)

func bodyFor(model string, stream bool) []byte {
	b := plainBody
	if stream {
		b = streamBody
	}
	return []byte(strings.Replace(string(b), modelOverhead, model, 1))
}

func clientHeader() http.Header {
	return http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer sk-client-key"}}
}

// directTarget sends to the upstream path the proxy's "main" channel uses.
func (b *bench) directTarget(name, channelPath string, body []byte, conns int) *target {
	return &target{name: name, url: "http://" + b.upAddr + channelPath + chatPath, body: body, header: clientHeader(), client: newClient(conns)}
}

func viaTarget(name, addr string, body []byte, conns int) *target {
	return &target{name: name, url: "http://" + addr + chatPath, body: body, header: clientHeader(), client: newClient(conns)}
}

// path is one way to the upstream under measurement, and the process group its CPU is charged to.
type path struct {
	t      *target
	g      procGroup
	res    runResult
	rounds []runResult // res, slice by slice
	cpu    float64     // of g, during this path's slices
	gen    float64     // of the load generator, during this path's slices
	up     float64     // of the upstream, during this path's slices
}

// interleave runs the same load on every path in turn, in the order sliceOrder gives each round
// (for two paths: AB, BA, AB, ...), so that drift on a shared machine hits all of them alike. warm
// runs once per path first and is not recorded.
func (b *bench) interleave(paths []*path, rounds int, warm, run func(*target) runResult) {
	self, upPID := os.Getpid(), b.up.PID()
	gen := procGroup{pids: func() []int { return []int{self} }}
	up := procGroup{pids: func() []int { return []int{upPID} }}
	for _, p := range paths {
		warm(p.t)
	}
	for r := 0; r < rounds && b.ctx.Err() == nil; r++ {
		for _, i := range sliceOrder(len(paths), r) {
			p := paths[i]
			c0, g0, u0 := p.g.cpu(), gen.cpu(), up.cpu()
			rr := run(p.t)
			p.res.add(rr)
			p.rounds = append(p.rounds, rr)
			p.cpu += p.g.cpu() - c0
			p.gen += gen.cpu() - g0
			p.up += up.cpu() - u0
		}
	}
}

// sliceOrder is the order of n paths in round r: a Williams design. Over n rounds (2n for an
// odd n) every path takes every place in the round equally often, and follows every other path
// equally often. Rotating one order (ABC, BCA, CAB) would do the first but not the second: B
// would always follow A, so whatever a slice leaves behind (a backlog, the generator's garbage, a
// proxy's GC debt) would always land on the same neighbour. For two paths both are AB, BA, ...
func sliceOrder(n, r int) []int {
	if n <= 0 {
		return nil
	}
	row := r % n
	if n%2 == 1 {
		row = r % (2 * n)
	}
	order := make([]int, n)
	for j := range order {
		// The first round: 0, 1, n-1, 2, n-2, ...; the others add the round to it.
		k := (j + 1) / 2
		if j%2 == 0 && j > 0 {
			k = n - j/2
		}
		order[j] = (k + row) % n
	}
	if row >= n { // odd n: the second n rounds are the first n backwards
		slices.Reverse(order)
	}
	return order
}

func (b *bench) openLoops(paths []*path, rate, rounds int, slice time.Duration) {
	b.interleave(paths, rounds,
		func(t *target) runResult { return openLoop(b.ctx, t, rate, b.plan.warm, nil) },
		func(t *target) runResult { return openLoop(b.ctx, t, rate, slice, nil) })
}

// proxies are the proxy builds measured side by side: the current one and, with --baseline-bin,
// the baseline.
func (b *bench) proxies() []*proxyProc {
	if b.base != nil {
		return []*proxyProc{b.proxy, b.base}
	}
	return []*proxyProc{b.proxy}
}

func groupOf(p *proxyProc) procGroup {
	pid := p.PID()
	return procGroup{pids: func() []int { return []int{pid} }}
}

// measurePaths is direct plus one path per proxy build, each built by mk.
func (b *bench) measurePaths(direct *target, mk func(p *proxyProc) *target) []*path {
	paths := []*path{{t: direct}}
	for _, p := range b.proxies() {
		paths = append(paths, &path{t: mk(p), g: groupOf(p)})
	}
	return paths
}

func (b *bench) overhead() error {
	for _, rate := range b.plan.rates {
		paths := b.measurePaths(b.directTarget("direct", "/main/v1", plainBody, 256), func(p *proxyProc) *target {
			return viaTarget("switchyard", p.api, plainBody, 256)
		})
		var floors []*path // the floors are measured at the target rate only
		if rate == b.plan.targetRate {
			floors = b.floorPaths(256)
		}
		b.logf("overhead at %d req/s, open loop: %d × %s per path%s", rate, b.plan.rounds, b.plan.slice, withFloors(floors))
		b.openLoops(append(paths, floors...), rate, b.plan.rounds, b.plan.slice)
		rr := rateResult(rate, paths[0], paths[1])
		b.res.Overhead = append(b.res.Overhead, rr)
		b.logf("  direct p50 %s p99 %s | switchyard p50 %s p99 %s | added p50 %s p99 %s p99.9 %s",
			us(rr.Direct.P50), us(rr.Direct.P99), us(rr.Via.P50), us(rr.Via.P99), us(rr.AddedP50), us(rr.AddedP99), us(rr.AddedP999))
		if len(paths) > 2 {
			br := rateResult(rate, paths[0], paths[2])
			b.res.Baseline.Overhead = append(b.res.Baseline.Overhead, br)
			b.logf("  baseline build: p50 %s p99 %s | added p50 %s p99 %s p99.9 %s", us(br.Via.P50), us(br.Via.P99), us(br.AddedP50), us(br.AddedP99), us(br.AddedP999))
		}
		for i, fp := range floors {
			f := b.floors[i]
			f.res.Overhead = rateResult(rate, paths[0], fp)
			o := f.res.Overhead
			b.logf("  %s: p50 %s p99 %s | added p50 %s p99 %s p99.9 %s", f.name, us(o.Via.P50), us(o.Via.P99), us(o.AddedP50), us(o.AddedP99), us(o.AddedP999))
		}
	}
	return nil
}

func rateResult(rate int, d, v *path) overheadResult {
	dd, vd := newDist(d.res.samples, false), newDist(v.res.samples, false)
	rr := overheadResult{Rate: rate, Direct: latOf(dd, d.res), Via: latOf(vd, v.res)}
	rr.AddedP50 = rr.Via.P50 - rr.Direct.P50
	rr.AddedP99 = rr.Via.P99 - rr.Direct.P99
	rr.AddedP999 = rr.Via.P999 - rr.Direct.P999
	rr.PairedAddedP50, rr.PairedAddedP99 = paired(d, v, 0.5), paired(d, v, 0.99)
	rr.Rounds = len(v.rounds)
	if v.res.sent > 0 {
		rr.ViaCPUPer1k = round3(v.cpu * 1000 / float64(v.res.sent))
	}
	return rr
}

// paired is the median over rounds of (v's quantile q in its slice) - (d's in its slice of the
// same round): a burst of load from elsewhere that hits one slice moves one round, not the result.
func paired(d, v *path, q float64) float64 {
	var diffs []float64
	for i := range min(len(d.rounds), len(v.rounds)) {
		dd, vd := newDist(d.rounds[i].samples, false), newDist(v.rounds[i].samples, false)
		if len(dd) == 0 || len(vd) == 0 {
			continue
		}
		diffs = append(diffs, usf(vd.q(q))-usf(dd.q(q)))
	}
	return medianF(diffs)
}

func latOf(d dist, r runResult) latency {
	l := latency{N: len(d), Errors: r.errors + r.skipped, P50: usf(d.q(0.5)), P99: usf(d.q(0.99)), P999: usf(d.q(0.999))}
	if r.firstErr != nil {
		l.FirstError = r.firstErr.Error()
	}
	return l
}

// saturate measures closed-loop throughput of every path, interleaved; the results compare each
// path after the first (direct) with it.
func (b *bench) saturate(paths []*path) []saturationResult {
	conns := b.plan.satConns
	b.interleave(paths, b.plan.satRounds,
		func(t *target) runResult { return closedLoop(b.ctx, t, conns, b.plan.warm) },
		func(t *target) runResult { return closedLoop(b.ctx, t, conns, b.plan.satSlice) })
	d := paths[0]
	var out []saturationResult
	for _, v := range paths[1:] {
		s := saturationResult{Conns: conns}
		if d.res.elapsed > 0 {
			s.DirectRPS = round0(float64(d.res.sent-d.res.errors) / d.res.elapsed.Seconds())
		}
		if v.res.elapsed > 0 {
			s.ViaRPS = round0(float64(v.res.sent-v.res.errors) / v.res.elapsed.Seconds())
		}
		if s.DirectRPS > 0 {
			s.Ratio = round3(s.ViaRPS / s.DirectRPS)
		}
		if n := float64(v.res.sent); n > 0 {
			s.ViaCPUPer1k = round3(v.cpu * 1000 / n)
			s.ViaLoadGenCPUPer1k = round3(v.gen * 1000 / n)
			s.ViaUpstreamCPUPer1k = round3(v.up * 1000 / n)
			s.ViaCoresBusy = round2((v.cpu + v.gen + v.up) / v.res.elapsed.Seconds())
		}
		if n := float64(d.res.sent); n > 0 {
			s.DirectLoadGenCPUPer1k = round3(d.gen * 1000 / n)
			s.DirectUpstreamCPUPer1k = round3(d.up * 1000 / n)
			s.DirectCoresBusy = round2((d.gen + d.up) / d.res.elapsed.Seconds())
		}
		s.DirectP50, s.ViaP50 = usf(newDist(d.res.samples, false).median()), usf(newDist(v.res.samples, false).median())
		s.Errors = d.res.errors + v.res.errors
		if d.res.firstErr != nil {
			s.FirstError = d.res.firstErr.Error()
		} else if v.res.firstErr != nil {
			s.FirstError = v.res.firstErr.Error()
		}
		out = append(out, s)
	}
	return out
}

func (b *bench) saturation() error {
	conns := b.plan.satConns
	paths := b.measurePaths(b.directTarget("direct", "/main/v1", plainBody, conns), func(p *proxyProc) *target {
		return viaTarget("switchyard", p.api, plainBody, conns)
	})
	nproxies := len(paths) - 1
	floors := b.floorPaths(conns)
	b.logf("saturation: closed loop, %d connections, %d × %s per path%s", b.plan.satConns, b.plan.satRounds, b.plan.satSlice, withFloors(floors))
	res := b.saturate(append(paths, floors...))
	b.res.Saturation = res[0]
	s := b.res.Saturation
	b.logf("  direct %.0f req/s, switchyard %.0f req/s: ratio %.2f", s.DirectRPS, s.ViaRPS, s.Ratio)
	b.logf("  CPU s per 1,000 requests: direct: load generator %.3f + upstream %.3f (%.2f cores busy); through the proxy: load generator %.3f + upstream %.3f + proxy %.3f (%.2f cores busy)",
		s.DirectLoadGenCPUPer1k, s.DirectUpstreamCPUPer1k, s.DirectCoresBusy, s.ViaLoadGenCPUPer1k, s.ViaUpstreamCPUPer1k, s.ViaCPUPer1k, s.ViaCoresBusy)
	if nproxies > 1 {
		b.res.Baseline.Saturation = res[1]
		b.logf("  baseline build %.0f req/s: ratio %.2f, proxy CPU %.3f s per 1,000 requests", res[1].ViaRPS, res[1].Ratio, res[1].ViaCPUPer1k)
	}
	for i, f := range b.floors {
		f.res.Saturation = res[nproxies+i]
		s := f.res.Saturation
		b.logf("  %s %.0f req/s: ratio %.2f, CPU %.3f s per 1,000 requests", f.name, s.ViaRPS, s.Ratio, s.ViaCPUPer1k)
	}
	return nil
}

// streaming sends streams whose events the upstream writes p.streamGap apart, as a model emits
// tokens, and times every event. Back to back, the events of a stream arrive at the proxy
// together and go out in one write, and how long the client takes to read them says nothing of
// what the proxy adds to each.
func (b *bench) streaming() error {
	p := b.plan
	if _, err := parseEventGap(p.streamGap.String()); err != nil {
		return err
	}
	b.logf("streaming: %d streams/s of %d events %s apart, open loop, %d × %s per path", p.streamRate, p.streamEvents, p.streamGap, p.streamRounds, p.streamSlice)
	hdr := clientHeader()
	hdr.Set(eventsHeader, strconv.Itoa(p.streamEvents))
	hdr.Set(gapHeader, p.streamGap.String())
	stream := func(t *target) *target {
		t.header, t.stream, t.events = hdr, true, p.streamEvents
		return t
	}
	paths := b.measurePaths(stream(b.directTarget("direct", "/main/v1", streamBody, 256)), func(px *proxyProc) *target {
		return stream(viaTarget("switchyard", px.api, streamBody, 256))
	})
	b.openLoops(paths, p.streamRate, p.streamRounds, p.streamSlice)
	b.res.Streaming = streamOf(p, paths[0], paths[1])
	s := b.res.Streaming
	b.logf("  TTFT added p50 %s p99 %s; each later event: direct %s, switchyard %s, added %s (p99 %s): the stream starts %s later, each event crosses in %s more",
		us(s.AddedTTFTP50), us(s.AddedTTFTP99), us(s.DirectEvent.P50), us(s.ViaEvent.P50), plus(s.AddedPerEvent), plus(s.AddedPerEventP99), plus(s.AddedStartP50), plus(s.AddedTransitP50))
	if len(paths) > 2 {
		b.res.Baseline.Streaming = streamOf(p, paths[0], paths[2])
		s := b.res.Baseline.Streaming
		b.logf("  baseline build: TTFT added p50 %s p99 %s; each later event added %s (p99 %s): the stream starts %s later, each event crosses in %s more",
			us(s.AddedTTFTP50), us(s.AddedTTFTP99), plus(s.AddedPerEvent), plus(s.AddedPerEventP99), plus(s.AddedStartP50), plus(s.AddedTransitP50))
	}
	return nil
}

func streamOf(p plan, d, v *path) streamResult {
	dt, vt := newDist(d.res.samples, true), newDist(v.res.samples, true)
	s := streamResult{Events: p.streamEvents, Rate: p.streamRate, EventGapMs: round3(float64(p.streamGap) / float64(time.Millisecond)),
		DirectTTFT: latOf(dt, d.res), ViaTTFT: latOf(vt, v.res)}
	s.AddedTTFTP50 = round1(s.ViaTTFT.P50 - s.DirectTTFT.P50)
	s.AddedTTFTP99 = round1(s.ViaTTFT.P99 - s.DirectTTFT.P99)
	// The events after the first (the first is the TTFT): per index, the median arrival over the
	// streams of each path; the added time per event is the median over the indices of via's
	// minus direct's. Its p99 is that of the pooled lateness (arrival less i × gap).
	s.AddedByIndex = eventAdded(eventMedians(d.res.samples), eventMedians(v.res.samples))
	if len(s.AddedByIndex) > 1 {
		s.AddedPerEvent = medianF(slices.Clone(s.AddedByIndex[1:]))
	}
	dl, vl := lateness(d.res.samples, p.streamGap), lateness(v.res.samples, p.streamGap)
	s.DirectEvent, s.ViaEvent = latOf(dl, d.res), latOf(vl, v.res)
	s.AddedPerEventP99 = round1(s.ViaEvent.P99 - s.DirectEvent.P99)
	ds, vs := streamStarts(d.res.samples), streamStarts(v.res.samples)
	s.DirectStart, s.ViaStart = latOf(ds, d.res), latOf(vs, v.res)
	s.AddedStartP50 = round1(s.ViaStart.P50 - s.DirectStart.P50)
	s.AddedStartP99 = round1(s.ViaStart.P99 - s.DirectStart.P99)
	dx, vx := transits(d.res.samples), transits(v.res.samples)
	s.DirectTransit, s.ViaTransit = latOf(dx, d.res), latOf(vx, v.res)
	s.AddedTransitP50 = round1(s.ViaTransit.P50 - s.DirectTransit.P50)
	s.AddedTransitP99 = round1(s.ViaTransit.P99 - s.DirectTransit.P99)
	if v.res.sent > 0 {
		s.ViaCPUPer1k = round3(v.cpu * 1000 / float64(v.res.sent))
	}
	return s
}

// failover alternates, one at a time: a clean request through the proxy, a request whose first
// attempt gets a 503 (fo-a) and whose second succeeds (fo-b), and the failing upstream answer
// fetched directly: the upstream's own time for the failed attempt.
func (b *bench) failover() error {
	n := b.plan.failoverPairs
	b.logf("failover: %d × (clean, 503-then-success, direct 503), one at a time", n)
	clean := viaTarget("clean", b.proxy.api, bodyFor(modelFailover, false), 4)
	fail := viaTarget("failover", b.proxy.api, bodyFor(modelFailover, false), 4)
	fail.header = clientHeader()
	fail.header.Set(failHeader, "1")
	d503 := b.directTarget("direct-503", "/fo-a/v1", bodyFor(modelFailover, false), 4)
	d503.header = fail.header
	d503.expect = http.StatusServiceUnavailable
	var rc, rf, rd runResult
	for i := 0; i < n+20 && b.ctx.Err() == nil; i++ {
		sc, sf, sd := clean.do(b.ctx, nil), fail.do(b.ctx, nil), d503.do(b.ctx, nil)
		if i < 20 {
			continue // warm-up: connections, the proxy's caches
		}
		for _, x := range []struct {
			r *runResult
			s sample
		}{{&rc, sc}, {&rf, sf}, {&rd, sd}} {
			x.r.sent++
			if x.s.err != nil {
				x.r.errors++
				if x.r.firstErr == nil {
					x.r.firstErr = x.s.err
				}
				continue
			}
			x.r.samples = append(x.r.samples, x.s)
		}
	}
	dc, df, dd := newDist(rc.samples, false), newDist(rf.samples, false), newDist(rd.samples, false)
	f := failoverResult{Clean: latOf(dc, rc), Failover: latOf(df, rf), Upstream503: latOf(dd, rd)}
	f.ExtraP50 = f.Failover.P50 - f.Clean.P50
	f.ExtraP99 = f.Failover.P99 - f.Clean.P99
	f.RetryOverheadP50 = f.ExtraP50 - f.Upstream503.P50
	f.RetryOverheadP99 = f.ExtraP99 - f.Upstream503.P99
	b.res.Failover = f
	b.logf("  clean p50 %s, failover p50 %s: extra %s, of which the upstream's 503 takes %s: retry overhead %s (p99 %s)",
		us(f.Clean.P50), us(f.Failover.P50), us(f.ExtraP50), us(f.Upstream503.P50), us(f.RetryOverheadP50), us(f.RetryOverheadP99))
	return nil
}

// ejection: steady load at ejectRate on bench-eject; then eject-a starts failing every request;
// the time to its Ejected event in the proxy's journal is the ejection time.
func (b *bench) ejection() error {
	p := b.plan
	b.logf("ejection: %d req/s, %s healthy, then eject-a fails 100%%", p.ejectRate, p.ejectWarm)
	t := viaTarget("eject", b.proxy.api, bodyFor(modelEject, false), 64)
	openLoop(b.ctx, t, p.ejectRate, p.ejectWarm, nil)

	adminURL := "http://" + b.proxy.admin + adminapi.EventsPath
	since, err := lastSeq(adminURL)
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	stopLoad := sync.OnceFunc(func() { close(stop) })
	defer stopLoad()
	loadDone := make(chan runResult, 1)
	// Start the load first, then flip: the failing starts while requests keep arriving on schedule.
	go func() { loadDone <- openLoopUntil(b.ctx, stop, t, p.ejectRate, 25*time.Second, nil) }()
	time.Sleep(5 * time.Millisecond)
	flipAt, err := b.upstreamControl("eject-fail")
	if err != nil {
		return err
	}
	e := ejectResult{Rate: p.ejectRate, Rule: "(not ejected within 20 s)"}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && b.ctx.Err() == nil {
		ev, ok, err := findEjection(adminURL, since, "eject-a", modelEject)
		if err != nil {
			return err
		}
		if ok {
			e.Millis = round1(float64(ev.Time.UnixNano()-flipAt) / 1e6)
			e.Rule, e.Message = ev.Reason, ev.Message
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n, err := b.upstreamStats(); err == nil {
		e.FailedAttempts = n[1]
	}
	time.Sleep(500 * time.Millisecond) // requests after the ejection: they must all succeed too
	stopLoad()
	r := <-loadDone
	e.ClientErrors = r.errors
	e.Requests = r.sent
	if r.firstErr != nil {
		e.FirstError = r.firstErr.Error()
	}
	if _, err := b.upstreamControl("eject-ok"); err != nil {
		return err
	}
	b.res.Ejection = e
	b.logf("  ejected after %.1f ms and %d failed attempts (%s: %s); %d client errors in %d requests", e.Millis, e.FailedAttempts, e.Rule, e.Message, e.ClientErrors, e.Requests)
	return nil
}

// upstreamStats reads /_bench/stats: 503s served on fo-a and on eject-a.
func (b *bench) upstreamStats() ([2]int, error) {
	var n [2]int
	resp, err := http.Get("http://" + b.upAddr + "/_bench/stats")
	if err != nil {
		return n, err
	}
	defer resp.Body.Close()
	_, err = fmt.Fscan(resp.Body, &n[0], &n[1])
	return n, err
}

// upstreamControl calls /_bench/NAME on the upstream and returns the number it answers (if any).
func (b *bench) upstreamControl(name string) (int64, error) {
	resp, err := http.Post("http://"+b.upAddr+"/_bench/"+name, "text/plain", nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	f := strings.Fields(string(body))
	if len(f) == 0 {
		return 0, nil
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n, nil
}

func getEvents(url string, since uint64) (adminapi.EventsResponse, error) {
	var out adminapi.EventsResponse
	resp, err := http.Get(fmt.Sprintf("%s?since=%d", url, since))
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

func lastSeq(url string) (uint64, error) {
	ev, err := getEvents(url, 0)
	if err != nil {
		return 0, err
	}
	var seq uint64
	for _, e := range ev.Events {
		seq = max(seq, e.Seq)
	}
	return seq, nil
}

func findEjection(url string, since uint64, channel, model string) (adminapi.Event, bool, error) {
	ev, err := getEvents(url, since)
	if err != nil {
		return adminapi.Event{}, false, err
	}
	for _, e := range ev.Events {
		if e.Channel == channel && e.Model == model && e.To == "Ejected" {
			return e, true, nil
		}
	}
	return adminapi.Event{}, false, nil
}

// scale: a second proxy with 1,000 channels × 5 models; RSS and per-request overhead at the
// target rate, against direct in the same run.
func (b *bench) scale() error {
	p := b.plan
	b.logf("scale: %d channels × %d models (%d channel×model keys)", scaleChannels, scaleModels, scaleChannels*scaleModels)
	cfg, err := writeConfig(b.tmp, "scale", scaleConfig(b.upAddr))
	if err != nil {
		return err
	}
	bins := []string{b.opts.proxyBin}
	if b.base != nil {
		bins = append(bins, b.opts.baseBin)
	}
	var procs []*proxyProc
	for i, bin := range bins {
		sp, err := startProxy(b.ctx, fmt.Sprintf("proxy-scale-%d", i), b.tmp, bin, cfg)
		if err != nil {
			return err
		}
		b.children = append(b.children, sp.Child)
		defer sp.Stop(stopGrace)
		procs = append(procs, sp)
	}
	time.Sleep(1500 * time.Millisecond) // a background tick or two: gauges for every key
	paths := []*path{{t: b.directTarget("direct", "/main/v1", plainBody, 256)}}
	var idle []int64
	for _, sp := range procs {
		g := groupOf(sp)
		rss, _ := g.mem()
		idle = append(idle, rss)
		paths = append(paths, &path{t: viaTarget("switchyard-scale", sp.api, bodyFor(scaleTarget, false), 256), g: g})
	}
	b.openLoops(paths, p.targetRate, p.scaleRounds, p.scaleSlice)
	for i, sp := range procs {
		rr := rateResult(p.targetRate, paths[0], paths[i+1])
		rss, hwm := paths[i+1].g.mem()
		res := scaleResult{Channels: scaleChannels, Models: scaleModels, Keys: scaleChannels * scaleModels,
			ReadyMillis: sp.readyIn.Milliseconds(), IdleRSSMiB: mib(idle[i]), RSSMiB: mib(rss), PeakRSSMiB: mib(hwm), Overhead: rr}
		who := ""
		if i == 0 {
			b.res.Scale = res
		} else {
			b.res.Baseline.Scale = &res
			who = "baseline build: "
		}
		b.logf("  %sready in %s, RSS idle %.1f MiB, peak %.1f MiB; added p50 %s p99 %s (paired %s / %s) at %d req/s, CPU %.3f s per 1,000 requests",
			who, sp.readyIn.Round(time.Millisecond), mib(idle[i]), mib(hwm), us(rr.AddedP50), us(rr.AddedP99), us(rr.PairedAddedP50), us(rr.PairedAddedP99), p.targetRate, rr.ViaCPUPer1k)
	}
	return nil
}

// floorProc is another proxy (nginx, the Go standard library's) in front of the same upstream: the
// floor for "a proxy in the path" on this machine. It runs from before the overhead run to after
// the saturation run and takes its slices in the same rounds as the proxy: measured later, in
// rounds of its own, it met another level of noise from elsewhere on the machine (a direct p50 of
// 287 µs during the proxy's slices and 200 µs during nginx's, in one run), and its overhead could
// not be set next to the proxy's.
type floorProc struct {
	name string // in the log and the table
	c    *procs.Child
	addr string
	g    procGroup // nginx: the master and its workers
	res  *floorResult
}

// startFloors starts the floors that take part: the Go reverse proxy, and nginx when installed.
// They take part in the overhead run (at the target rate) and the saturation run only.
func (b *bench) startFloors() error {
	measured := b.opts.runs("overhead") || b.opts.runs("saturation")
	b.res.GoProxy = &floorResult{Skipped: "not run"}
	if b.opts.runs("goproxy") {
		if !measured {
			b.res.GoProxy.Skipped = "needs overhead or saturation"
			b.logf("Go reverse proxy floor: skipped (needs overhead or saturation)")
		} else if err := b.startGoProxy(); err != nil {
			return fmt.Errorf("goproxy: %w", err)
		}
	}
	b.res.Nginx = &floorResult{Skipped: "not run"}
	if !b.opts.noNginx && b.opts.runs("nginx") {
		if !measured {
			b.res.Nginx.Skipped = "needs overhead or saturation"
			b.logf("nginx floor: skipped (needs overhead or saturation)")
		} else if err := b.startNginx(); err != nil {
			return fmt.Errorf("nginx: %w", err)
		}
	}
	return nil
}

// startGoProxy starts the Go standard library's reverse proxy (this program, as a child).
func (b *bench) startGoProxy() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	addrs, err := procs.FreeAddrs(1)
	if err != nil {
		return err
	}
	addr := addrs[0]
	c, stdout, err := startChild("go-reverse-proxy", b.tmp, self, goProxyMode, "--listen", addr, "--upstream", b.upAddr)
	if err != nil {
		return err
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	b.children = append(b.children, c)
	if err := procs.WaitHTTP(b.ctx, "http://"+addr+"/go-ready", 10*time.Second, c); err != nil {
		c.Stop(stopGrace)
		return fmt.Errorf("the Go reverse proxy did not start: %w", err)
	}
	b.res.GoProxy = &floorResult{Version: "net/http/httputil " + runtime.Version()}
	b.addFloor("Go reverse proxy", c, addr, b.res.GoProxy)
	return nil
}

// startNginx starts a plain nginx reverse proxy, when installed; it is skipped (not an error) when
// it is not or does not start.
func (b *bench) startNginx() error {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		b.res.Nginx.Skipped = "nginx is not installed"
		b.logf("nginx floor: skipped (nginx is not installed)")
		return nil
	}
	addrs, err := procs.FreeAddrs(1)
	if err != nil {
		return err
	}
	addr := addrs[0]
	dir := filepath.Join(b.tmp, "nginx")
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxConf(addr, b.upAddr, dir)), 0o644); err != nil {
		return err
	}
	c, stdout, err := startChild("nginx", b.tmp, bin, "-p", dir, "-c", conf)
	if err != nil {
		return err
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	b.children = append(b.children, c)
	if err := procs.WaitHTTP(b.ctx, "http://"+addr+"/nginx-ready", 10*time.Second, c); err != nil {
		c.Stop(stopGrace)
		b.res.Nginx.Skipped = "nginx did not start: " + err.Error()
		b.logf("nginx floor: skipped (%s)", b.res.Nginx.Skipped)
		return nil
	}
	b.res.Nginx = &floorResult{Version: nginxVersion(bin)}
	b.addFloor("nginx", c, addr, b.res.Nginx)
	return nil
}

// addFloor puts a started floor into the overhead and saturation runs; its CPU and memory are its
// process's and, for nginx, its workers'.
func (b *bench) addFloor(name string, c *procs.Child, addr string, res *floorResult) {
	pid := c.PID()
	g := procGroup{pids: func() []int { return append([]int{pid}, childPIDs(pid)...) }}
	b.floors = append(b.floors, &floorProc{name: name, c: c, addr: addr, g: g, res: res})
	b.logf("%s (%s) on %s, measured in the same slices as the proxy", name, res.Version, addr)
}

// floorPaths is one path per running floor, to go after the proxies' in an openLoops or saturate
// call.
func (b *bench) floorPaths(conns int) []*path {
	var out []*path
	for _, f := range b.floors {
		t := &target{name: f.name, url: "http://" + f.addr + "/main/v1" + chatPath, body: plainBody, header: clientHeader(), client: newClient(conns)}
		out = append(out, &path{t: t, g: f.g})
	}
	return out
}

// withFloors names the floors in a log line.
func withFloors(floors []*path) string {
	if len(floors) == 0 {
		return ""
	}
	var names []string
	for _, p := range floors {
		names = append(names, p.t.name)
	}
	return ", with " + strings.Join(names, " and ") + " in the same rounds"
}

// stopFloors keeps each floor's peak RSS (over both runs) and stops it.
func (b *bench) stopFloors() {
	for _, f := range b.floors {
		_, hwm := f.g.mem()
		f.res.PeakRSSMiB = mib(hwm)
		f.c.Stop(stopGrace)
	}
}

func nginxConf(listen, upstream, dir string) string {
	return fmt.Sprintf(`daemon off;
master_process on;
worker_processes auto;
pid %[3]s/nginx.pid;
error_log %[3]s/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path %[3]s/body;
    proxy_temp_path %[3]s/proxy;
    fastcgi_temp_path %[3]s/fastcgi;
    uwsgi_temp_path %[3]s/uwsgi;
    scgi_temp_path %[3]s/scgi;
    keepalive_requests 1000000;
    upstream bench_upstream {
        server %[2]s;
        keepalive 256;
    }
    server {
        listen %[1]s;
        location = /nginx-ready { return 200 "ok\n"; }
        location / {
            proxy_pass http://bench_upstream;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
}
`, listen, upstream, dir)
}

func nginxVersion(bin string) string {
	out, _ := exec.Command(bin, "-v").CombinedOutput()
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version: "))
}

// profile runs the proxy code in this program (profile mode) and keeps its CPU profile
// (go tool pprof -top FILE): the main config under the saturation load, or the scale config at
// the target rate.
func (b *bench) profile(file string, scale bool) error {
	cfg, body := filepath.Join(b.tmp, "main"), plainBody
	if scale {
		cfg, body = filepath.Join(b.tmp, "scale"), bodyFor(scaleTarget, false)
		if _, err := os.Stat(cfg); err != nil {
			if _, err := writeConfig(b.tmp, "scale", scaleConfig(b.upAddr)); err != nil {
				return err
			}
		}
	}
	path, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	pp, err := startProxy(b.ctx, "proxy-profile", b.tmp, "", cfg, "--cpuprofile", path)
	if err != nil {
		return err
	}
	b.children = append(b.children, pp.Child)
	via := viaTarget("switchyard-profile", pp.api, body, b.plan.satConns)
	var r runResult
	switch {
	case scale:
		b.logf("pprof (scale config): %d req/s, open loop, %s, into %s", b.plan.targetRate, b.plan.profileTime, path)
		r = openLoop(b.ctx, via, b.plan.targetRate, b.plan.profileTime, nil)
	case b.opts.pprofAt > 0:
		b.logf("pprof: %d req/s, open loop, %s, into %s", b.opts.pprofAt, b.plan.profileTime, path)
		r = openLoop(b.ctx, via, b.opts.pprofAt, b.plan.profileTime, nil)
	default:
		b.logf("pprof: %d connections, closed loop, %s, into %s", b.plan.satConns, b.plan.profileTime, path)
		r = closedLoop(b.ctx, via, b.plan.satConns, b.plan.profileTime)
	}
	pp.Stop(stopGrace)
	if scale {
		b.res.ProfileScale = path
	} else {
		b.res.Profile = path
	}
	b.logf("  %.0f req/s while profiled, %d errors; go tool pprof -top %s", float64(r.sent)/r.elapsed.Seconds(), r.errors, path)
	return nil
}
