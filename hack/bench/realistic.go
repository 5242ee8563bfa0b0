package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/switchyard-io/switchyard/internal/procs"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The realistic run (--only realistic; not part of the default run): the load a gateway in
// front of LLM providers meets, where the upstream client's own cost is judged. Plain answers
// come after a random 50-500 ms (a model generating); streams send their first chunk after as
// long and then 200 chunks 20-50 ms apart (tokens); 200, 1,000 and 2,000 requests in flight,
// closed loop (each worker sends its next request when its last answer is in). Over plain HTTP,
// and over HTTPS where the upstream offers HTTP/2 and HTTP/1.1 by ALPN as providers do. Direct,
// the current build and, with --baseline-bin, the baseline build take turns in slices as in the
// other parts. Every request asks the upstream for its delay (X-Stainless-Bench-Delay), so each answer's
// latency beyond the upstream's own is known exactly; stream events carry the upstream's write
// time, so each event's transit is known too.

const (
	realModel    = "bench-real"
	realModelTLS = "bench-real-tls"
	realEvents   = 200
	realGapMin   = 20 * time.Millisecond
	realGapMax   = 50 * time.Millisecond
	realDelayMin = 50 * time.Millisecond
	realDelayMax = 500 * time.Millisecond
	// realTimeout bounds one request of the realistic run: a stream takes about 7.5 s.
	realTimeout = 60 * time.Second
	// realMaxInFlight lifts the proxies' in-flight limit (1,024 by default) above the load.
	realMaxInFlight = "8192"
)

// realPlan is the realistic run's shape (flags --realistic-*).
type realPlan struct {
	conns       []int
	rounds      int
	slice       time.Duration // plain answers: how long workers start new requests
	streamSlice time.Duration
	tls         bool
	streams     bool
}

func defaultRealPlan(quick bool) realPlan {
	p := realPlan{conns: []int{200, 1000, 2000}, rounds: 2, slice: 6 * time.Second, streamSlice: 8 * time.Second, tls: true, streams: true}
	if quick {
		p.rounds, p.slice, p.streamSlice = 1, 3*time.Second, 4*time.Second
	}
	return p
}

// realisticResult is one load: upstream scheme, answers or streams, requests in flight.
type realisticResult struct {
	Upstream string     `json:"upstream"` // http, or https (h2 and http/1.1 offered)
	Kind     string     `json:"kind"`     // answers or streams
	Conns    int        `json:"inFlight"`
	Rounds   int        `json:"rounds"`
	Paths    []realPath `json:"paths"` // direct, current build, baseline build
}

type realPath struct {
	Name       string  `json:"name"`
	Requests   int     `json:"requests"`
	Errors     int     `json:"errors"`
	FirstError string  `json:"firstError,omitempty"`
	RPS        float64 `json:"requestsPerSecond"`
	// Beyond the upstream's own time: an answer's latency less its X-Stainless-Bench-Delay; for a stream,
	// the first event's arrival less the delay (TTFT).
	BeyondP50 float64 `json:"beyondUpstreamP50_us"`
	BeyondP99 float64 `json:"beyondUpstreamP99_us"`
	// Streams: each event after the first, from the upstream's write to the client's read.
	TransitP50 float64 `json:"eventTransitP50_us,omitempty"`
	TransitP99 float64 `json:"eventTransitP99_us,omitempty"`
	Events     int     `json:"events,omitempty"`
	// The proxy's CPU per 1,000 requests (streams: per 1,000 streams of 200 events), user +
	// system, and the cores the load generator, upstream and proxy kept busy together.
	CPUPer1k  float64 `json:"cpuSecondsPer1000,omitempty"`
	CoresBusy float64 `json:"coresBusy"`
	// Peaks over the path's slices, sampled every 500 ms.
	PeakRSSMiB        float64 `json:"peakRSSMiB,omitempty"`
	PeakGoroutines    int     `json:"peakGoroutines,omitempty"`
	PeakThreads       int     `json:"peakThreads,omitempty"`
	PeakUpstreamConns int     `json:"peakUpstreamConnections,omitempty"`
}

// realRec is what one path's slices recorded.
type realRec struct {
	beyond   []int32 // µs
	transit  []int32 // µs
	done     int
	errors   int
	events   int
	firstErr error
	elapsed  time.Duration
	cpu      float64 // the proxy's
	others   float64 // the load generator's and the upstream's
	peaks    peaks
}

