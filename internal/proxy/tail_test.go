package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // the children's profiling port (SWITCHYARD_TAIL_PPROF)
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/routing/routingtest"
)

// BenchmarkTailAtScale is the added latency of a proxy with a few channels (one team of
// routingtest: 5 channels × 5 models, 25 keys) and of one at the benchmarked scale (200 teams,
// 5,000 keys) at a fixed rate, open loop, against the upstream alone, in the same rounds: the
// load generator is this process, the upstream and each proxy a child process of their own (this
// test binary started again, TestTailChild), as in make bench, so that one proxy's garbage
// collector pauses neither the others nor the client. Each proxy runs its background loop at the
// production tick (250 ms), on the real clock.
//
// One iteration is one round: every path takes one slice (tailSlice at tailRate) in an order that
// changes each round. So -benchtime=10x is 10 rounds. With SWITCHYARD_TAIL_BASELINE=PATH (a test
// binary of this package built from another commit: go test -c -o PATH ./internal/proxy) that
// build's two proxies take part too, in the same rounds: before and after side by side. Other
// switches: SWITCHYARD_TAIL_NOTICK=1 adds a scale proxy whose background loop never runs (what
// the periodic work costs the requests), SWITCHYARD_TAIL_PROXY_ENV=K=V,... sets the proxies'
// environment (GOGC, GOMAXPROCS), SWITCHYARD_TAIL_PPROF=1 has every child serve net/http/pprof
// (its address goes to stderr). The table of figures is in the benchmark's log.
//
//	go test ./internal/proxy -run '^$' -bench TailAtScale -benchtime 10x
func BenchmarkTailAtScale(b *testing.B) {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	up := startTailChild(b, self, "upstream", nil)
	direct := newTailPath("direct", "http://"+up.addr+"/v1/chat/completions", "gpt-4o-2024-08-06")
	paths := []*tailPath{direct}
	bins := []struct{ name, bin string }{{"", self}}
	if base := os.Getenv("SWITCHYARD_TAIL_BASELINE"); base != "" {
		bins = append(bins, struct{ name, bin string }{" (baseline)", base})
	}
	for _, bin := range bins {
		sizes := []struct {
			name  string
			teams int
			tick  string
		}{{"few", 1, ""}, {"scale", routingtest.ScaleTeams, ""}}
		if os.Getenv("SWITCHYARD_TAIL_NOTICK") == "1" {
			sizes = append(sizes, struct {
				name  string
				teams int
				tick  string
			}{"scale-notick", routingtest.ScaleTeams, "1h"})
		}
		for _, sz := range sizes {
			env := []string{"SWITCHYARD_TAIL_UPSTREAM=" + up.addr, "SWITCHYARD_TAIL_TEAMS=" + strconv.Itoa(sz.teams), "SWITCHYARD_TAIL_TICK=" + sz.tick}
			if pe := os.Getenv("SWITCHYARD_TAIL_PROXY_ENV"); pe != "" {
				env = append(env, strings.Split(pe, ",")...) // GOGC=off, GOMAXPROCS=1, ...
			}
			c := startTailChild(b, bin.bin, "proxy", env)
			// The scale measurement sends to a model in the middle of the table, as make bench does.
			model := fmt.Sprintf("team-%03d-gpt-4o-2024-08-06", sz.teams/2)
			p := newTailPath(sz.name+bin.name, "http://"+c.addr+"/v1/chat/completions", model)
			p.child = c
			paths = append(paths, p)
			if c.pprof != "" {
				fmt.Fprintf(os.Stderr, "%s: profiling port http://%s/debug/pprof/\n", p.name, c.pprof)
			}
		}
	}
	time.Sleep(1500 * time.Millisecond) // a few background ticks: every key's gauges exist
	for _, p := range paths {
		p.run(tailRate, 300*time.Millisecond, false) // connections and code paths warm, not counted
	}
	round := 0
	for b.Loop() {
		order := slices.Clone(paths)
		// Rotate and alternate the direction, so that every path comes first, last and after every
		// other path over a few rounds.
		k := round % len(order)
		order = append(order[k:], order[:k]...)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, p := range order {
			p.run(tailRate, tailSlice, true)
		}
		round++
	}
	b.StopTimer()
	dq := quantiles(direct.lat)
	b.Logf("%d rounds of %s per path at %d req/s, open loop; added = the path's quantile - direct's over all rounds;", round, tailSlice, tailRate)
	b.Logf("paired = the median over rounds of the same difference within each round (a burst of load from elsewhere lands in one round)")
	b.Logf("%-18s %7s %9s %9s %9s %9s %9s %9s %12s %12s %6s", "path", "n", "p50", "p99", "p99.9", "+p50", "+p99", "+p99.9", "paired +p50", "paired +p99", "errors")
	for _, p := range paths {
		q := quantiles(p.lat)
		var pair [2][]time.Duration
		for r := range p.rounds {
			for i := range pair {
				pair[i] = append(pair[i], p.rounds[r][i]-direct.rounds[r][i])
			}
		}
		pq := [2]time.Duration{median(pair[0]), median(pair[1])}
		b.Logf("%-18s %7d %9s %9s %9s %9s %9s %9s %12s %12s %6d", p.name, len(p.lat), us(q[0]), us(q[1]), us(q[2]),
			us(q[0]-dq[0]), us(q[1]-dq[1]), us(q[2]-dq[2]), us(pq[0]), us(pq[1]), p.errors)
		if p != direct {
			name := strings.ReplaceAll(strings.ReplaceAll(p.name, " (", "-"), ")", "")
			b.ReportMetric(float64(q[1]-dq[1])/1e3, name+"-added-p99-µs")
			b.ReportMetric(float64(pq[1])/1e3, name+"-paired-p99-µs")
		}
		if p.errors > 0 {
			b.Errorf("%s: %d errors, the first: %v", p.name, p.errors, p.firstErr)
		}
	}
}

