package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/fleet/redistest"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

// The fleet end to end: N standalone proxies (run, as the binary runs) on one config behind a
// round-robin client, one provider answering 503, the other healthy, with or without a real
// Redis between the proxies.

const brokenChannel = "broken"

// fleetManifests is two channels of gpt-4o: broken (tried first) and good. Recovery is short, so a
// test sees several probe intervals: cooldown 2s, a probe every second.
func fleetManifests(t *testing.T, broken, good string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: broken}
spec:
  provider: openai
  baseURL: %s/v1
  models: [{name: gpt-4o}]
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: good}
spec:
  provider: openai
  baseURL: %s/v1
  models: [{name: gpt-4o}]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  strategy: Priority
  channels: [{name: broken}, {name: good}]
  recovery:
    cooldown: 2s
    maxCooldown: 2s
    probe: {interval: 1s, successesRequired: 3}
`, broken, good)
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

type fleetRig struct {
	t            *testing.T
	broken, good *mockprovider.Server
	apis, admins []string
	logs         []*testutil.SyncBuffer
	redis        *redistest.Server
}

// startFleet starts n proxies; with shared, they share a real Redis.
func startFleet(t *testing.T, n int, shared bool, interval time.Duration) *fleetRig {
	t.Helper()
	r := &fleetRig{t: t, broken: mockprovider.New(mockprovider.Options{Name: "broken"}), good: mockprovider.New(mockprovider.Options{Name: "good"})}
	bs, gs := httptest.NewServer(r.broken), httptest.NewServer(r.good)
	t.Cleanup(func() { r.broken.Close(); r.good.Close(); bs.Close(); gs.Close() })
	if shared {
		r.redis = redistest.Start(t)
	}
	dir := fleetManifests(t, bs.URL, gs.URL)
	addrs := testutil.FreeAddrs(t, 2*n)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range n {
		api, admin := addrs[2*i], addrs[2*i+1]
		args := []string{"proxy", "--config", dir, "--listen", api, "--admin-listen", admin, "--replica", fmt.Sprintf("r%d", i),
			"--drain-timeout", "1s", "--tick", "50ms"}
		if shared {
			args = append(args, "--fleet-redis", r.redis.URL(), "--fleet-name", "e2e", "--fleet-sync-interval", interval.String())
		}
		logs := &testutil.SyncBuffer{}
		r.apis, r.admins, r.logs = append(r.apis, api), append(r.admins, admin), append(r.logs, logs)
		wg.Add(1)
		go func() { defer wg.Done(); run(ctx, args, io.Discard, logs) }()
	}
	for i, admin := range r.admins {
		deadline := time.Now().Add(15 * time.Second)
		for {
			resp, err := http.Get("http://" + admin + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("proxy %d never became ready:\n%s", i, logs(r.logs[i]))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return r
}

func logs(b *testutil.SyncBuffer) string {
	s := b.String()
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}

// channels reads replica i's /admin/v1/channels.
func (r *fleetRig) channels(i int) adminapi.ChannelsResponse {
	r.t.Helper()
	resp, err := http.Get("http://" + r.admins[i] + adminapi.ChannelsPath)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc adminapi.ChannelsResponse
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		r.t.Fatal(err)
	}
	return doc
}

func (r *fleetRig) phase(i int) string {
	for _, c := range r.channels(i).Channels {
		if c.Channel == brokenChannel {
			return c.Phase
		}
	}
	return ""
}

// load sends requests round-robin over the proxies at rate per second in total until stop is
// closed, and counts the answers that were not 200.
type load struct {
	sent, errors atomic.Int64
	stop         chan struct{}
	done         sync.WaitGroup
}

func (r *fleetRig) startLoad(rate float64) *load {
	l := &load{stop: make(chan struct{})}
	client := &http.Client{Timeout: 10 * time.Second}
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		t := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-t.C:
			}
			api := r.apis[i%len(r.apis)]
			l.done.Add(1)
			go func() {
				defer l.done.Done()
				l.sent.Add(1)
				resp, err := client.Post("http://"+api+"/v1/chat/completions", "application/json",
					strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`))
				if err != nil {
					l.errors.Add(1)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					l.errors.Add(1)
				}
			}()
		}
	}()
	return l
}