type peaks struct {
	rssKiB, goroutines, threads, upConns int64
}

func (p *peaks) max(o peaks) {
	p.rssKiB, p.goroutines = max(p.rssKiB, o.rssKiB), max(p.goroutines, o.goroutines)
	p.threads, p.upConns = max(p.threads, o.threads), max(p.upConns, o.upConns)
}

// realTarget is one path of the realistic run.
type realTarget struct {
	name   string
	url    string
	body   []byte
	stream bool
	client *http.Client
	proxy  *proxyProc // nil: direct
}

func (b *bench) realistic() error {
	rp := b.real
	cert, key, pool, err := writeTestCert(b.tmp)
	if err != nil {
		return err
	}
	up, addr, tlsAddr, err := startRealUpstream(b.tmp, cert, key)
	if err != nil {
		return err
	}
	b.children = append(b.children, up)
	defer up.Stop(stopGrace)
	cfg, err := writeConfig(b.tmp, "realistic", realConfig(addr, tlsAddr))
	if err != nil {
		return err
	}
	b.logf("realistic: upstream http://%s and https://%s (h2, http/1.1); answers after %s-%s; streams of %d events %s-%s apart; %v in flight; %d round(s)",
		addr, tlsAddr, realDelayMin, realDelayMax, realEvents, realGapMin, realGapMax, rp.conns, rp.rounds)
	schemes := []string{"http"}
	if rp.tls {
		schemes = append(schemes, "https")
	}
	kinds := []string{"answers"}
	if rp.streams {
		kinds = append(kinds, "streams")
	}
	for _, scheme := range schemes {
		for _, kind := range kinds {
			// Fresh proxies for each scheme and kind, so that the connections they count and
			// the memory they hold are this load's (the in-flight counts rise from one load to
			// the next, and the memory a larger one took is not given back at once).
			proxies, names, err := b.startRealProxies(cfg, cert, scheme == "https")
			if err != nil {
				return err
			}
			for _, n := range rp.conns {
				if err = b.ctx.Err(); err != nil {
					break
				}
				var r realisticResult
				if r, err = b.realLoad(scheme, kind, n, addr, tlsAddr, pool, proxies, names, up.PID()); err != nil {
					break
				}
				b.res.Realistic = append(b.res.Realistic, r)
				for _, p := range proxies {
					if p.Exited() {
						err = fmt.Errorf("%s exited: %v\n%s", p.Name, p.Err(), p.Tail(30))
					}
				}
				if err != nil {
					break
				}
			}
			for _, p := range proxies {
				p.Stop(stopGrace)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// startRealProxies starts the current build, the baseline build (--baseline-bin) and, for an
// https upstream, the current build once more with its HTTP/2 client off (GODEBUG=http2client=0):
// the same transport on HTTP/1.1, beside it on HTTP/2.
func (b *bench) startRealProxies(cfg, cert string, h1Too bool) ([]*proxyProc, []string, error) {
	env := []string{"SSL_CERT_FILE=" + cert} // the proxies trust the bench's own CA
	type spec struct {
		name, bin string
		env       []string
	}
	specs := []spec{{"current build", b.opts.proxyBin, env}}
	if h1Too {
		specs = append(specs, spec{"current, HTTP/1.1", b.opts.proxyBin, append(slices.Clip(env), "GODEBUG=http2client=0")})
	}
	if b.opts.baseBin != "" {
		specs = append(specs, spec{"baseline build", b.opts.baseBin, env})
	}
	var proxies []*proxyProc
	var names []string
	for i, sp := range specs {
		p, err := startProxyEnv(b.ctx, fmt.Sprintf("proxy-real-%d", i), b.tmp, sp.bin, cfg, sp.env, "--max-in-flight", realMaxInFlight)
		if err != nil {
			for _, p := range proxies {
				p.Stop(stopGrace)
			}
			return nil, nil, err
		}
		b.children = append(b.children, p.Child)
		proxies = append(proxies, p)
		names = append(names, sp.name)
	}
	return proxies, names, nil
}

// realLoad measures one load on every path, slices interleaved.
func (b *bench) realLoad(scheme, kind string, conns int, addr, tlsAddr string, pool *x509.CertPool, proxies []*proxyProc, names []string, upPID int) (realisticResult, error) {
	rp := b.real
	stream := kind == "streams"
	model, upBase := realModel, "http://"+addr
	if scheme == "https" {
		model, upBase = realModelTLS, "https://"+tlsAddr
	}
	body := bodyFor(model, stream)
	targets := []*realTarget{{name: "direct", url: upBase + "/main/v1" + chatPath, body: body, stream: stream, client: realClient(conns, pool)}}
	for i, p := range proxies {
		targets = append(targets, &realTarget{name: names[i], url: "http://" + p.api + chatPath, body: body, stream: stream, client: realClient(conns, nil), proxy: p})
	}
	defer func() {
		for _, t := range targets {
			t.client.CloseIdleConnections()
		}
	}()
	slice := rp.slice
	if stream {
		slice = rp.streamSlice
	}
	b.logf("realistic %s %s, %d in flight: %d × %s per path (plus the last requests' time)", scheme, kind, conns, rp.rounds, slice)
	recs := make([]realRec, len(targets))
	self := os.Getpid()
	for _, t := range targets { // connections open, pools filled; not recorded
		realLoop(b.ctx, t, conns, time.Second, 0)
	}
	for r := 0; r < rp.rounds && b.ctx.Err() == nil; r++ {
		for _, i := range sliceOrder(len(targets), r) {
			t := targets[i]
			var pid int
			if t.proxy != nil {
				pid = t.proxy.PID()
			}
			c0, _ := cpuSeconds(pid)
			g0, _ := cpuSeconds(self)
			u0, _ := cpuSeconds(upPID)
			stop := make(chan struct{})
			pk := make(chan peaks, 1)
			go func() { pk <- samplePeaks(t.proxy, stop) }()
			rec := realLoop(b.ctx, t, conns, slice, uint64(r+1))
			close(stop)
			rec.peaks = <-pk
			c1, _ := cpuSeconds(pid)
			g1, _ := cpuSeconds(self)
			u1, _ := cpuSeconds(upPID)
			if t.proxy != nil {
				rec.cpu = c1 - c0
			}
			rec.others = g1 - g0 + u1 - u0
			recs[i].add(rec)
		}
	}
	res := realisticResult{Upstream: scheme, Kind: kind, Conns: conns, Rounds: rp.rounds}
	for i, t := range targets {
		res.Paths = append(res.Paths, recs[i].summary(t.name, t.proxy != nil))
	}
	for _, p := range res.Paths {
		b.logf("  %-14s %7.0f req/s, beyond the upstream p50 %s p99 %s%s; proxy CPU %.3f s/1k; %.2f cores busy; peak RSS %.0f MiB, %d goroutines, %d upstream conns; %d errors",
			p.Name, p.RPS, us(p.BeyondP50), us(p.BeyondP99), transitNote(p), p.CPUPer1k, p.CoresBusy, p.PeakRSSMiB, p.PeakGoroutines, p.PeakUpstreamConns, p.Errors)
	}
	return res, nil
}

func transitNote(p realPath) string {
	if p.Events == 0 {
		return ""
	}
	return fmt.Sprintf(", event transit p50 %s p99 %s", us(p.TransitP50), us(p.TransitP99))
}

func (r *realRec) add(o realRec) {
	r.beyond = append(r.beyond, o.beyond...)
	r.transit = append(r.transit, o.transit...)
	r.done += o.done
	r.errors += o.errors
	r.events += o.events
	if r.firstErr == nil {
		r.firstErr = o.firstErr
	}
	r.elapsed += o.elapsed
	r.cpu += o.cpu
	r.others += o.others
	r.peaks.max(o.peaks)
}

func (r *realRec) summary(name string, proxied bool) realPath {
	p := realPath{Name: name, Requests: r.done, Errors: r.errors, Events: r.events}
	if r.firstErr != nil {
		p.FirstError = r.firstErr.Error()
	}
	if s := r.elapsed.Seconds(); s > 0 {
		p.RPS = round1(float64(r.done) / s)
		p.CoresBusy = round2((r.cpu + r.others) / s)
	}
	q := func(xs []int32, f float64) float64 {
		if len(xs) == 0 {
			return 0
		}
		i := int(float64(len(xs))*f+0.9999999) - 1
		return float64(xs[min(max(i, 0), len(xs)-1)])
	}
	slices.Sort(r.beyond)
	slices.Sort(r.transit)
	p.BeyondP50, p.BeyondP99 = q(r.beyond, 0.5), q(r.beyond, 0.99)
	if r.events > 0 {
		p.TransitP50, p.TransitP99 = q(r.transit, 0.5), q(r.transit, 0.99)
	}
	if proxied && r.done > 0 {
		p.CPUPer1k = round3(r.cpu * 1000 / float64(r.done))
		p.PeakRSSMiB = mib(r.peaks.rssKiB)
		p.PeakGoroutines = int(r.peaks.goroutines)
		p.PeakThreads = int(r.peaks.threads)
		p.PeakUpstreamConns = int(r.peaks.upConns)
	}
	return p
}

// realLoop runs conns workers for d, each sending its next request when its last answer is in
// (the first one after a random pause of up to realDelayMax, so the load starts spread out), and
// waits for the last answers. Each request asks for a random delay in [realDelayMin,
// realDelayMax]; seed makes the delays the same for every path of a round.
func realLoop(ctx context.Context, t *realTarget, conns int, d time.Duration, seed uint64) realRec {
	ctx, cancel := context.WithTimeout(ctx, d+realTimeout)
	defer cancel()
	deadline := time.Now().Add(d)
	per := make([]realRec, conns)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conns {
		wg.Go(func() {
			rng := mrand.New(mrand.NewPCG(seed, uint64(w)))
			r := &per[w]
			if !sleepCtx(ctx, time.Duration(rng.Int64N(int64(realDelayMax)))) {
				return
			}
			for time.Now().Before(deadline) && ctx.Err() == nil {
				delay := realDelayMin + time.Duration(rng.Int64N(int64(realDelayMax-realDelayMin)+1))
				if err := t.do(ctx, delay, r); err != nil {
					r.errors++
					if r.firstErr == nil {
						r.firstErr = err
					}
					continue
				}
				r.done++
			}
		})
	}
	wg.Wait()
	var res realRec
	for i := range per {
		res.add(per[i])
	}
	res.elapsed = time.Since(start)
	return res
}

var errNoDone = errors.New("stream ended without [DONE]")

// do sends one request asking for delay and records what came back in r.
func (t *realTarget) do(ctx context.Context, delay time.Duration, r *realRec) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(t.body))
	if err != nil {
		return err
	}
	req.Header = clientHeader()
	req.Header[delayHeader] = []string{delay.String()}
	if t.stream {
		req.Header[eventsHeader] = []string{strconv.Itoa(realEvents)}
		req.Header[gapHeader] = []string{realGapMin.String()}
		req.Header[gapMaxHeader] = []string{realGapMax.String()}
	}
	start := time.Now()
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return fmt.Errorf("%s: HTTP %d", t.name, resp.StatusCode)
	}
	if !t.stream {
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		r.beyond = append(r.beyond, int32((time.Since(start)-delay)/time.Microsecond))
		return nil
	}
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	events := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("%s: %w after %d events: %v", t.name, errNoDone, events, err)
		}
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		now := time.Now()
		if bytes.HasPrefix(line, []byte("data: [DONE]")) {
			if events != realEvents {
				return fmt.Errorf("%s: %d events, want %d", t.name, events, realEvents)
			}
			r.events += events
			return nil
		}
		if events == 0 {
			r.beyond = append(r.beyond, int32((now.Sub(start)-delay)/time.Microsecond))
		} else if stamp, ok := eventStamp(line); ok && now.UnixNano() >= stamp {
			r.transit = append(r.transit, int32((now.UnixNano()-stamp)/1000))
		}
		events++
	}
}

