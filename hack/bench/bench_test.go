package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
	"github.com/switchyard-io/switchyard/internal/routing"
)

func TestQuantileIsNearestRank(t *testing.T) {
	var d dist
	for i := 1; i <= 1000; i++ {
		d = append(d, time.Duration(i))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 500}, {0.99, 990}, {0.999, 999}, {1, 1000}, {0.0001, 1}} {
		if got := d.q(c.p); got != c.want {
			t.Errorf("q(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if (dist{}).q(0.5) != 0 {
		t.Error("empty dist")
	}
}

func TestPairedIsTheMedianOfRoundDifferences(t *testing.T) {
	round := func(lat time.Duration) runResult {
		return runResult{samples: []sample{{lat: lat}, {lat: lat}, {lat: lat}}}
	}
	us := time.Microsecond
	d := &path{rounds: []runResult{round(100 * us), round(100 * us), round(5000 * us)}}
	v := &path{rounds: []runResult{round(150 * us), round(170 * us), round(100 * us)}}
	// Differences +50, +70, -4900: the burst in round 3 moves one round, not the median.
	if got := paired(d, v, 0.5); got != 50 {
		t.Fatalf("paired = %v µs, want 50", got)
	}
}

// TestSliceOrderIsBalanced: over a full cycle of rounds every path takes every place equally
// often and follows every other path equally often (so no path always comes right after the same
// one), and two paths alternate AB, BA as before.
func TestSliceOrderIsBalanced(t *testing.T) {
	for n := 1; n <= 6; n++ {
		cycle := n
		if n%2 == 1 {
			cycle = 2 * n
		}
		place := make([][]int, n) // place[path][position]
		follows := make([][]int, n)
		for i := range n {
			place[i], follows[i] = make([]int, n), make([]int, n)
		}
		for r := range cycle {
			order := sliceOrder(n, r)
			if got := sliceOrder(n, r+cycle); !slices.Equal(got, order) {
				t.Fatalf("n=%d: round %d is %v, round %d %v: want a cycle of %d", n, r, order, r+cycle, got, cycle)
			}
			seen := make([]bool, n)
			for j, p := range order {
				if seen[p] {
					t.Fatalf("n=%d round %d: %v is not a permutation", n, r, order)
				}
				seen[p] = true
				place[p][j]++
				if j > 0 {
					follows[p][order[j-1]]++
				}
			}
		}
		for p := range n {
			for j := range n {
				if place[p][j] != cycle/n {
					t.Errorf("n=%d: path %d in place %d %d times in %d rounds, want %d", n, p, j, place[p][j], cycle, cycle/n)
				}
				if want := cycle / n; j != p && follows[p][j] != want {
					t.Errorf("n=%d: path %d after path %d %d times in %d rounds, want %d", n, p, j, follows[p][j], cycle, want)
				}
			}
		}
	}
	var two [][]int
	for r := range 4 {
		two = append(two, sliceOrder(2, r))
	}
	if want := [][]int{{0, 1}, {1, 0}, {0, 1}, {1, 0}}; !slices.EqualFunc(two, want, slices.Equal) {
		t.Errorf("two paths: %v, want %v", two, want)
	}
}

// TestFloorRowsOnlyForTheRunsTheFloorTookPart: with --only, a floor may have an overhead and no
// saturation figure (or the reverse); no row shows zeros for the run it was not in.
func TestFloorRowsOnlyForTheRunsTheFloorTookPart(t *testing.T) {
	rows := func(n *floorResult) []string {
		var out []string
		floorRows(func(c ...string) { out = append(out, strings.Join(c, " | ")) }, "title", "nginx/1.22.1", n)
		return out
	}
	if got := rows(&floorResult{Skipped: "needs overhead or saturation"}); len(got) != 1 || !strings.Contains(got[0], "skipped: needs overhead or saturation") {
		t.Errorf("skipped: %q", got)
	}
	over := overheadResult{Rate: 1000, Via: latency{N: 10}, ViaCPUPer1k: 0.1}
	got := rows(&floorResult{Overhead: over, PeakRSSMiB: 5})
	if len(got) != 2 || !strings.Contains(got[0], "in the same slices as Switchyard: latency at 1,000 req/s") ||
		strings.Contains(got[1], "saturation") || !strings.Contains(got[1], "0.100 s at 1,000 req/s") {
		t.Errorf("overhead only: %q", got)
	}
	got = rows(&floorResult{Saturation: saturationResult{DirectRPS: 100, ViaRPS: 50, Ratio: 0.5, ViaCPUPer1k: 0.2}})
	if len(got) != 1 || !strings.Contains(got[0], "saturation") || strings.Contains(got[0], "req/s,") || !strings.Contains(got[0], "0.200 s at saturation") {
		t.Errorf("saturation only: %q", got)
	}
}

// TestStreamEventsAreComparedIndexByIndex: the added time per event is the median over the
// indices after the first of (via's median arrival of event i - direct's), each median taken
// over the streams; its p99 is that of the pooled lateness (arrival less i × gap).
func TestStreamEventsAreComparedIndexByIndex(t *testing.T) {
	us, gap := time.Microsecond, 2*time.Millisecond
	// Five streams of four events per path; stream k is k × 10 µs late throughout. Through the
	// proxy every event is 280 µs later, and event 3 another millisecond.
	streams := func(base time.Duration, extra func(i int) time.Duration) []sample {
		var out []sample
		for k := range 5 {
			var s sample
			for i := range 4 {
				at := base + time.Duration(i)*gap + time.Duration(k)*10*us + extra(i)
				s.events = append(s.events, eventTime{at: at, transit: time.Duration(10+k) * us})
			}
			s.ttft = s.events[0].at
			out = append(out, s)
		}
		return out
	}
	direct := streams(100*us, func(int) time.Duration { return 0 })
	via := streams(380*us, func(i int) time.Duration {
		if i == 3 {
			return time.Millisecond
		}
		return 0
	})
	for i, m := range eventMedians(direct) {
		if want := 120*us + time.Duration(i)*gap; m != want {
			t.Errorf("direct median of event %d = %v, want %v", i, m, want)
		}
	}
	d := &path{res: runResult{samples: direct, sent: 5}}
	v := &path{res: runResult{samples: via, sent: 5}}
	s := streamOf(plan{streamEvents: 4, streamRate: 100, streamGap: gap}, d, v)
	if want := []float64{280, 280, 280, 1280}; !slices.Equal(s.AddedByIndex, want) {
		t.Errorf("added by index = %v, want %v", s.AddedByIndex, want)
	}
	// Indices 1..3: 280, 280, 1280; the late index moves the p99, not the median.
	if s.AddedPerEvent != 280 {
		t.Errorf("added per event = %v µs, want 280", s.AddedPerEvent)
	}
	// Pooled lateness of events 1..3 (15 per path): direct 100..140 µs, so p99 140; via 380..420
	// for events 1 and 2 and 1380..1420 for event 3, so p99 1420.
	if s.DirectEvent.N != 15 || s.DirectEvent.P50 != 120 || s.DirectEvent.P99 != 140 || s.ViaEvent.P99 != 1420 || s.AddedPerEventP99 != 1280 {
		t.Errorf("lateness: direct %+v, via %+v, added p99 %v", s.DirectEvent, s.ViaEvent, s.AddedPerEventP99)
	}
	// The same transits on both paths: all of the 280 µs is the stream starting later (the first
	// event's arrival less its transit: direct 90 + 9k µs, so a median of 108).
	if s.AddedTTFTP50 != 280 || s.DirectTransit.N != 15 || s.AddedTransitP50 != 0 || s.DirectStart.P50 != 108 || s.AddedStartP50 != 280 {
		t.Errorf("TTFT added %v, transit %+v added %v, start %+v added %v", s.AddedTTFTP50, s.DirectTransit, s.AddedTransitP50, s.DirectStart, s.AddedStartP50)
	}

	// Streams of different lengths count for the indices they have; events without a stamp have
	// no transit; the first event is the TTFT's, not a later event's.
	short := []sample{
		{events: []eventTime{{at: 10, transit: 7}, {at: 20, transit: -1}, {at: 30, transit: 5}}},
		{events: []eventTime{{at: 50, transit: -1}}},
	}
	if got := eventMedians(short); !slices.Equal(got, []time.Duration{10, 20, 30}) {
		t.Errorf("medians of uneven streams = %v", got)
	}
	if got := transits(short); !slices.Equal(got, dist{5}) {
		t.Errorf("transits = %v", got)
	}
	if got := streamStarts(short); !slices.Equal(got, dist{3}) {
		t.Errorf("stream starts = %v", got)
	}
	if got := lateness(short, 1); !slices.Equal(got, dist{19, 28}) {
		t.Errorf("lateness = %v", got)
	}
	if medianF([]float64{4, 1, 3, 2}) != 2.5 || medianF([]float64{3, 1, 2}) != 2 || medianF(nil) != 0 {
		t.Error("medianF")
	}
}

func TestEventStamp(t *testing.T) {
	line := appendChunk(nil, time.Now(), false)
	stamp, ok := eventStamp(line)
	if now := time.Now().UnixNano(); !ok || stamp > now || now-stamp > int64(time.Minute) {
		t.Fatalf("stamp %d (ok %v) in %s", stamp, ok, line)
	}
	if _, ok := eventStamp([]byte(`data: {"id":"chatcmpl-other"}`)); ok {
		t.Error("a stamp in an event without one")
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestUpstream: the mock upstream answers, streams, and fails where the bench expects it to.
func TestUpstream(t *testing.T) {
	u := &upstream{}
	srv := httptest.NewServer(u)
	defer srv.Close()
	post := func(path, body string, hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post("/main/v1/chat/completions", string(plainBody), nil)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != string(fixedBody) {
		t.Fatalf("plain: %d %s", resp.StatusCode, b)
	}

	resp = post("/main/v1/chat/completions", string(streamBody), map[string]string{eventsHeader: "5"})
	sc := bufio.NewScanner(resp.Body)
	var data []string
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data:") {
			data = append(data, sc.Text())
		}
	}
	resp.Body.Close()
	if len(data) != 6 || data[5] != "data: [DONE]" || !strings.Contains(data[4], `"finish_reason":"stop"`) {
		t.Fatalf("stream: %d data lines: %q", len(data), data)
	}

	// Paced: chunk i is written i × gap after the first.
	const gap = 20 * time.Millisecond
	resp = post("/main/v1/chat/completions", string(streamBody), map[string]string{eventsHeader: "4", gapHeader: gap.String()})
	var stamps []int64
	sc = bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if st, ok := eventStamp(sc.Bytes()); ok {
			stamps = append(stamps, st)
		}
	}
	resp.Body.Close()
	if len(stamps) != 4 {
		t.Fatalf("paced stream: %d stamped chunks, want 4", len(stamps))
	}
	for i := 1; i < len(stamps); i++ {
		if d := time.Duration(stamps[i] - stamps[0]); d < time.Duration(i)*gap {
			t.Errorf("chunk %d written %v after the first, want at least %v", i, d, time.Duration(i)*gap)
		}
	}
	for _, bad := range []string{"2", "-1ms", "101ms", "soon"} {
		resp := post("/main/v1/chat/completions", string(streamBody), map[string]string{gapHeader: bad})
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), gapHeader) {
			t.Errorf("%s: %q: %d %s", gapHeader, bad, resp.StatusCode, b)
		}
	}

	// Random gaps between the gap and its maximum, still on a schedule from the first chunk; a
	// maximum below the gap is refused.
	resp = post("/main/v1/chat/completions", string(streamBody), map[string]string{eventsHeader: "4", gapHeader: "5ms", gapMaxHeader: "15ms"})
	stamps = stamps[:0]
	sc = bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if st, ok := eventStamp(sc.Bytes()); ok {
			stamps = append(stamps, st)
		}
	}
	resp.Body.Close()
	if len(stamps) != 4 {
		t.Fatalf("random gaps: %d stamped chunks, want 4", len(stamps))
	}
	// On a schedule: chunk i is never written before i minimal gaps after the first. One gap may
	// be short when a chunk late on a loaded machine is followed by one on time, so only the
	// cumulative bound holds (it failed once as a per-gap bound: 128µs after a late chunk).
	for i := 1; i < len(stamps); i++ {
		if d := time.Duration(stamps[i] - stamps[0]); d < time.Duration(i)*(5*time.Millisecond-time.Millisecond) {
			t.Errorf("chunk %d written %v after the first, want at least %v", i, d, time.Duration(i)*4*time.Millisecond)
		}
	}
	// Held for X-Stainless-Bench-Delay: a plain answer, and a stream's first chunk.
	start := time.Now()
	resp = post("/main/v1/chat/completions", string(plainBody), map[string]string{delayHeader: "30ms"})
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if d := time.Since(start); resp.StatusCode != 200 || d < 30*time.Millisecond {
		t.Errorf("delayed answer: %d after %v, want 200 after at least 30ms", resp.StatusCode, d)
	}
	start = time.Now()
	resp = post("/main/v1/chat/completions", string(streamBody), map[string]string{delayHeader: "30ms", eventsHeader: "2"})
	sc = bufio.NewScanner(resp.Body)
	first := time.Duration(0)
	for sc.Scan() {
		if first == 0 && strings.HasPrefix(sc.Text(), "data:") {
			first = time.Since(start)
		}
	}
	resp.Body.Close()
	if first < 30*time.Millisecond {
		t.Errorf("delayed stream: first chunk after %v, want at least 30ms", first)
	}
	for h, bad := range map[string]string{delayHeader: "6s", gapMaxHeader: "1ms"} {
		resp := post("/main/v1/chat/completions", string(streamBody), map[string]string{gapHeader: "2ms", h: bad})
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), h) {
			t.Errorf("%s: %q: %d %s", h, bad, resp.StatusCode, b)
		}
	}

	if resp := post("/fo-a/v1/chat/completions", "{}", map[string]string{failHeader: "1"}); resp.StatusCode != 503 {
		t.Fatalf("fo-a with %s: %d", failHeader, resp.StatusCode)
	}
	if resp := post("/fo-b/v1/chat/completions", "{}", map[string]string{failHeader: "1"}); resp.StatusCode != 200 {
		t.Fatalf("fo-b with %s: %d", failHeader, resp.StatusCode)
	}
	if resp := post("/eject-a/v1/chat/completions", "{}", nil); resp.StatusCode != 200 {
		t.Fatalf("eject-a before the flip: %d", resp.StatusCode)
	}
	post("/_bench/eject-fail", "", nil).Body.Close()
	if resp := post("/eject-a/v1/chat/completions", "{}", nil); resp.StatusCode != 503 {
		t.Fatalf("eject-a after the flip: %d", resp.StatusCode)
	}
	if u.fo503.Load() != 1 || u.eject503.Load() != 1 {
		t.Fatalf("503 counts %d %d", u.fo503.Load(), u.eject503.Load())
	}
}

