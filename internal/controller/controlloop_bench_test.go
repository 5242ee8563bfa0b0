package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/proxy"
	"github.com/switchyard-io/switchyard/internal/proxy/source"
	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/routing/routingtest"
)

// BenchmarkControlLoopAtScale runs the whole controller (manager, reconcilers, poller) against a
// real API server at the scale the proxy is benchmarked for: 1,000 channels × 5 models and 200
// policies (one per team, routing the team's 5 models over its 5 channels), with two proxy
// replicas whose admin API reports all 5,000 channel×model keys and whose figures drift on every
// poll by less than the step that is written to status (as live traffic does). It measures, with
// the default poll interval (5 s):
//
//   - start-to-cm-s, start-to-ready-s and compile-passes/startup: from the manager's start, with
//     every object already created (a restart, a new leader), to the full table in the ConfigMap,
//     to every object Ready, and the compile passes until then;
//   - compile-passes/poll: passes of the compile step (gather, fingerprint, compile when the
//     fingerprint changed, render, compare, apply) per poll interval with nothing edited;
//     reconciles/poll: reconciles of every controller, same window;
//   - cpu-s/min: CPU of this process (controller, the two stand-in replicas and the proxy that
//     loads the ConfigMap for them) per minute in that window, and apiserver-cpu-s/min: the
//     API server's and etcd's;
//   - edit-to-cm-ms (median) and edit-to-cm-max-ms: from a patch of one channel's weight to the
//     ConfigMap holding it, seen through a watch, over SWITCHYARD_BENCH_EDITS edits (default 10);
//     compile-passes/edit over those edits.
//
// It runs the scenario once (-benchtime=1x): a few minutes, more for main's code, which took 6
// minutes to more than 15 to settle on a loaded 2-core machine. SWITCHYARD_BENCH_IDLE sets the
// idle window (default 1m), SWITCHYARD_BENCH_SETTLE how long every object may take to be Ready
// (default 30m). The scenario reads only what every version of the controller has (the manager's
// metrics, the API server), so the same file measures main's code for a before/after
// (docs/benchmarks.md, "The control loop at scale").
func BenchmarkControlLoopAtScale(b *testing.B) {
	idle := envDuration(b, "SWITCHYARD_BENCH_IDLE", time.Minute)
	edits := envInt(b, "SWITCHYARD_BENCH_EDITS", 10)
	e := requireEnv(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := fmt.Sprintf("loop-%d", namespaces.Add(1))
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	in := benchInputs(ns)
	b.Logf("%d channels, %d policies, %d Secrets", len(in.Channels), len(in.Policies), len(in.Secrets))
	createInputs(b, e.Client, in)

	// Two replicas; the config they report is what a real proxy loaded from the ConfigMap.
	loaded := &atomic.Pointer[proxy.Server]{}
	replicas := []*driftingReplica{newDriftingReplica("proxy-0", in, loaded), newDriftingReplica("proxy-1", in, loaded)}
	var urls []string
	for _, r := range replicas {
		defer r.srv.Close()
		urls = append(urls, r.srv.URL)
	}

	opts := Options{ProxyNamespace: ns, WatchNamespaces: []string{ns}, AdminURLs: urls, ProxyService: ""}
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:                 e.Scheme,
		Cache:                  CacheOptions(opts),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := Setup(ctx, mgr, opts); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	atStart := sample(b)
	start := time.Now()
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("manager: %v", err)
		}
	}()

	wc, err := client.NewWithWatch(e.Config, client.Options{Scheme: e.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	cms := watchConfigMap(ctx, b, wc, ns)
	published := waitTable(b, cms, 10*time.Minute, func(t *routing.Table) bool {
		return len(t.Channels) == len(in.Channels) && len(t.Policies) == len(in.Policies)
	})
	b.ReportMetric(time.Since(start).Seconds(), "start-to-cm-s")

	src := &source.ConfigMapSource{Config: e.Config, Namespace: ns, Name: DefaultConfigMapName}
	srv := proxy.New(proxy.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err := src.Run(ctx, srv); err != nil {
		b.Fatal(err)
	}
	loaded.Store(srv)

	// Settled: every object Ready (compiled, published and served by both replicas).
	settle := time.Now()
	waitReady(ctx, b, e.Client, ns, len(in.Channels), len(in.Policies), envDuration(b, "SWITCHYARD_BENCH_SETTLE", 30*time.Minute))
	b.ReportMetric(time.Since(start).Seconds(), "start-to-ready-s")
	b.ReportMetric(sample(b).minus(atStart).compilePasses(), "compile-passes/startup")
	b.Logf("published in %s, all Ready %s later", published.Sub(start).Round(time.Millisecond), time.Since(settle).Round(time.Millisecond))

	// Idle: nothing edited, the replicas' figures drift on every poll.
	polls0 := replicas[0].polls.Load()
	before := sample(b)
	time.Sleep(idle)
	after := sample(b)
	polls := float64(replicas[0].polls.Load() - polls0)
	d := after.minus(before)
	b.Logf("idle %s: %d polls, reconciles %v, API requests %v, CPU %.1fs (API server and etcd %.1fs)", idle, int(polls), d.reconciles, d.requests, d.cpu, d.apiCPU)
	b.ReportMetric(float64(d.compilePasses())/polls, "compile-passes/poll")
	b.ReportMetric(float64(d.reconcileTotal())/polls, "reconciles/poll")
	b.ReportMetric(float64(d.requests["PATCH"])/polls, "patches/poll")
	b.ReportMetric(d.cpu/idle.Minutes(), "cpu-s/min")
	b.ReportMetric(d.apiCPU/idle.Minutes(), "apiserver-cpu-s/min")

	// Edits: one channel's weight at a time, while the poller runs.
	var latencies []time.Duration
	before = sample(b)
	for i := range edits {
		pc := in.Channels[(i*97)%len(in.Channels)]
		weight := int32(200 + i)
		patch := fmt.Appendf(nil, `{"spec":{"weight":%d}}`, weight)
		t0 := time.Now()
		if err := e.Client.Patch(ctx, &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pc.Name}},
			client.RawPatch(types.MergePatchType, patch)); err != nil {
			b.Fatal(err)
		}
		id := routing.ChannelID(ns, pc.Name)
		at := waitTable(b, cms, 5*time.Minute, func(t *routing.Table) bool {
			ch, ok := t.Channel(id)
			return ok && ch.Weight == int(weight)
		})
		latencies = append(latencies, at.Sub(t0))
		time.Sleep(2 * time.Second)
	}
	d = sample(b).minus(before)
	slices.Sort(latencies)
	b.Logf("edit to ConfigMap: %v", latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Milliseconds()), "edit-to-cm-ms")
	b.ReportMetric(float64(latencies[len(latencies)-1].Milliseconds()), "edit-to-cm-max-ms")
	b.ReportMetric(float64(d.compilePasses())/float64(edits), "compile-passes/edit")
}