// realClient is the load generator's client for one path: a connection per worker.
func realClient(conns int, roots *x509.CertPool) *http.Client {
	c := newClient(conns)
	c.Timeout = realTimeout
	if roots != nil {
		c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	return c
}

// samplePeaks reads the proxy's RSS and threads (/proc) and its goroutines and open upstream
// connections (/metrics) every 500 ms until stop is closed, and returns the largest of each.
func samplePeaks(p *proxyProc, stop <-chan struct{}) peaks {
	var pk peaks
	if p == nil {
		<-stop
		return pk
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return pk
		case <-tick.C:
		}
		var s peaks
		if m, err := procStatus(p.PID()); err == nil {
			s.rssKiB = m["VmRSS"]
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID())); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "Threads:"); ok {
					s.threads, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				}
			}
		}
		if resp, err := hc.Get("http://" + p.admin + "/metrics"); err == nil {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				line := sc.Text()
				if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
					s.goroutines = int64(parseFloat(v))
				} else if v, ok := strings.CutPrefix(line, "switchyard_upstream_connections_open "); ok {
					s.upConns = int64(parseFloat(v))
				}
			}
			resp.Body.Close()
		}
		pk.max(s)
	}
}

func parseFloat(s string) float64 {
	f, _ := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return f
}