// The bench's control headers reach the mock upstream through the proxy's own handler, which
// forwards only an allowlist of client headers: a failing first attempt fails over, and a
// paced stream is paced through the proxy too.
func TestControlHeadersPassTheProxy(t *testing.T) {
	u := &upstream{}
	up := httptest.NewServer(u)
	defer up.Close()
	dir, err := writeConfig(t.TempDir(), "main", mainConfig(strings.TrimPrefix(up.URL, "http://")))
	if err != nil {
		t.Fatal(err)
	}
	srv := proxy.New(proxy.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := (&source.FileSource{Path: dir, Getenv: func(string) string { return "" }}).Load(srv); err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(srv.Handler())
	defer front.Close()
	post := func(body []byte, hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, front.URL+chatPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post(bodyFor(modelFailover, false), map[string]string{failHeader: "1"})
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Attempts") != "2" || u.fo503.Load() != 1 {
		t.Errorf("failover: %d, attempts %q, upstream 503s %d; want 200 after 2 attempts", resp.StatusCode, resp.Header.Get("X-Switchyard-Attempts"), u.fo503.Load())
	}
	resp = post(streamBody, map[string]string{eventsHeader: "3", gapHeader: "10ms"})
	var stamps []int64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if st, ok := eventStamp(sc.Bytes()); ok {
			stamps = append(stamps, st)
		}
	}
	resp.Body.Close()
	if len(stamps) != 3 || time.Duration(stamps[2]-stamps[0]) < 20*time.Millisecond {
		t.Errorf("paced stream through the proxy: stamps %v, want 3 chunks 10ms apart", stamps)
	}
}

