package main

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
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

// TestConfigsCompile: the manifests the bench writes load and compile with the proxy's own code.
func TestConfigsCompile(t *testing.T) {
	for name, cfg := range map[string]string{"main": mainConfig("127.0.0.1:1"), "scale": scaleConfig("127.0.0.1:1")} {
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
	}
}