func (l *load) Stop() { close(l.stop); l.done.Wait() }

// outage is what one outage cost: when each replica ejected the broken channel (since the
// outage began), the failed attempts it took, and the probes after the whole fleet ejected.
type outage struct {
	eject            []time.Duration // per replica, sorted
	failed, probes   int
	ejectedAll       bool
	probeWindow      time.Duration
	clientErr, total int64
}

func (o outage) String() string {
	if len(o.eject) == 0 {
		return "no ejection"
	}
	return fmt.Sprintf("eject min/median/max %.2f/%.2f/%.2f s, failed attempts %d, probes %d in %s, client errors %d of %d",
		o.eject[0].Seconds(), o.eject[len(o.eject)/2].Seconds(), o.eject[len(o.eject)-1].Seconds(), o.failed, o.probes, o.probeWindow, o.clientErr, o.total)
}

// playOutage breaks the broken channel under load at rate req/s in total, waits until every
// replica ejected it (at most limit), then counts the requests the broken provider gets over
// probeWindow: with the channel out of rotation, those are probes.
func (r *fleetRig) playOutage(rate float64, limit, probeWindow time.Duration) outage {
	r.t.Helper()
	l := r.startLoad(rate)
	time.Sleep(time.Second) // a healthy second first: the windows hold successes
	base := r.broken.Total()
	r.broken.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503})
	start := time.Now()
	o := outage{probeWindow: probeWindow}
	ejected := make([]time.Duration, len(r.admins))
	for time.Since(start) < limit {
		all := true
		for i := range r.admins {
			if ejected[i] == 0 && r.phase(i) != "Healthy" && r.phase(i) != "" {
				ejected[i] = time.Since(start)
			}
			all = all && ejected[i] != 0
		}
		if all {
			o.ejectedAll = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	o.failed = r.broken.Total() - base
	for _, d := range ejected {
		if d != 0 {
			o.eject = append(o.eject, d)
		}
	}
	slices.Sort(o.eject)
	if o.ejectedAll && probeWindow > 0 {
		before := r.broken.Total()
		time.Sleep(probeWindow)
		o.probes = r.broken.Total() - before
	}
	l.Stop()
	o.clientErr, o.total = l.errors.Load(), l.sent.Load()
	return o
}

// TestFleetEjectsAndProbesLikeOneProxy: 4 proxies sharing a Redis eject a failing channel about
// as fast as one proxy at the same total rate, and probe it about as often as one proxy does.
func TestFleetEjectsAndProbesLikeOneProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("plays two outages (about 30s)")
	}
	const rate = 20.0
	window := 12 * time.Second
	one := startFleet(t, 1, false, 0).playOutage(rate, 20*time.Second, window)
	t.Logf("1 proxy:            %s", one)
	// At the shortest sync interval: a fleet verdict takes about four of them (two exchanges of
	// every replica for a complete view, the trip's proposal, its adoption); TestFleetTable
	// measures the default 1s too.
	shared := startFleet(t, 4, true, 100*time.Millisecond).playOutage(rate, 20*time.Second, window)
	t.Logf("4 proxies, shared:  %s", shared)
	if !one.ejectedAll || !shared.ejectedAll {
		t.Fatalf("not every replica ejected: one %v, shared %v", one, shared)
	}
	// The time to eject, as a count: at one total rate, every request tries the broken channel
	// first until its replica ejects it, so the failed attempts until the whole fleet ejected
	// measure that time without asserting on wall-clock durations (logged above).
	if shared.failed > 2*one.failed {
		t.Errorf("the fleet took %d failed attempts to eject, more than twice one proxy's %d", shared.failed, one.failed)
	}
	t.Logf("eject across the fleet / one proxy: %.1fx in time, %.1fx in failed attempts; probes %.1fx",
		shared.eject[len(shared.eject)-1].Seconds()/one.eject[len(one.eject)-1].Seconds(),
		float64(shared.failed)/float64(one.failed), float64(shared.probes)/float64(max(one.probes, 1)))
	if float64(shared.probes) > 1.5*float64(max(one.probes, 1)) {
		t.Errorf("the fleet sent %d probes in %s, more than 1.5x one proxy's %d", shared.probes, window, one.probes)
	}
	if one.clientErr != 0 || shared.clientErr != 0 {
		t.Errorf("client errors: one proxy %d, fleet %d (the good channel serves every request)", one.clientErr, shared.clientErr)
	}
}