// TestConfigsCompile: the manifests the bench writes load and compile with the proxy's own code.
func TestConfigsCompile(t *testing.T) {
	for name, cfg := range map[string]string{"main": mainConfig("127.0.0.1:1"), "scale": scaleConfig("127.0.0.1:1"), "realistic": realConfig("127.0.0.1:1", "127.0.0.1:2"),
		"clients": clientsConfig("127.0.0.1:1")} {
		dir, err := writeConfig(t.TempDir(), name, cfg)
		if err != nil {
			t.Fatal(err)
		}
		tab, _, err := proxyLoad(dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "scale" && (len(tab.Channels) != scaleChannels || len(tab.Policies) != scaleChannels/scaleGroup) {
			t.Fatalf("scale: %d channels, %d policies", len(tab.Channels), len(tab.Policies))
		}
		if name == "clients" {
			if len(tab.Clients) != benchClients {
				t.Fatalf("clients: %d GatewayClients, want %d", len(tab.Clients), benchClients)
			}
			c := tab.Clients[benchClientTarget] // sorted by name: client-0500
			if c.Name != fmt.Sprintf("client-%04d", benchClientTarget) || !c.Allows(modelOverhead) || c.KeyHashes[0] != routing.KeyHash(benchClientKey(benchClientTarget)) {
				t.Fatalf("clients: the target client %+v does not hold the load's key or model", c)
			}
		}
	}
}

// The audit lines counted are the requests: the log's records (its end record) are not.
func TestCountLinesSkipsRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	body := `{"requestId":"a","seq":1,"prev":""}` + "\n" + `{"requestId":"b","seq":2,"prev":"x"}` + "\n" + `{"ts":"t","record":"end","seq":3,"prev":"y"}` + "\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := countLines(path); err != nil || n != 2 {
		t.Fatalf("countLines = %d, %v; want 2", n, err)
	}
}
