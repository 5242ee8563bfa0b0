package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// results is the JSON document (--json). Latencies are in microseconds, memory in MiB.
type results struct {
	Date         string            `json:"date"`
	Mode         string            `json:"mode"`
	Seconds      float64           `json:"seconds"`
	Binary       string            `json:"binary"`
	ProxyEnv     []string          `json:"proxyEnv,omitempty"`
	Machine      machine           `json:"machine"`
	Overhead     []overheadResult  `json:"overhead"`
	Saturation   saturationResult  `json:"saturation"`
	Proxy        procResult        `json:"proxy"`
	Streaming    streamResult      `json:"streaming"`
	Failover     failoverResult    `json:"failover"`
	Ejection     ejectResult       `json:"ejection"`
	Scale        scaleResult       `json:"scale"`
	Clients      clientsResult     `json:"clients"`
	GoProxy      *floorResult      `json:"goReverseProxy,omitempty"`
	Nginx        *floorResult      `json:"nginx,omitempty"`
	Baseline     *baselineResult   `json:"baseline,omitempty"`
	Realistic    []realisticResult `json:"realistic,omitempty"`
	Targets      []targetResult    `json:"targets"`
	Profile      string            `json:"profile,omitempty"`
	ProfileScale string            `json:"profileScale,omitempty"`
}

type machine struct {
	Cores        int    `json:"cores"`
	CPU          string `json:"cpu"`
	Memory       string `json:"memory"`
	OS           string `json:"os"`
	Go           string `json:"go"`
	LoadAvgStart string `json:"loadAvgStart"`
	LoadAvgEnd   string `json:"loadAvgEnd"`
}

type latency struct {
	N          int     `json:"n"`
	Errors     int     `json:"errors"`
	P50        float64 `json:"p50_us"`
	P99        float64 `json:"p99_us"`
	P999       float64 `json:"p999_us"`
	FirstError string  `json:"firstError,omitempty"`
}

type overheadResult struct {
	Rate      int     `json:"rate"`
	Direct    latency `json:"direct"`
	Via       latency `json:"via"`
	AddedP50  float64 `json:"addedP50_us"`
	AddedP99  float64 `json:"addedP99_us"`
	AddedP999 float64 `json:"addedP999_us"`
	// The median over the rounds of the per-round difference: robust to bursts of load from
	// elsewhere on the machine that hit a few slices.
	PairedAddedP50 float64 `json:"pairedAddedP50_us"`
	PairedAddedP99 float64 `json:"pairedAddedP99_us"`
	Rounds         int     `json:"rounds"`
	ViaCPUPer1k    float64 `json:"cpuSecondsPer1000"`
}

type saturationResult struct {
	Conns       int     `json:"connections"`
	DirectRPS   float64 `json:"directRPS"`
	ViaRPS      float64 `json:"viaRPS"`
	Ratio       float64 `json:"ratio"`
	DirectP50   float64 `json:"directP50_us"`
	ViaP50      float64 `json:"viaP50_us"`
	ViaCPUPer1k float64 `json:"cpuSecondsPer1000"`
	// CPU seconds per 1,000 requests of the other two processes, and the cores all three kept
	// busy: below the core count, the machine was not the limit (or others took it).
	DirectLoadGenCPUPer1k  float64 `json:"directLoadGenCPUSecondsPer1000"`
	DirectUpstreamCPUPer1k float64 `json:"directUpstreamCPUSecondsPer1000"`
	DirectCoresBusy        float64 `json:"directCoresBusy"`
	ViaLoadGenCPUPer1k     float64 `json:"viaLoadGenCPUSecondsPer1000"`
	ViaUpstreamCPUPer1k    float64 `json:"viaUpstreamCPUSecondsPer1000"`
	ViaCoresBusy           float64 `json:"viaCoresBusy"`
	Errors                 int     `json:"errors"`
	FirstError             string  `json:"firstError,omitempty"`
}