// TestFleetRunsLocallyWhileRedisStops: Redis stops answering (SIGSTOP) in the middle of an
// outage: no client sees an error, every replica reports local mode on /admin/v1/channels within
// 5s and keeps judging on its own evidence; SIGCONT brings the sharing back by itself.
func TestFleetRunsLocallyWhileRedisStops(t *testing.T) {
	if testing.Short() {
		t.Skip("about 20s")
	}
	r := startFleet(t, 4, true, 250*time.Millisecond)
	for i := range r.admins {
		if f := r.channels(i).Fleet; f == nil || !f.Connected || f.Name != "e2e" {
			t.Fatalf("replica %d did not join the fleet: %+v", i, f)
		}
	}
	l := r.startLoad(20)
	r.broken.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503})
	// The fleet's view of the key on every replica: its verdict, who set it, the replicas per
	// phase (each replica's view is as of its last sync, so it is polled; the cooldown is 2s).
	views := make([]*adminapi.FleetKeyState, len(r.admins))
	for start := time.Now(); time.Since(start) < 2*time.Second; time.Sleep(50 * time.Millisecond) {
		ok := 0
		for i := range r.admins {
			for _, c := range r.channels(i).Channels {
				if c.Channel == brokenChannel {
					views[i] = c.Fleet
				}
			}
			if v := views[i]; v != nil && v.Phase == "Ejected" && v.VerdictBy != "" && v.Replicas["Ejected"]+v.Replicas["Probing"] == len(r.admins) {
				ok++
			}
		}
		if ok == len(r.admins) {
			break
		}
	}
	for i, v := range views {
		if v == nil || v.Phase != "Ejected" || v.VerdictBy == "" || v.Replicas["Ejected"]+v.Replicas["Probing"] != len(r.admins) {
			t.Errorf("replica %d's fleet view of %s: %+v, want the fleet's Ejected verdict and the 4 replicas out of rotation", i, brokenChannel, v)
		}
	}
	time.Sleep(time.Second) // into the probes
	r.redis.Pause()
	paused := time.Now()
	local := make([]time.Duration, len(r.admins))
	for time.Since(paused) < 8*time.Second {
		n := 0
		for i := range r.admins {
			if f := r.channels(i).Fleet; local[i] == 0 && f != nil && !f.Connected {
				if f.Reason == "" {
					t.Errorf("replica %d in local mode without a reason", i)
				}
				local[i] = time.Since(paused)
			}
			if local[i] != 0 {
				n++
			}
		}
		if n == len(r.admins) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, d := range local {
		if d == 0 || d > 5*time.Second {
			t.Errorf("replica %d reported local mode after %v, want within 5s", i, d)
		}
	}
	t.Logf("local mode after %v (SIGSTOP of Redis)", local)
	time.Sleep(time.Second) // a second on local evidence alone, under load
	r.redis.Resume()
	resumed := time.Now()
	for i := range r.admins {
		for r.channels(i).Fleet.Connected == false && time.Since(resumed) < 10*time.Second {
			time.Sleep(50 * time.Millisecond)
		}
		if f := r.channels(i).Fleet; !f.Connected || f.Replicas != len(r.admins) {
			t.Errorf("replica %d after SIGCONT: %+v, want connected with %d replicas", i, f, len(r.admins))
		}
	}
	t.Logf("sharing again %v after SIGCONT", time.Since(resumed))
	l.Stop()
	if n := l.errors.Load(); n != 0 {
		t.Errorf("%d of %d client requests failed while Redis stopped and came back", n, l.sent.Load())
	}
	for i := range r.admins {
		if !strings.Contains(r.logs[i].String(), "Lost the fleet store") {
			t.Errorf("replica %d logged no line on going local", i)
		}
		if strings.Count(r.logs[i].String(), "Lost the fleet store") != 1 {
			t.Errorf("replica %d logged local mode more than once", i)
		}
	}
}

