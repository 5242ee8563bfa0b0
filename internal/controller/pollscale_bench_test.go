package controller

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/adminapi"
)

// Scale of the fake replica set: SWITCHYARD_BENCH_REPLICAS replicas (default 200) of 1,000
// channels × 5 models, 2,200 objects' generations in their config.
const (
	benchChannels = 1000
	benchModels   = 5
	benchObjects  = 2200
)

// BenchmarkPollAtScale polls a fake replica set the size of the (200 replicas × 5,000
// channel×models) with the controller's poller, once per iteration, as it does every poll
// interval. The replicas run in a child process (TestHelperFakeReplicaSet), so this process's
// CPU and memory are the controller's alone. Each replica changes 1% of its keys' figures per
// answer (SWITCHYARD_BENCH_CHURN, in percent): a steady fleet's drift.
//
//   - before: the replicas answer as main's proxies did: the full view, indented, no gzip, no
//     delta, no config endpoint;
//   - after: the proxy's handlers (adminapi.ChannelsHandler, ConfigHandler): compact, gzip,
//     deltas since the cursor, the config with its ETag.
//
// It reports wire bytes per poll (the first, full poll left out), CPU seconds of this process
// per poll and its peak RSS. "after" runs first, so its peak RSS is its own; "before"'s is the
// larger of both. Run it with -benchtime 3x.
func BenchmarkPollAtScale(b *testing.B) {
	replicas := envInt(b, "SWITCHYARD_BENCH_REPLICAS", 200)
	churn := envInt(b, "SWITCHYARD_BENCH_CHURN", 1)
	for _, mode := range []string{"after", "before"} {
		b.Run(mode, func(b *testing.B) {
			urls := startFakeReplicaSet(b, mode, replicas, churn)
			wire := &countingDialer{}
			hc := &http.Client{Transport: &http.Transport{DialContext: wire.dial, MaxIdleConnsPerHost: 2}}
			scheme := k8sruntime.NewScheme()
			_ = clientgoscheme.AddToScheme(scheme)
			_ = v1alpha1.AddToScheme(scheme)
			opts := Options{ProxyNamespace: "bench", AdminURLs: urls, HTTPClient: hc, PollTimeout: 30 * time.Second}
			if err := opts.complete(); err != nil {
				b.Fatal(err)
			}
			p := newPoller(fake.NewClientBuilder().WithScheme(scheme).Build(), opts, &Journal{}, newStatusQueues(), newCompileKick())
			ctx := context.Background()
			p.poll(ctx) // the first poll reads the full views
			checkPolled(b, p, replicas)
			runtime.GC()
			wire.n.Store(0)
			cpu0 := processCPU(b)
			polls := 0
			for b.Loop() {
				p.poll(ctx)
				polls++
			}
			checkPolled(b, p, replicas)
			b.ReportMetric(float64(wire.n.Load())/float64(polls)/1e6, "wire-MB/poll")
			b.ReportMetric((processCPU(b)-cpu0)/float64(polls), "cpu-s/poll")
			b.ReportMetric(peakRSS(b), "peak-rss-MB")
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapAlloc)/1e6, "retained-heap-MB")
			runtime.KeepAlive(p)
		})
	}
}

// checkPolled fails unless the last poll reached every replica and aggregated every key.
func checkPolled(b *testing.B, p *Poller, replicas int) {
	b.Helper()
	v := p.View()
	reachable := 0
	for _, r := range v.Replicas {
		if r.Reachable {
			reachable++
		}
	}
	if reachable != replicas || len(v.Models) != benchChannels*benchModels {
		b.Fatalf("polled %d of %d replicas, %d keys", reachable, replicas, len(v.Models))
	}
	for _, g := range v.Models {
		if n := g.Replicas["Healthy"]; int(n) != replicas {
			b.Fatalf("a key reported Healthy by %d of %d replicas", n, replicas)
		}
		break
	}
}

// startFakeReplicaSet runs TestHelperFakeReplicaSet in a child process and returns its
// replicas' admin URLs.
func startFakeReplicaSet(b *testing.B, mode string, replicas, churn int) []string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFakeReplicaSet$", "-test.v")
	cmd.Env = append(os.Environ(), "SWITCHYARD_FAKE_REPLICAS="+strconv.Itoa(replicas), "SWITCHYARD_FAKE_MODE="+mode,
		"SWITCHYARD_FAKE_CHURN="+strconv.Itoa(churn))
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if urls, ok := strings.CutPrefix(sc.Text(), "replicas: "); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			return strings.Fields(urls)
		}
	}
	b.Fatalf("the fake replica set did not start: %v", sc.Err())
	return nil
}