type procResult struct {
	RSSMiB     float64 `json:"rssMiB"`
	PeakRSSMiB float64 `json:"peakRSSMiB"`
	// The RSS at the end split into anonymous memory (heap, stacks) and file pages (the mapped binary).
	AnonMiB float64 `json:"anonMiB"`
	FileMiB float64 `json:"fileMiB"`
}

// streamResult: streams of Events events, EventGapMs apart (see docs/benchmarks.md, Streaming).
type streamResult struct {
	Events       int     `json:"events"`
	Rate         int     `json:"rate"`
	EventGapMs   float64 `json:"eventGapMs"`
	DirectTTFT   latency `json:"directTTFT"`
	ViaTTFT      latency `json:"viaTTFT"`
	AddedTTFTP50 float64 `json:"addedTTFTP50_us"`
	AddedTTFTP99 float64 `json:"addedTTFTP99_us"`
	// The events after the first. Lateness: arrival since the request started, less i × gap,
	// pooled over the streams and the indices (n = events).
	DirectEvent latency `json:"directEventLateness"`
	ViaEvent    latency `json:"viaEventLateness"`
	// AddedPerEvent: the median over the indices i ≥ 1 of (via's median arrival of event i -
	// direct's); AddedByIndex: that difference for every index (0 is the first event).
	AddedPerEvent    float64   `json:"addedPerEvent_us"`
	AddedPerEventP99 float64   `json:"addedPerEventP99_us"`
	AddedByIndex     []float64 `json:"addedPerEventByIndex_us"`
	// What the added time per event is made of. Start: from the request's start to the
	// upstream's write of the first event (the stream starts that much later through the proxy).
	// Transit: from the upstream's write of an event after the first (the stamp in its id) to
	// the client's read (each event takes that much longer to cross).
	DirectStart     latency `json:"directStreamStart"`
	ViaStart        latency `json:"viaStreamStart"`
	AddedStartP50   float64 `json:"addedStreamStartP50_us"`
	AddedStartP99   float64 `json:"addedStreamStartP99_us"`
	DirectTransit   latency `json:"directEventTransit"`
	ViaTransit      latency `json:"viaEventTransit"`
	AddedTransitP50 float64 `json:"addedEventTransitP50_us"`
	AddedTransitP99 float64 `json:"addedEventTransitP99_us"`
	ViaCPUPer1k     float64 `json:"cpuSecondsPer1000"`
}

type failoverResult struct {
	Clean            latency `json:"clean"`
	Failover         latency `json:"failover"`
	Upstream503      latency `json:"upstream503"`
	ExtraP50         float64 `json:"extraP50_us"`
	ExtraP99         float64 `json:"extraP99_us"`
	RetryOverheadP50 float64 `json:"retryOverheadP50_us"`
	RetryOverheadP99 float64 `json:"retryOverheadP99_us"`
}

type ejectResult struct {
	Rate     int     `json:"rate"`
	Millis   float64 `json:"ms"`
	Rule     string  `json:"rule"`
	Message  string  `json:"message,omitempty"`
	Requests int     `json:"requests"`
	// FailedAttempts are the 503s the failing channel served until it was ejected.
	FailedAttempts int    `json:"failedAttempts"`
	ClientErrors   int    `json:"clientErrors"`
	FirstError     string `json:"firstError,omitempty"`
}

type scaleResult struct {
	Skipped     string         `json:"skipped,omitempty"`
	Channels    int            `json:"channels"`
	Models      int            `json:"models"`
	Keys        int            `json:"keys"`
	ReadyMillis int64          `json:"readyMs"`
	IdleRSSMiB  float64        `json:"idleRSSMiB"`
	RSSMiB      float64        `json:"rssMiB"`
	PeakRSSMiB  float64        `json:"peakRSSMiB"`
	Overhead    overheadResult `json:"overhead"`
}

// floorResult is another proxy measured the same way, in the same slices as the proxy: nginx, the
// Go standard library's.
type floorResult struct {
	Skipped    string           `json:"skipped,omitempty"`
	Version    string           `json:"version,omitempty"`
	Overhead   overheadResult   `json:"overhead"`
	Saturation saturationResult `json:"saturation"`
	PeakRSSMiB float64          `json:"peakRSSMiB"`
}