// benchInputs are 200 teams' channels (5 each, 5 models) and Secrets, and one policy per team
// routing its 5 models over its 5 channels: 1,000 channels, 200 policies.
func benchInputs(ns string) routing.Inputs {
	in := routingtest.ScaleInputs(ns)
	var policies []v1alpha1.RoutingPolicy
	for g := range routingtest.ScaleTeams {
		team := in.Policies[g*routingtest.ScaleModels : (g+1)*routingtest.ScaleModels]
		rp := team[0].DeepCopy()
		rp.Name = fmt.Sprintf("team-%03d-chat", g)
		rp.Spec.FallbackModels = nil
		rp.Spec.Models = nil
		for _, p := range team {
			rp.Spec.Models = append(rp.Spec.Models, p.Spec.Models...)
		}
		policies = append(policies, *rp)
	}
	in.Policies = policies
	return in
}

// createInputs creates in's objects (Secrets first), eight at a time.
func createInputs(b *testing.B, c client.Client, in routing.Inputs) {
	var objs []client.Object
	for i := range in.Secrets {
		objs = append(objs, in.Secrets[i].DeepCopy())
	}
	for i := range in.Channels {
		objs = append(objs, in.Channels[i].DeepCopy())
	}
	for i := range in.Policies {
		objs = append(objs, in.Policies[i].DeepCopy())
	}
	work := make(chan client.Object)
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for o := range work {
				if err := c.Create(context.Background(), o); err != nil {
					failed.Store(&err)
				}
			}
		})
	}
	for _, o := range objs {
		work <- o
	}
	close(work)
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatalf("create: %v", *err)
	}
}

// driftingReplica is a proxy replica's admin API: the config a real proxy loaded, and every
// channel×model Healthy with figures that move on every poll by less than a status step.
type driftingReplica struct {
	srv    *httptest.Server
	polls  atomic.Int64
	loaded *atomic.Pointer[proxy.Server]
}

func newDriftingReplica(name string, in routing.Inputs, loaded *atomic.Pointer[proxy.Server]) *driftingReplica {
	r := &driftingReplica{loaded: loaded}
	var keys []adminapi.ChannelState
	for _, pc := range in.Channels {
		for _, m := range pc.Spec.Models {
			keys = append(keys, adminapi.ChannelState{Channel: routing.ChannelID(pc.Namespace, pc.Name), Model: m.Name, Provider: string(pc.Spec.Provider),
				Phase: "Healthy", TrafficPercent: 20, WindowFailures: 1})
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc(adminapi.ChannelsPath, func(w http.ResponseWriter, _ *http.Request) {
		k := int(r.polls.Add(1))
		resp := adminapi.ChannelsResponse{Replica: name, BootID: "boot-" + name, Now: time.Now(), Channels: make([]adminapi.ChannelState, len(keys))}
		if s := r.loaded.Load(); s != nil {
			resp.Config = s.ChannelsState().Config
		}
		for i, st := range keys {
			st.HealthScore = 97 + (i+k)%3
			st.WindowRequests = 200 + (i+k)%7
			st.ErrorRatePercent = 100 / float64(st.WindowRequests)
			st.P95LatencyMillis = int64(400 + 10*((i+k)%5))
			resp.Channels[i] = st
		}
		_ = json.NewEncoder(w).Encode(resp)
	})
	mux.HandleFunc(adminapi.EventsPath, func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(adminapi.EventsResponse{Replica: name, BootID: "boot-" + name, Events: []adminapi.Event{}})
	})
	r.srv = httptest.NewServer(mux)
	return r
}

// tableAt is a table seen on the ConfigMap watch and when.
type tableAt struct {
	table *routing.Table
	at    time.Time
}

// watchConfigMap sends every table the routing ConfigMap holds, as it is written.
func watchConfigMap(ctx context.Context, b *testing.B, c client.WithWatch, ns string) <-chan tableAt {
	out := make(chan tableAt, 64)
	go func() {
		for ctx.Err() == nil {
			w, err := c.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": DefaultConfigMapName})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				cm, ok := ev.Object.(*corev1.ConfigMap)
				if !ok || ev.Type == watch.Deleted {
					continue
				}
				at := time.Now()
				if t, err := routing.DecodeTable(cm.Data, cm.BinaryData); err == nil {
					select {
					case out <- tableAt{t, at}:
					case <-ctx.Done():
						w.Stop()
						return
					}
				}
			}
		}
	}()
	return out
}