// TestFleetTable measures issue 29's table, local (every replica alone) vs shared (Redis, the
// default 1s sync interval): SWITCHYARD_FLEET_TABLE=1 go test ./cmd/switchyard/ -run TestFleetTable -v
// (about 6 minutes). Probes are the broken provider's requests in the 20s after the whole fleet
// ejected it (cooldown 2s, a probe a second: fleetManifests).
func TestFleetTable(t *testing.T) {
	if os.Getenv("SWITCHYARD_FLEET_TABLE") == "" {
		t.Skip("set SWITCHYARD_FLEET_TABLE=1 to measure the table (minutes)")
	}
	rows := []struct {
		replicas int
		rate     float64 // requests per second in total
	}{{1, 20}, {4, 20}, {6, 20}, {4, 1.6}}
	for _, row := range rows {
		for _, shared := range []bool{false, true} {
			if row.replicas == 1 && shared {
				continue
			}
			mode := "local"
			if shared {
				mode = "shared"
			}
			o := startFleet(t, row.replicas, shared, time.Second).playOutage(row.rate, 200*time.Second, 20*time.Second)
			t.Logf("| %d at %.1f req/s in total | %s | %s |", row.replicas, row.rate, mode, o)
		}
	}
}

// TestFleetSharesRetryAfter: a provider out of quota answers 429 with Retry-After to everyone.
// Alone, each replica learns it from a 429 of its own; sharing Redis, the first 429's
// Retry-After holds every replica back, so the fleet takes about one 429 per Retry-After (plus
// what the other replicas sent before their next sync). The load is 4 requests a second, round
// robin: each replica's next request comes 250 ms after the one before on another replica, past
// a sync's two legs (the 429's replica's report, the others' next exchange, 100 ms apart each),
// so the figure says whether the Retry-After was shared, not how busy the machine was (at 20
// req/s the next three requests went out within 150 ms of the first 429, and a loaded machine's
// late syncs let all four replicas take one).
func TestFleetSharesRetryAfter(t *testing.T) {
	if testing.Short() {
		t.Skip("about 15s")
	}
	count := func(shared bool) int {
		r := startFleet(t, 4, shared, 100*time.Millisecond)
		l := r.startLoad(4)
		time.Sleep(500 * time.Millisecond)
		base := r.broken.Total()
		r.broken.SetDefault(mockprovider.Behavior{Mode: mockprovider.ModeRateLimit, RetryAfter: 30})
		time.Sleep(5 * time.Second) // well inside one Retry-After
		l.Stop()
		if n := l.errors.Load(); n != 0 {
			t.Errorf("shared=%v: %d client errors (the good channel serves every request)", shared, n)
		}
		return r.broken.Total() - base
	}
	local, shared := count(false), count(true)
	t.Logf("429s in one Retry-After (30s) at 4 req/s over 4 proxies: alone %d, sharing Redis %d", local, shared)
	if local < 4 {
		t.Fatalf("alone the 4 replicas took %d 429s, want at least one each: the test does not see the difference", local)
	}
	if shared > 3 {
		t.Errorf("sharing Redis the fleet took %d 429s in one Retry-After, want about one (at most 3)", shared)
	}
}