const (
	tailRate  = 1000
	tailSlice = time.Second
)

func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/1e3) }

// tailPath is one way to the upstream and the latencies measured on it.
type tailPath struct {
	name     string
	url      string
	body     []byte
	client   *http.Client
	child    *tailChild
	mu       sync.Mutex
	lat      []time.Duration
	rounds   [][3]time.Duration // p50, p99, p99.9 of each recorded slice
	errors   int
	firstErr error
}

func newTailPath(name, url, model string) *tailPath {
	return &tailPath{name: name, url: url,
		body: []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"hello"}]}`),
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			Proxy: nil, MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256, DisableCompression: true,
		}}}
}

// run starts rate requests per second for d on schedule (open loop: a late wake-up starts what
// was due at once) and waits for the last answer.
func (p *tailPath) run(rate int, d time.Duration, record bool) {
	n := int(d.Seconds() * float64(rate))
	interval := time.Second / time.Duration(rate)
	var wg sync.WaitGroup
	n0 := len(p.lat)
	start := time.Now()
	for i := range n {
		if w := time.Until(start.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat, err := p.do()
			if !record {
				return
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if err != nil {
				if p.errors++; p.firstErr == nil {
					p.firstErr = err
				}
				return
			}
			p.lat = append(p.lat, lat)
		}()
	}
	wg.Wait()
	if record {
		p.rounds = append(p.rounds, quantiles(p.lat[n0:]))
	}
}

// do sends one request and reads the whole answer: the latency is from just before the request
// is written to its last byte.
func (p *tailPath) do() (time.Duration, error) {
	req, err := http.NewRequest(http.MethodPost, p.url, bytes.NewReader(p.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	lat := time.Since(start)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return lat, err
}

// quantiles are p50, p99 and p99.9 of lat.
func quantiles(lat []time.Duration) [3]time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	var out [3]time.Duration
	if len(s) == 0 {
		return out
	}
	for i, q := range []float64{0.5, 0.99, 0.999} {
		out[i] = s[min(len(s)-1, int(q*float64(len(s))))]
	}
	return out
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// tailChild is a child process started by BenchmarkTailAtScale.
type tailChild struct {
	addr, pprof string
}

const tailChildEnv = "SWITCHYARD_TAIL_CHILD"

// startTailChild runs bin's TestTailChild as role and waits for the address it serves on. The
// child ends when its stdin closes (at the benchmark's cleanup, or if this process dies).
func startTailChild(b *testing.B, bin, role string, env []string) *tailChild {
	b.Helper()
	cmd := exec.Command(bin, "-test.run=^TestTailChild$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), tailChildEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	c := &tailChild{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "tail-pprof" {
			c.pprof = f[1]
		}
		if len(f) == 2 && f[0] == "tail-addr" {
			c.addr = f[1]
			break
		}
	}
	if c.addr == "" {
		b.Fatalf("%s %s: no address (%v)", bin, role, sc.Err())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return c
}

// TestTailChild is a child process of BenchmarkTailAtScale; it skips unless started as one.
// Roles: "upstream" (fixedAnswer, as fast as net/http allows) and "proxy" (the teams of
// SWITCHYARD_TAIL_TEAMS in front of SWITCHYARD_TAIL_UPSTREAM, served as switchyard proxy serves
// them). With SWITCHYARD_TAIL_PPROF=1 the child also serves net/http/pprof, with mutex and block
// profiling on.
func TestTailChild(t *testing.T) {
	role := os.Getenv(tailChildEnv)
	if role == "" {
		t.Skip("a child process of BenchmarkTailAtScale")
	}
	if os.Getenv("SWITCHYARD_TAIL_PPROF") == "1" {
		runtime.SetMutexProfileFraction(10)
		runtime.SetBlockProfileRate(int((100 * time.Microsecond).Nanoseconds()))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = http.Serve(ln, http.DefaultServeMux) }()
		fmt.Printf("tail-pprof %s\n", ln.Addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var h http.Handler
	switch role {
	case "upstream":
		h = http.HandlerFunc(fixedAnswer)
	case "proxy":
		teams, _ := strconv.Atoi(os.Getenv("SWITCHYARD_TAIL_TEAMS"))
		in := routingtest.Teams("llm", max(teams, 1))
		for i := range in.Channels {
			in.Channels[i].Spec.BaseURL = "http://" + os.Getenv("SWITCHYARD_TAIL_UPSTREAM") + "/v1"
		}
		tbl, problems := routing.Compile(in)
		if len(routing.Blocking(problems)) > 0 {
			t.Fatalf("config: %v", problems)
		}
		s := New(Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
		s.Apply(tbl, "routingtest")
		tick := 250 * time.Millisecond // switchyard proxy's default --tick
		if d, err := time.ParseDuration(os.Getenv("SWITCHYARD_TAIL_TICK")); err == nil {
			tick = d
		}
		go s.Run(ctx, tick)
		h = s.Handler()
	default:
		t.Fatalf("unknown role %q", role)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("tail-addr %s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	_ = srv.Close()
}