// realConfig: one channel per upstream scheme, each the only channel of its model.
func realConfig(addr, tlsAddr string) string {
	return strings.Join([]string{
		secretDoc,
		channelDoc("real-plain", "http://"+addr+"/main/v1", "a", realModel),
		channelDoc("real-tls", "https://"+tlsAddr+"/main/v1", "a", realModelTLS),
		"apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: real}\nspec:\n  models: [" + realModel + "]\n  channels: [{name: real-plain}]\n",
		"apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: real-tls}\nspec:\n  models: [" + realModelTLS + "]\n  channels: [{name: real-tls}]\n",
	}, "---\n")
}

// startRealUpstream runs the mock upstream on plain HTTP and on HTTPS.
func startRealUpstream(dir, cert, key string) (*procs.Child, string, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", "", err
	}
	c, stdout, err := startChild("upstream-real", dir, self, upstreamMode, "--listen", "127.0.0.1:0",
		"--tls-listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key)
	if err != nil {
		return nil, "", "", err
	}
	var addr, tlsAddr atomic.Value
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if a, ok := strings.CutPrefix(line, "LISTEN-TLS "); ok {
				tlsAddr.Store(a)
			} else if a, ok := strings.CutPrefix(line, "LISTEN "); ok {
				addr.Store(a)
				close(ready) // printed last
			}
		}
	}()
	select {
	case <-ready:
		return c, addr.Load().(string), tlsAddr.Load().(string), nil
	case <-c.Done():
		return nil, "", "", fmt.Errorf("upstream exited: %v\n%s", c.Err(), c.Tail(30))
	case <-time.After(10 * time.Second):
		c.Stop(stopGrace)
		return nil, "", "", errors.New("upstream did not start within 10s")
	}
}