// TestHelperFakeReplicaSet is the child process of BenchmarkPollAtScale: it serves
// SWITCHYARD_FAKE_REPLICAS replicas' admin APIs on loopback until killed. Without the variable
// it returns at once.
func TestHelperFakeReplicaSet(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SWITCHYARD_FAKE_REPLICAS"))
	if n == 0 {
		t.Skip("the child process of BenchmarkPollAtScale")
	}
	mode := os.Getenv("SWITCHYARD_FAKE_MODE")
	churn, _ := strconv.Atoi(os.Getenv("SWITCHYARD_FAKE_CHURN"))
	gens := make(map[string]int64, benchObjects)
	for i := range benchObjects {
		gens[fmt.Sprintf("ProviderChannel/llm/object-%04d", i)] = 1
	}
	config := adminapi.ConfigState{Source: "configmap llm/switchyard-routing", Hash: "0123456789abcdef", LoadedAt: time.Now().UTC(), Generations: gens}
	var urls []string
	for r := range n {
		f := newFakeReplica(fmt.Sprintf("proxy-%03d", r), uint64(r), churn, config)
		mux := http.NewServeMux()
		if mode == "before" {
			mux.HandleFunc(adminapi.ChannelsPath, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				_ = enc.Encode(f.state())
			})
		} else {
			mux.Handle(adminapi.ChannelsPath, &adminapi.ChannelsHandler{State: f.state})
			mux.Handle(adminapi.ConfigPath, &adminapi.ConfigHandler{State: func() adminapi.ConfigState { return config }})
		}
		mux.HandleFunc(adminapi.EventsPath, func(w http.ResponseWriter, r *http.Request) {
			adminapi.WriteJSON(w, r, adminapi.EventsResponse{Replica: f.name, BootID: f.name, Events: []adminapi.Event{}})
		})
		srv := httptest.NewServer(mux)
		defer srv.Close()
		urls = append(urls, srv.URL)
	}
	fmt.Println("replicas: " + strings.Join(urls, " "))
	select {}
}

// fakeReplica is one replica's channel×models, every one Healthy; each answer moves churn% of
// them by a little, as traffic does.
type fakeReplica struct {
	name   string
	mu     sync.Mutex
	rng    *rand.Rand
	churn  int
	states []adminapi.ChannelState
	config adminapi.ConfigState
}

func newFakeReplica(name string, seed uint64, churn int, config adminapi.ConfigState) *fakeReplica {
	f := &fakeReplica{name: name, rng: rand.New(rand.NewPCG(seed, 1)), churn: churn, config: config}
	for c := range benchChannels {
		for m := range benchModels {
			f.states = append(f.states, adminapi.ChannelState{Channel: fmt.Sprintf("llm/team-%03d-channel-%d", c/5, c%5),
				Model: fmt.Sprintf("model-%d", m), Provider: "openai", Phase: "Healthy", HealthScore: 98, TrafficPercent: 100,
				WindowRequests: 40, WindowFailures: 0, ErrorRatePercent: 0, P95LatencyMillis: 800})
		}
	}
	return f
}

func (f *fakeReplica) state() adminapi.ChannelsResponse {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range len(f.states) * f.churn / 100 {
		s := &f.states[f.rng.IntN(len(f.states))]
		s.WindowRequests = 30 + f.rng.IntN(20)
		s.HealthScore = 96 + f.rng.IntN(4)
		s.P95LatencyMillis = int64(700 + f.rng.IntN(200))
	}
	return adminapi.ChannelsResponse{Replica: f.name, BootID: "boot-" + f.name, Now: time.Now().UTC(), Config: f.config,
		Channels: slices.Clone(f.states)}
}

// countingDialer counts the bytes read from its connections: the wire size of the answers,
// compressed or not.
type countingDialer struct{ n atomic.Int64 }

func (d *countingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: &d.n}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func processCPU(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// peakRSS is this process's peak resident set (VmHWM), in MB.
func peakRSS(b *testing.B) float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