// waitTable returns when the watch shows a table for which ok holds.
func waitTable(b *testing.B, tables <-chan tableAt, limit time.Duration, ok func(*routing.Table) bool) time.Time {
	b.Helper()
	deadline := time.After(limit)
	for {
		select {
		case t := <-tables:
			if ok(t.table) {
				return t.at
			}
		case <-deadline:
			b.Fatalf("the ConfigMap did not show the expected table within %s", limit)
		}
	}
}

// waitReady waits for every channel and policy to be Ready for its generation.
func waitReady(ctx context.Context, b *testing.B, c client.Client, ns string, channels, policies int, limit time.Duration) {
	b.Helper()
	ready := func(conds []metav1.Condition, gen int64) bool {
		r := meta.FindStatusCondition(conds, v1alpha1.ConditionReady)
		return r != nil && r.Status == metav1.ConditionTrue && r.ObservedGeneration == gen
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		n := 0
		var pcs v1alpha1.ProviderChannelList
		var rps v1alpha1.RoutingPolicyList
		if c.List(ctx, &pcs, client.InNamespace(ns)) == nil && c.List(ctx, &rps, client.InNamespace(ns)) == nil {
			for _, pc := range pcs.Items {
				if ready(pc.Status.Conditions, pc.Generation) {
					n++
				}
			}
			for _, rp := range rps.Items {
				if ready(rp.Status.Conditions, rp.Generation) {
					n++
				}
			}
		}
		if n == channels+policies {
			return
		}
		time.Sleep(time.Second)
	}
	b.Fatalf("not every object Ready within %s", limit)
}

// loopSample is a reading of the counters the benchmark compares.
type loopSample struct {
	reconciles map[string]float64 // by controller
	requests   map[string]float64 // API requests by method
	cpu        float64            // seconds, this process
	apiCPU     float64            // seconds, the API server and etcd
}

func sample(b *testing.B) loopSample {
	b.Helper()
	s := loopSample{reconciles: map[string]float64{}, requests: map[string]float64{}}
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		switch f.GetName() {
		case "controller_runtime_reconcile_total":
			for _, m := range f.GetMetric() {
				s.reconciles[label(m, "controller")] += m.GetCounter().GetValue()
			}
		case "rest_client_requests_total":
			for _, m := range f.GetMetric() {
				s.requests[label(m, "method")] += m.GetCounter().GetValue()
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	s.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	s.apiCPU = childrenCPU(os.Getpid())
	return s
}

func (s loopSample) minus(o loopSample) loopSample {
	d := loopSample{reconciles: map[string]float64{}, requests: map[string]float64{}, cpu: s.cpu - o.cpu, apiCPU: s.apiCPU - o.apiCPU}
	for k, v := range s.reconciles {
		d.reconciles[k] = v - o.reconciles[k]
	}
	for k, v := range s.requests {
		d.requests[k] = v - o.requests[k]
	}
	return d
}

func (s loopSample) reconcileTotal() float64 {
	var n float64
	for _, v := range s.reconciles {
		n += v
	}
	return n
}

// compilePasses counts the passes of the compile step. Where a controller of its own compiles
// (routingtable), that is its reconciles; before it, every ProviderChannel and RoutingPolicy
// reconcile ran the compile step (Publisher.Sync) first.
func (s loopSample) compilePasses() float64 {
	if n, ok := s.reconciles["routingtable"]; ok {
		return n
	}
	return s.reconciles["providerchannel"] + s.reconciles["routingpolicy"]
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// childrenCPU is the user+system CPU, in seconds, of the processes whose parent is pid (envtest's
// etcd and kube-apiserver), from /proc.
func childrenCPU(pid int) float64 {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks float64
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// The fields after the command, which is in parentheses and may hold spaces.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 || f[1] != strconv.Itoa(pid) {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		s, _ := strconv.ParseFloat(f[12], 64)
		ticks += u + s
	}
	return ticks / 100 // USER_HZ
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		return d
	}
	return def
}

func envInt(b *testing.B, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		return n
	}
	return def
}
