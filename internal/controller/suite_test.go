package controller

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite golden files")

// One control plane for the package, started by the first test that needs it, so the pure tests
// run without one.
var (
	envOnce sync.Once
	env     *testenv.Env
	envErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	ctrl.SetLogger(logr.Discard())
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "controller: stopping the control plane:", err)
		}
	}
	os.Exit(code)
}

func requireEnv(t testing.TB) *testenv.Env {
	t.Helper()
	envOnce.Do(func() { env, envErr = testenv.Start() })
	if envErr != nil {
		t.Fatalf("envtest: %v", envErr)
	}
	return env
}

// testStart is the fake clock's start: the tests set time, they never wait for it.
var testStart = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// harness is one controller manager scoped to one namespace, which holds the test's channels,
// policies and the proxy config alike.
type harness struct {
	t     *testing.T
	c     client.Client
	env   *testenv.Env
	ns    string
	clock *clocktesting.FakeClock
	opts  Options
}

// namespaces counts the harnesses, so each gets a fresh namespace (-count=N reruns included).
var namespaces atomic.Int32

// startController starts a manager for a new namespace named after base.
func startController(t *testing.T, base string, configure func(*Options)) *harness {
	t.Helper()
	return startControllerWith(t, base, configure, nil)
}

// startControllerWith is startController with the manager's REST config adjusted by wrap.
func startControllerWith(t *testing.T, base string, configure func(*Options), wrap func(*rest.Config)) *harness {
	t.Helper()
	e := requireEnv(t)
	ctx := context.Background()
	ns := fmt.Sprintf("%s-%d", base, namespaces.Add(1))
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace: %v", err)
	}
	clk := clocktesting.NewFakeClock(testStart)
	opts := Options{
		ProxyNamespace:  ns,
		WatchNamespaces: []string{ns},
		PollInterval:    200 * time.Millisecond,
		Clock:           clk,
	}
	if configure != nil {
		configure(&opts)
	}
	cfg := rest.CopyConfig(e.Config)
	if wrap != nil {
		wrap(cfg)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 e.Scheme,
		Cache:                  CacheOptions(opts),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	if err := Setup(mctx, mgr, opts); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return &harness{t: t, c: e.Client, env: e, ns: ns, clock: clk, opts: opts}
}

// publishedTable reads the table the proxies are served back from the ConfigMap and its Secret.
func (h *harness) publishedTable(g Gomega) *routing.Table {
	s := &corev1.Secret{}
	g.Expect(h.c.Get(context.Background(), h.key(DefaultConfigMapName+"-credentials"), s)).To(Succeed())
	t := parsePublished(h.configMap(g), s)
	g.Expect(t).NotTo(BeNil())
	return t
}

// sameButGenerations is a table's JSON with every generation zeroed, to compare two tables whose
// objects were edited and edited back.
func sameButGenerations(t *routing.Table) string {
	c := *t
	c.Channels = slices.Clone(t.Channels)
	c.Policies = slices.Clone(t.Policies)
	for i := range c.Channels {
		c.Channels[i].Generation = 0
	}
	for i := range c.Policies {
		c.Policies[i].Generation = 0
	}
	b, _ := json.Marshal(&c)
	return string(b)
}

// id is the routing ID (namespace/name) of a channel in the harness namespace.
func (h *harness) id(name string) string { return h.ns + "/" + name }

func (h *harness) key(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: h.ns, Name: name}
}

// apply runs kubectl apply with a manifest in the harness namespace.
func (h *harness) apply(manifest string) {
	h.t.Helper()
	out, errOut, err := h.env.Kubectl(stringsReader(manifest), "apply", "-n", h.ns, "--server-side", "--field-manager=test", "--force-conflicts", "-f", "-")
	if err != nil {
		h.t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
	}
}

func (h *harness) configMap(g Gomega) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	g.Expect(h.c.Get(context.Background(), h.key(DefaultConfigMapName), cm)).To(Succeed())
	return cm
}

func (h *harness) credentials(g Gomega) map[string]string {
	s := &corev1.Secret{}
	g.Expect(h.c.Get(context.Background(), h.key(DefaultConfigMapName+"-credentials"), s)).To(Succeed())
	var keys map[string]string
	g.Expect(json.Unmarshal(s.Data[CredentialsKey], &keys)).To(Succeed())
	return keys
}

// condition returns a condition of an object's status (nil when missing).
func condition(conds []metav1.Condition, typ string) *metav1.Condition {
	return meta.FindStatusCondition(conds, typ)
}

// events lists the Events about one object.
func (h *harness) events(g Gomega, name string) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(h.c.List(context.Background(), &list, client.InNamespace(h.ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// eventsWithReason counts the Events about name with a reason.
func (h *harness) eventsWithReason(g Gomega, name, reason string) []eventsv1.Event {
	var out []eventsv1.Event
	for _, e := range h.events(g, name) {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// standIn is a proxy replica's admin API serving documents the test sets.
type standIn struct {
	srv     *httptest.Server
	mu      sync.Mutex
	replica string
	bootID  string
	states  []adminapi.ChannelState
	journal []adminapi.Event
	down    bool
	// polls counts the answers of ChannelsPath.
	polls atomic.Int64
}

func newStandIn(t *testing.T, replica string) *standIn {
	s := &standIn{replica: replica, bootID: "boot-" + replica}
	mux := http.NewServeMux()
	// The proxy's own handlers: the poller reads the encoding proxies write (deltas included).
	channels := &adminapi.ChannelsHandler{State: func() adminapi.ChannelsResponse {
		s.polls.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		return adminapi.ChannelsResponse{Replica: s.replica, BootID: s.bootID, Now: time.Now(),
			Config: adminapi.ConfigState{Source: "test"}, Channels: slices.Clone(s.states)}
	}}
	config := &adminapi.ConfigHandler{State: func() adminapi.ConfigState { return adminapi.ConfigState{Source: "test"} }}
	for path, h := range map[string]http.Handler{adminapi.ChannelsPath: channels, adminapi.ConfigPath: config} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			down := s.down
			s.mu.Unlock()
			if down {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	mux.HandleFunc(adminapi.EventsPath, func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		since, _ := strconv.ParseUint(r.URL.Query().Get("since"), 10, 64)
		resp := adminapi.EventsResponse{Replica: s.replica, BootID: s.bootID, Events: []adminapi.Event{}}
		for _, e := range s.journal {
			if e.Seq > since {
				resp.Events = append(resp.Events, e)
			}
		}
		_ = json.NewEncoder(w).Encode(resp)
	})
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *standIn) set(states ...adminapi.ChannelState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states = states
}

func (s *standIn) record(e adminapi.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.Seq = uint64(len(s.journal) + 1)
	s.journal = append(s.journal, e)
}

func (s *standIn) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}
