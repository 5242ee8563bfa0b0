package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clientsResult is the cost of who-may-call: the main config served openly (no GatewayClient, no
// audit log) and the same config with benchClients GatewayClients and --audit-log, each against
// direct in the same rounds, and the second against the first, round by round.
type clientsResult struct {
	Skipped  string `json:"skipped,omitempty"`
	Clients  int    `json:"clients"`
	AuditLog bool   `json:"auditLog"`
	// Open: the proxy without clients; WithClients: with them, the load carrying a valid key.
	Open        overheadResult `json:"open"`
	WithClients overheadResult `json:"withClients"`
	// Paired: the median over the rounds of (with clients' quantile − open's) in the same round.
	PairedDeltaP50 float64 `json:"pairedDeltaP50_us"`
	PairedDeltaP99 float64 `json:"pairedDeltaP99_us"`
	ReadyMillis    int64   `json:"readyMs"`
	PeakRSSMiB     float64 `json:"peakRSSMiB"`
	// AuditLines were written to the audit log during the run; AuditLost were dropped.
	AuditLines int64 `json:"auditLines"`
	AuditLost  int64 `json:"auditLost"`
}

// clients measures the client layer at the target rate: a second proxy with the main config, 1,000
// GatewayClients and the audit log on, beside the main proxy (open, no audit log) and direct, in
// the same rounds. The main proxy's load carries the same kind of Authorization header (it is not
// forwarded), so the two proxy paths differ only by what the client layer does with it.
func (b *bench) clients() error {
	p := b.plan
	b.logf("clients: %s GatewayClients and the audit log on, beside the open proxy, at %s req/s: %d × %s per path",
		thousands(benchClients), thousands(p.targetRate), p.rounds, p.slice)
	cfg, err := writeConfig(b.tmp, "clients", clientsConfig(b.upAddr))
	if err != nil {
		return err
	}
	auditPath := filepath.Join(b.tmp, "audit.log")
	cp, err := startProxy(b.ctx, "proxy-clients", b.tmp, b.opts.proxyBin, cfg, "--audit-log", auditPath)
	if err != nil {
		return err
	}
	b.children = append(b.children, cp.Child)
	defer cp.Stop(stopGrace)

	keyed := viaTarget("switchyard-clients", cp.api, plainBody, 256)
	keyed.header = clientHeader()
	keyed.header.Set("Authorization", "Bearer "+benchClientKey(benchClientTarget))
	if code, body, err := probe(keyed); err != nil || code != http.StatusOK {
		return fmt.Errorf("a request with the client's key: %d %s %v", code, body, err)
	}
	paths := []*path{
		{t: b.directTarget("direct", "/main/v1", plainBody, 256)},
		{t: viaTarget("switchyard", b.proxy.api, plainBody, 256), g: groupOf(b.proxy)},
		{t: keyed, g: groupOf(cp)},
	}
	b.openLoops(paths, p.targetRate, p.rounds, p.slice)
	r := clientsResult{Clients: benchClients, AuditLog: true, ReadyMillis: cp.readyIn.Milliseconds(),
		Open: rateResult(p.targetRate, paths[0], paths[1]), WithClients: rateResult(p.targetRate, paths[0], paths[2]),
		PairedDeltaP50: paired(paths[1], paths[2], 0.5), PairedDeltaP99: paired(paths[1], paths[2], 0.99)}
	_, hwm := paths[2].g.mem()
	r.PeakRSSMiB = mib(hwm)
	r.AuditLost, _ = adminCounter(cp.admin, "switchyard_audit_lines_lost_total")
	cp.Stop(stopGrace) // flushes the audit log
	r.AuditLines, err = countLines(auditPath)
	if err != nil {
		return err
	}
	b.res.Clients = r
	b.logf("  open proxy: added p50 %s p99 %s (paired %s / %s) | with %s clients and the audit log: added p50 %s p99 %s (paired %s / %s)",
		us(r.Open.AddedP50), us(r.Open.AddedP99), us(r.Open.PairedAddedP50), us(r.Open.PairedAddedP99),
		thousands(benchClients), us(r.WithClients.AddedP50), us(r.WithClients.AddedP99), us(r.WithClients.PairedAddedP50), us(r.WithClients.PairedAddedP99))
	b.logf("  the client layer, paired against the open proxy in the same rounds: p50 %s, p99 %s; CPU per 1,000 requests %.3f → %.3f s; %d audit lines, %d lost; ready in %s",
		plus(r.PairedDeltaP50), plus(r.PairedDeltaP99), r.Open.ViaCPUPer1k, r.WithClients.ViaCPUPer1k, r.AuditLines, r.AuditLost, cp.readyIn.Round(time.Millisecond))
	return nil
}

// probe sends one request of t and returns its status and (the start of) its body.
func probe(t *target) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, t.url, bytes.NewReader(t.body))
	if err != nil {
		return 0, "", err
	}
	req.Header = t.header.Clone()
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, string(body), nil
}

// adminCounter reads one unlabelled counter from a proxy's /metrics.
func adminCounter(admin, name string) (int64, error) {
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			return int64(v), err
		}
	}
	return 0, fmt.Errorf("%s not in /metrics", name)
}

// countLines counts the request lines of an audit log: its records (the end record of the
// proxy's shutdown, a rotation's start) are not requests.
func countLines(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull { // a line longer than the buffer: its rest
				_, err = r.ReadSlice('\n')
			}
			n++
		} else if len(line) > 0 && !bytes.Contains(line, []byte(`"record":"`)) {
			n++
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// clientsRows are the table's rows of the clients measurement.
func clientsRows(row func(...string), c clientsResult) {
	switch {
	case c.Skipped != "":
		row("Client keys and audit log", "", "skipped: "+c.Skipped, "", "")
	case c.Clients > 0:
		o, w := c.Open, c.WithClients
		row(fmt.Sprintf("Client keys: latency at %s req/s, open (no GatewayClient, no audit log), p50 / p99 / p99.9 (n=%d)", thousands(o.Rate), o.Via.N),
			lat3(o.Direct), lat3(o.Via), added3(o), "")
		row(fmt.Sprintf("Client keys: the same rounds with %s GatewayClients, a valid key on every request and the audit log on (n=%d)", thousands(c.Clients), w.Via.N),
			lat3(w.Direct), lat3(w.Via), added3(w), "")
		row("Client keys: what the client layer adds to the open proxy, paired by round, p50 / p99; CPU per 1,000 requests; audit lines (lost)", "",
			fmt.Sprintf("%.3f → %.3f s; %s (%d)", o.ViaCPUPer1k, w.ViaCPUPer1k, thousands(int(c.AuditLines)), c.AuditLost),
			fmt.Sprintf("%s / %s", plus(c.PairedDeltaP50), plus(c.PairedDeltaP99)), "")
	}
}