// baselineResult is another build measured side by side with the current one (--baseline-bin).
type baselineResult struct {
	Binary     string           `json:"binary"`
	Overhead   []overheadResult `json:"overhead"`
	Saturation saturationResult `json:"saturation"`
	Streaming  streamResult     `json:"streaming"`
	Proxy      procResult       `json:"proxy"`
	Scale      *scaleResult     `json:"scale,omitempty"`
}

type targetResult struct {
	Name     string  `json:"name"`
	Limit    string  `json:"limit"`
	Measured float64 `json:"measured"`
	Unit     string  `json:"unit"`
	Met      bool    `json:"met"`
}

// judge compares the figures with the targets of the issue.
func (b *bench) judge() {
	r := &b.res
	add := func(name, limit string, measured float64, unit string, met bool) {
		r.Targets = append(r.Targets, targetResult{Name: name, Limit: limit, Measured: measured, Unit: unit, Met: met})
	}
	// Targets are judged on the pooled figures (not the paired medians), and only for the parts that ran.
	if o := b.targetOverhead(); o != nil {
		add(fmt.Sprintf("added p50 at %d req/s", o.Rate), "<= 150 µs", o.AddedP50, "µs", o.AddedP50 <= 150)
		add(fmt.Sprintf("added p99 at %d req/s", o.Rate), "<= 1000 µs", o.AddedP99, "µs", o.AddedP99 <= 1000)
	}
	if r.Saturation.DirectRPS > 0 {
		add("saturation throughput proxy/direct", ">= 0.50", r.Saturation.Ratio, "ratio", r.Saturation.Ratio >= 0.5)
		add("proxy peak RSS under load", "<= 64 MiB", r.Proxy.PeakRSSMiB, "MiB", r.Proxy.PeakRSSMiB > 0 && r.Proxy.PeakRSSMiB <= 64)
	}
	if r.Streaming.ViaTTFT.N > 0 {
		add("streaming TTFT added p99", "<= 1000 µs", r.Streaming.AddedTTFTP99, "µs", r.Streaming.AddedTTFTP99 <= 1000)
	}
	if r.Failover.Failover.N > 0 {
		worst := max(r.Failover.RetryOverheadP50, r.Failover.RetryOverheadP99)
		add("failover retry beyond the upstream's own time (worse of p50, p99)", "<= 1000 µs", worst, "µs", worst <= 1000)
	}
}

func (b *bench) targetOverhead() *overheadResult {
	for i := range b.res.Overhead {
		if b.res.Overhead[i].Rate == b.plan.targetRate {
			return &b.res.Overhead[i]
		}
	}
	return nil
}

func (b *bench) met(name string) string {
	for _, t := range b.res.Targets {
		if strings.HasPrefix(t.Name, name) {
			if t.Met {
				return "met"
			}
			return "**missed**"
		}
	}
	return ""
}