// writeTestCert writes a self-signed certificate for 127.0.0.1 (its own CA) and its key, as PEM.
func writeTestCert(dir string) (certFile, keyFile string, pool *x509.CertPool, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "switchyard bench upstream"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:    []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", nil, err
	}
	certFile, keyFile = filepath.Join(dir, "bench-cert.pem"), filepath.Join(dir, "bench-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", nil, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return "", "", nil, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return "", "", nil, err
	}
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool, nil
}

// realisticMarkdown is the realistic run's table: for each load, every path side by side.
func realisticMarkdown(rs []realisticResult) string {
	if len(rs) == 0 {
		return ""
	}
	var sb strings.Builder
	sb.WriteString("\n#### Realistic upstream: answers after 50-500 ms, streams of 200 events 20-50 ms apart\n\n")
	sb.WriteString("| Load | Path | Throughput | Beyond the upstream's own time, p50 / p99 | Stream event transit, p50 / p99 | Proxy CPU per 1,000 requests | Cores busy | Peak RSS / goroutines / upstream connections | Errors |\n")
	sb.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		load := fmt.Sprintf("%s %s, %s in flight", r.Upstream, r.Kind, thousands(r.Conns))
		for _, p := range r.Paths {
			transit, cpu, peak := "", "", ""
			if p.Events > 0 {
				transit = us(p.TransitP50) + " / " + us(p.TransitP99)
			}
			if p.CPUPer1k > 0 {
				cpu = fmt.Sprintf("%.3f s", p.CPUPer1k)
				peak = fmt.Sprintf("%.0f MiB / %s / %s", p.PeakRSSMiB, thousands(p.PeakGoroutines), thousands(p.PeakUpstreamConns))
			}
			errs := thousands(p.Errors)
			if p.FirstError != "" {
				errs += " (" + p.FirstError + ")"
			}
			fmt.Fprintf(&sb, "| %s | %s | %s req/s | %s / %s | %s | %s | %.2f | %s | %s |\n",
				load, p.Name, thousands(int(p.RPS)), us(p.BeyondP50), us(p.BeyondP99), transit, cpu, p.CoresBusy, peak, errs)
			load = ""
		}
	}
	return sb.String()
}