// markdown renders the one table of the run.
func (b *bench) markdown() string {
	r := &b.res
	var sb strings.Builder
	m := r.Machine
	fmt.Fprintf(&sb, "### Switchyard data-plane benchmark, %s\n\n", strings.Replace(r.Date, "T", " ", 1))
	fmt.Fprintf(&sb, "Machine: **%d cores** (%s), %s, %s, %s. Load average %s at start, %s at end. Run: %s, %.0f s. "+
		"Upstream, proxies and load generator share the machine; overheads are differences from the direct path, measured in alternating slices of the same rounds.\n\n",
		m.Cores, orDash(m.CPU), orDash(m.Memory), m.OS, m.Go, orDash(m.LoadAvgStart), orDash(m.LoadAvgEnd), r.Mode, r.Seconds)
	if len(r.ProxyEnv) > 0 {
		fmt.Fprintf(&sb, "Proxy environment: `%s`.\n\n", strings.Join(r.ProxyEnv, " "))
	}
	sb.WriteString("| Measure | Reference | Switchyard | Overhead | Target |\n|---|---:|---:|---:|---|\n")
	row := func(cells ...string) { sb.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	for _, o := range r.Overhead {
		target := ""
		if o.Rate == b.plan.targetRate {
			target = fmt.Sprintf("p50 ≤ +150 µs: %s; p99 ≤ +1 ms: %s", b.met("added p50"), b.met("added p99"))
		}
		row(fmt.Sprintf("Latency at %s req/s, open loop, p50 / p99 / p99.9 (n=%d)", thousands(o.Rate), o.Via.N),
			lat3(o.Direct), lat3(o.Via), added3(o), target)
	}
	s := r.Saturation
	if s.DirectRPS > 0 {
		row(fmt.Sprintf("Saturation throughput, closed loop, %d connections (cores kept busy by the three processes)", s.Conns),
			fmt.Sprintf("%s req/s (%.2f)", thousands(int(s.DirectRPS)), s.DirectCoresBusy), fmt.Sprintf("%s req/s (%.2f)", thousands(int(s.ViaRPS)), s.ViaCoresBusy),
			fmt.Sprintf("ratio %.0f%%", s.Ratio*100), "≥ 50%: "+b.met("saturation"))
	}
	cpuRow := []string{}
	for _, o := range r.Overhead {
		cpuRow = append(cpuRow, fmt.Sprintf("%.3f s at %s req/s", o.ViaCPUPer1k, thousands(o.Rate)))
	}
	if s.DirectRPS > 0 {
		cpuRow = append(cpuRow, fmt.Sprintf("%.3f s at saturation", s.ViaCPUPer1k))
	}
	if len(cpuRow) > 0 {
		row("Proxy CPU per 1,000 requests (user+system, /proc/PID/stat)", "", strings.Join(cpuRow, "; "), "", "")
	}
	rssMet := b.met("proxy peak RSS")
	if rssMet == "" {
		rssMet = "not judged (only after the saturation run)"
	}
	row("Proxy memory: RSS after the run (anonymous + file-backed) / peak RSS (VmHWM)", "",
		fmt.Sprintf("%.1f (%.1f + %.1f) / %.1f MiB", r.Proxy.RSSMiB, r.Proxy.AnonMiB, r.Proxy.FileMiB, r.Proxy.PeakRSSMiB), "", "peak ≤ 64 MiB: "+rssMet)
	st := r.Streaming
	if st.ViaTTFT.N > 0 {
		row(fmt.Sprintf("Streaming time to first token, p50 / p99 (%d events %s apart, %d streams/s)", st.Events, gapOf(st), st.Rate),
			lat2(st.DirectTTFT), lat2(st.ViaTTFT), fmt.Sprintf("%s / %s", plus(st.AddedTTFTP50), plus(st.AddedTTFTP99)), "p99 ≤ +1 ms: "+b.met("streaming"))
		row(fmt.Sprintf("Streaming: each event after the first, arrival less i × %s, p50 / p99 (n=%s); overhead: median over i of the added arrival / p99", gapOf(st), thousands(st.ViaEvent.N)),
			lat2(st.DirectEvent), lat2(st.ViaEvent), fmt.Sprintf("%s / %s", plus(st.AddedPerEvent), plus(st.AddedPerEventP99)), "")
		row("Streaming, what that is made of: the stream's start (request start to the upstream's first write), p50 / p99",
			lat2(st.DirectStart), lat2(st.ViaStart), fmt.Sprintf("%s / %s", plus(st.AddedStartP50), plus(st.AddedStartP99)), "")
		row("Streaming, what that is made of: each event's transit (the upstream's write to the client's read), p50 / p99",
			lat2(st.DirectTransit), lat2(st.ViaTransit), fmt.Sprintf("%s / %s", plus(st.AddedTransitP50), plus(st.AddedTransitP99)), "")
	}
	f := r.Failover
	if f.Failover.N > 0 {
		row(fmt.Sprintf("Failover: 503 then success vs a clean request, p50 / p99 (n=%d)", f.Failover.N),
			"clean "+lat2(f.Clean), lat2(f.Failover), fmt.Sprintf("%s / %s", plus(f.ExtraP50), plus(f.ExtraP99)), "")
		row("Failover: the extra beyond the upstream's own 503 answer, p50 / p99",
			"upstream 503 "+lat2(f.Upstream503), fmt.Sprintf("%s / %s", plus(f.ExtraP50), plus(f.ExtraP99)),
			fmt.Sprintf("%s / %s", plus(f.RetryOverheadP50), plus(f.RetryOverheadP99)), "≤ +1 ms: "+b.met("failover"))
	}
	e := r.Ejection
	if e.Rate > 0 {
		row(fmt.Sprintf("Time from a channel failing 100%% to Ejected, %d req/s, chat defaults", e.Rate), "",
			fmt.Sprintf("%.0f ms, %d failed attempts (%s)", e.Millis, e.FailedAttempts, e.Rule), fmt.Sprintf("%d client errors in %d requests", e.ClientErrors, e.Requests), "")
	}
	if sc := r.Scale; sc.Skipped != "" {
		row("Scale", "", "skipped: "+sc.Skipped, "", "")
	} else {
		o := sc.Overhead
		row(fmt.Sprintf("Scale, %s channels × %d models (%s keys): latency at %s req/s, p50 / p99 / p99.9", thousands(sc.Channels), sc.Models, thousands(sc.Keys), thousands(o.Rate)),
			lat3(o.Direct), lat3(o.Via), added3(o), "")
		row("Scale: RSS idle / peak; CPU per 1,000 requests; config load to ready", "",
			fmt.Sprintf("%.1f / %.1f MiB; %.3f s; %s", sc.IdleRSSMiB, sc.PeakRSSMiB, o.ViaCPUPer1k, (time.Duration(sc.ReadyMillis)*time.Millisecond).String()), "", "")
	}
	clientsRows(row, r.Clients)
	floorRows(row, "Go standard library reverse proxy (httputil.ReverseProxy)", "Go reverse proxy", r.GoProxy)
	floorRows(row, "nginx reverse proxy baseline", nginxName(r.Nginx), r.Nginx)
	if bl := r.Baseline; bl != nil {
		fmt.Fprintf(&sb, "\nThe same run, side by side with the baseline build `%s`:\n\n", bl.Binary)
		sb.WriteString("| Measure | Baseline build | Current build |\n|---|---:|---:|\n")
		row3 := func(cells ...string) { sb.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
		for i, o := range r.Overhead {
			if i < len(bl.Overhead) {
				bo := bl.Overhead[i]
				row3(fmt.Sprintf("Added latency at %s req/s, p50 / p99 / p99.9", thousands(o.Rate)), added3(bo), added3(o))
				row3(fmt.Sprintf("Proxy CPU per 1,000 requests at %s req/s", thousands(o.Rate)),
					fmt.Sprintf("%.3f s", bo.ViaCPUPer1k), fmt.Sprintf("%.3f s", o.ViaCPUPer1k))
			}
		}
		// Rows only for the parts that ran (--only).
		if bs := bl.Saturation; s.DirectRPS > 0 {
			row3("Saturation throughput (share of direct)", fmt.Sprintf("%s req/s (%.0f%%)", thousands(int(bs.ViaRPS)), bs.Ratio*100),
				fmt.Sprintf("%s req/s (%.0f%%)", thousands(int(s.ViaRPS)), s.Ratio*100))
			row3("Proxy CPU per 1,000 requests at saturation", fmt.Sprintf("%.3f s", bs.ViaCPUPer1k), fmt.Sprintf("%.3f s", s.ViaCPUPer1k))
		}
		if bst := bl.Streaming; st.DirectTTFT.N > 0 {
			row3("Streaming: added TTFT p50 / p99", fmt.Sprintf("%s / %s", plus(bst.AddedTTFTP50), plus(bst.AddedTTFTP99)),
				fmt.Sprintf("%s / %s", plus(st.AddedTTFTP50), plus(st.AddedTTFTP99)))
			row3("Streaming: added time per event after the first, median over i / p99", fmt.Sprintf("%s / %s", plus(bst.AddedPerEvent), plus(bst.AddedPerEventP99)),
				fmt.Sprintf("%s / %s", plus(st.AddedPerEvent), plus(st.AddedPerEventP99)))
			row3("Streaming: of that, added stream start p50; added event transit p50 / p99", fmt.Sprintf("%s; %s / %s", plus(bst.AddedStartP50), plus(bst.AddedTransitP50), plus(bst.AddedTransitP99)),
				fmt.Sprintf("%s; %s / %s", plus(st.AddedStartP50), plus(st.AddedTransitP50), plus(st.AddedTransitP99)))
			row3("Streaming: proxy CPU per 1,000 streams", fmt.Sprintf("%.3f s", bst.ViaCPUPer1k), fmt.Sprintf("%.3f s", st.ViaCPUPer1k))
		}
		row3("Proxy peak RSS (VmHWM)", fmt.Sprintf("%.1f MiB", bl.Proxy.PeakRSSMiB), fmt.Sprintf("%.1f MiB", r.Proxy.PeakRSSMiB))
		if bsc := bl.Scale; bsc != nil {
			row3("Scale: added latency at 1,000 req/s, p50 / p99 / p99.9", added3(bsc.Overhead), added3(r.Scale.Overhead))
			row3("Scale: CPU per 1,000 requests; RSS idle / peak", fmt.Sprintf("%.3f s; %.1f / %.1f MiB", bsc.Overhead.ViaCPUPer1k, bsc.IdleRSSMiB, bsc.PeakRSSMiB),
				fmt.Sprintf("%.3f s; %.1f / %.1f MiB", r.Scale.Overhead.ViaCPUPer1k, r.Scale.IdleRSSMiB, r.Scale.PeakRSSMiB))
		}
	}
	var notes []string
	for _, o := range r.Overhead {
		if o.Direct.Errors+o.Via.Errors > 0 {
			notes = append(notes, fmt.Sprintf("%d req/s: %d errors direct, %d through the proxy (first: %s%s)", o.Rate, o.Direct.Errors, o.Via.Errors, o.Direct.FirstError, o.Via.FirstError))
		}
	}
	if s.Errors > 0 {
		notes = append(notes, fmt.Sprintf("saturation: %d errors (first: %s)", s.Errors, s.FirstError))
	}
	if n := st.DirectTTFT.Errors + st.ViaTTFT.Errors; n > 0 {
		notes = append(notes, fmt.Sprintf("streaming: %d errors (first: %s%s)", n, st.DirectTTFT.FirstError, st.ViaTTFT.FirstError))
	}
	if n := f.Clean.Errors + f.Failover.Errors + f.Upstream503.Errors; n > 0 {
		notes = append(notes, fmt.Sprintf("failover: %d errors (first: %s%s%s)", n, f.Clean.FirstError, f.Failover.FirstError, f.Upstream503.FirstError))
	}
	if e.FirstError != "" {
		notes = append(notes, "ejection: first client error: "+e.FirstError)
	}
	if cl := r.Clients; cl.Open.Via.Errors+cl.WithClients.Via.Errors > 0 {
		notes = append(notes, fmt.Sprintf("clients: %d errors open, %d with clients (first: %s%s)", cl.Open.Via.Errors, cl.WithClients.Via.Errors, cl.Open.Via.FirstError, cl.WithClients.Via.FirstError))
	}
	for _, f := range []struct {
		name string
		n    *floorResult
	}{{"Go reverse proxy", r.GoProxy}, {"nginx", r.Nginx}} {
		if f.n == nil || f.n.Skipped != "" {
			continue
		}
		// The direct path's errors at the target rate are noted above already.
		if o := f.n.Overhead; o.Via.Errors > 0 {
			notes = append(notes, fmt.Sprintf("%s at %d req/s: %d errors (first: %s)", f.name, o.Rate, o.Via.Errors, o.Via.FirstError))
		}
		if fs := f.n.Saturation; fs.Errors > 0 {
			notes = append(notes, fmt.Sprintf("%s saturation: %d errors, direct included (first: %s)", f.name, fs.Errors, fs.FirstError))
		}
	}
	if len(notes) > 0 {
		sb.WriteString("\nErrors: " + strings.Join(notes, "; ") + "\n")
	}
	sb.WriteString(realisticMarkdown(r.Realistic))
	return sb.String()
}

// ---- formatting ----

// gapOf is the gap between a stream's events.
func gapOf(st streamResult) time.Duration {
	return time.Duration(math.Round(st.EventGapMs * float64(time.Millisecond)))
}

func usf(d time.Duration) float64 { return round1(float64(d) / float64(time.Microsecond)) }

func us(v float64) string {
	if math.Abs(v) >= 1000 {
		return fmt.Sprintf("%.2f ms", v/1000)
	}
	return fmt.Sprintf("%.0f µs", v)
}

func plus(v float64) string {
	if v >= 0 {
		return "+" + us(v)
	}
	return "−" + us(-v)
}

// added3 is the overhead cell of a latency row: pooled differences, then the paired median.
func added3(o overheadResult) string {
	return fmt.Sprintf("%s / %s / %s<br>paired: %s / %s", plus(o.AddedP50), plus(o.AddedP99), plus(o.AddedP999),
		plus(o.PairedAddedP50), plus(o.PairedAddedP99))
}

func lat3(l latency) string { return fmt.Sprintf("%s / %s / %s", us(l.P50), us(l.P99), us(l.P999)) }
func lat2(l latency) string { return fmt.Sprintf("%s / %s", us(l.P50), us(l.P99)) }

func mib(kib int64) float64 { return round1(float64(kib) / 1024) }

func round0(v float64) float64 { return math.Round(v) }
func round1(v float64) float64 { return math.Round(v*10) / 10 }
func round2(v float64) float64 { return math.Round(v*100) / 100 }
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// floorRows adds the rows of a floor measurement, one per run it took part in (--only), or says
// why it was skipped. Its Reference column is the direct path of the same rounds as Switchyard's:
// at the target rate, the same figures as in Switchyard's row.
func floorRows(row func(...string), title, name string, n *floorResult) {
	switch {
	case n == nil:
	case n.Skipped != "":
		row(title, "", "skipped: "+n.Skipped, "", "")
	default:
		o, s := n.Overhead, n.Saturation
		if o.Rate > 0 {
			row(fmt.Sprintf("%s, in the same slices as Switchyard: latency at %s req/s, p50 / p99 / p99.9 (n=%d)", name, thousands(o.Rate), o.Via.N),
				lat3(o.Direct), lat3(o.Via), added3(o), "")
		}
		var cpu []string
		if o.Rate > 0 {
			cpu = append(cpu, fmt.Sprintf("%.3f s at %s req/s", o.ViaCPUPer1k, thousands(o.Rate)))
		}
		if s.DirectRPS > 0 {
			cpu = append(cpu, fmt.Sprintf("%.3f s at saturation", s.ViaCPUPer1k))
			row(name+", in the same slices as Switchyard: saturation; CPU per 1,000 requests; peak RSS",
				fmt.Sprintf("%s req/s", thousands(int(s.DirectRPS))),
				fmt.Sprintf("%s req/s; %s; %.1f MiB", thousands(int(s.ViaRPS)), strings.Join(cpu, ", "), n.PeakRSSMiB),
				fmt.Sprintf("ratio %.0f%%", s.Ratio*100), "")
		} else {
			row(name+", in the same slices as Switchyard: CPU per 1,000 requests; peak RSS", "",
				fmt.Sprintf("%s; %.1f MiB", strings.Join(cpu, ", "), n.PeakRSSMiB), "", "")
		}
	}
}

// nginxName is nginx's name in the table: its version (nginx/1.22.1) when known.
func nginxName(n *floorResult) string {
	if n == nil || n.Version == "" {
		return "nginx"
	}
	return n.Version
}
