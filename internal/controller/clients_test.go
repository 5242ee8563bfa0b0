package controller

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/routing"
)

const clientManifest = `
apiVersion: v1
kind: Secret
metadata: {name: search-keys}
stringData:
  first: sk-team-search-first-6c1e9a4f2b8d7e3a05
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: search}
spec:
  keysSecretRef: {name: search-keys}
  models: ["gpt-4o*"]
  limits: {requestsPerMinute: 600, tokensPerMinute: 200000, tokensPerDay: 20000000}
`

func (h *harness) gatewayClient(g Gomega, name string) *v1alpha1.GatewayClient {
	gc := &v1alpha1.GatewayClient{}
	g.Expect(h.c.Get(context.Background(), h.key(name), gc)).To(Succeed())
	return gc
}

func clientHashes(t *routing.Table, ns, name string) []string {
	if c := findClient(t, ns, name); c != nil {
		return c.KeyHashes
	}
	return nil
}

// The proxies get the SHA-256 of each key, never a key; a key added to the Secret and the old one
// removed afterwards are published as they happen (rotation), with no restart of anything.
func TestGatewayClientPublishesKeyHashesAndRotates(t *testing.T) {
	gm := NewWithT(t)
	h := startController(t, "gwc-rotate", nil)
	h.apply(clientManifest)
	first, second := routing.KeyHash("sk-team-search-first-6c1e9a4f2b8d7e3a05"), routing.KeyHash("sk-team-search-second-d2a7f0c5e9b1483c6")
	gm.Eventually(func(g Gomega) {
		g.Expect(clientHashes(h.publishedTable(g), h.ns, "search")).To(Equal([]string{first}))
		gc := h.gatewayClient(g, "search")
		g.Expect(condition(gc.Status.Conditions, v1alpha1.ConditionAccepted)).NotTo(BeNil())
		g.Expect(condition(gc.Status.Conditions, v1alpha1.ConditionAccepted).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(condition(gc.Status.Conditions, v1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(gc.Status.Keys).To(Equal(int32(1)))
		g.Expect(gc.Status.ObservedGeneration).To(Equal(gc.Generation))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	gm.Eventually(func(g Gomega) {
		cm := h.configMap(g)
		g.Expect(cm.Data[TableKey]).NotTo(ContainSubstring("sk-team-search"))
		for _, v := range h.credentials(g) {
			g.Expect(v).NotTo(ContainSubstring("sk-team-search"))
		}
	}).Should(Succeed())

	// Rotation: add the new key, then remove the old one.
	h.apply(`
apiVersion: v1
kind: Secret
metadata: {name: search-keys}
stringData:
  first: sk-team-search-first-6c1e9a4f2b8d7e3a05
  second: sk-team-search-second-d2a7f0c5e9b1483c6
`)
	want := []string{first, second}
	if second < first {
		want = []string{second, first}
	}
	gm.Eventually(func(g Gomega) {
		g.Expect(clientHashes(h.publishedTable(g), h.ns, "search")).To(Equal(want))
		g.Expect(h.gatewayClient(g, "search").Status.Keys).To(Equal(int32(2)))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	s := &corev1.Secret{}
	gm.Expect(h.c.Get(context.Background(), h.key("search-keys"), s)).To(Succeed())
	s.Data = map[string][]byte{"second": []byte("sk-team-search-second-d2a7f0c5e9b1483c6")}
	gm.Expect(h.c.Update(context.Background(), s)).To(Succeed())
	gm.Eventually(func(g Gomega) {
		g.Expect(clientHashes(h.publishedTable(g), h.ns, "search")).To(Equal([]string{second}))
	}).WithTimeout(20 * time.Second).Should(Succeed())

	// Deleted: its keys leave the table.
	gm.Expect(h.c.Delete(context.Background(), &v1alpha1.GatewayClient{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "search"}})).To(Succeed())
	gm.Eventually(func(g Gomega) {
		g.Expect(h.publishedTable(g).Clients).To(BeEmpty())
	}).WithTimeout(20 * time.Second).Should(Succeed())
}

// A client whose Secret is missing is not accepted (the message names the field) and is left out
// of the table; it comes in when the Secret appears. Channels and policies publish meanwhile.
func TestGatewayClientProblemIsStatus(t *testing.T) {
	gm := NewWithT(t)
	h := startController(t, "gwc-problem", nil)
	h.apply(`
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: orphan}
spec:
  keysSecretRef: {name: not-there}
  models: ["*"]
`)
	gm.Eventually(func(g Gomega) {
		gc := h.gatewayClient(g, "orphan")
		acc := condition(gc.Status.Conditions, v1alpha1.ConditionAccepted)
		g.Expect(acc).NotTo(BeNil())
		g.Expect(acc.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(acc.Reason).To(Equal(routing.ReasonSecretNotFound))
		g.Expect(acc.Message).To(ContainSubstring("spec.keysSecretRef"))
		g.Expect(condition(gc.Status.Conditions, v1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(h.publishedTable(g).Clients).To(BeEmpty())
	}).WithTimeout(20 * time.Second).Should(Succeed())
	h.apply(`
apiVersion: v1
kind: Secret
metadata: {name: not-there}
stringData: {k: sk-orphan-3e8b1f6a9c2d7e40b5a1f8c3}
`)
	gm.Eventually(func(g Gomega) {
		g.Expect(clientHashes(h.publishedTable(g), h.ns, "orphan")).To(Equal([]string{routing.KeyHash("sk-orphan-3e8b1f6a9c2d7e40b5a1f8c3")}))
		g.Expect(condition(h.gatewayClient(g, "orphan").Status.Conditions, v1alpha1.ConditionAccepted).Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(20 * time.Second).Should(Succeed())
}

// A key under 32 characters is refused at compile: Accepted=False, reason WeakKey, naming the
// Secret entry and keyId but never the key, and the client is left out of the table; a long key
// in its place brings it in.
func TestGatewayClientWeakKeyIsStatus(t *testing.T) {
	gm := NewWithT(t)
	h := startController(t, "gwc-weak", nil)
	const weak = "sk-short-1"
	h.apply(`
apiVersion: v1
kind: Secret
metadata: {name: weak-keys}
stringData: {current: ` + weak + `}
---
apiVersion: switchyard.io/v1alpha1
kind: GatewayClient
metadata: {name: weak}
spec:
  keysSecretRef: {name: weak-keys}
  models: ["*"]
`)
	gm.Eventually(func(g Gomega) {
		gc := h.gatewayClient(g, "weak")
		acc := condition(gc.Status.Conditions, v1alpha1.ConditionAccepted)
		g.Expect(acc).NotTo(BeNil())
		g.Expect(acc.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(acc.Reason).To(Equal(routing.ReasonWeakKey))
		g.Expect(acc.Message).To(ContainSubstring(`key "current" (keyId ` + routing.KeyID(weak) + ")"))
		g.Expect(acc.Message).NotTo(ContainSubstring(weak))
		g.Expect(h.publishedTable(g).Clients).To(BeEmpty())
	}).WithTimeout(20 * time.Second).Should(Succeed())
	const strong = "sk-strong-7c3e9a1f5b8d2e4c6a0f9b1d"
	h.apply(`
apiVersion: v1
kind: Secret
metadata: {name: weak-keys}
stringData: {current: ` + strong + `}
`)
	gm.Eventually(func(g Gomega) {
		g.Expect(clientHashes(h.publishedTable(g), h.ns, "weak")).To(Equal([]string{routing.KeyHash(strong)}))
		g.Expect(condition(h.gatewayClient(g, "weak").Status.Conditions, v1alpha1.ConditionAccepted).Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(20 * time.Second).Should(Succeed())
}

// clientReplica is a proxy replica's admin API reporting a served config and clients' use.
type clientReplica struct {
	srv   *httptest.Server
	mu    sync.Mutex
	gen   map[string]int64
	usage []adminapi.ClientUsage
}

func newClientReplica(t *testing.T, name string) *clientReplica {
	r := &clientReplica{}
	mux := http.NewServeMux()
	mux.HandleFunc(adminapi.ChannelsPath, func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		_ = json.NewEncoder(w).Encode(adminapi.ChannelsResponse{Replica: name, BootID: "boot-" + name, Now: time.Now(),
			Config: adminapi.ConfigState{Source: "test", Hash: "h", Generations: r.gen}, Channels: []adminapi.ChannelState{}, Clients: r.usage})
	})
	mux.HandleFunc(adminapi.EventsPath, func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(adminapi.EventsResponse{Replica: name, BootID: "boot-" + name, Events: []adminapi.Event{}})
	})
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *clientReplica) set(gen map[string]int64, usage ...adminapi.ClientUsage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen, r.usage = gen, usage
}

// With two replicas serving, the table says so (each enforces half of every limit), the client is
// Programmed once both serve its generation, and its status sums the two replicas' use today.
func TestGatewayClientReplicasAndUsage(t *testing.T) {
	gm := NewWithT(t)
	a, b := newClientReplica(t, "proxy-a"), newClientReplica(t, "proxy-b")
	h := startController(t, "gwc-usage", func(o *Options) { o.AdminURLs = []string{a.srv.URL, b.srv.URL} })
	h.apply(clientManifest)
	var gen int64
	gm.Eventually(func(g Gomega) {
		tbl := h.publishedTable(g)
		g.Expect(tbl.ProxyReplicas).To(Equal(2))
		gen = h.gatewayClient(g, "search").Generation
		g.Expect(findClient(tbl, h.ns, "search")).NotTo(BeNil())
	}).WithTimeout(20 * time.Second).Should(Succeed())
	key := routing.ObjectKey("GatewayClient", h.ns, "search")
	day := testStart.UTC().Format(time.DateOnly)
	last := testStart.Add(-time.Minute)
	a.set(map[string]int64{key: gen}, adminapi.ClientUsage{Client: h.ns + "/search", Day: day, Requests: 3, Tokens: 300, LastUsed: &last})
	b.set(map[string]int64{key: gen},
		adminapi.ClientUsage{Client: h.ns + "/search", Day: day, Requests: 2, Tokens: 200},
		adminapi.ClientUsage{Client: h.ns + "/other", Day: day, Requests: 9, Tokens: 900})
	gm.Eventually(func(g Gomega) {
		gc := h.gatewayClient(g, "search")
		g.Expect(condition(gc.Status.Conditions, v1alpha1.ConditionProgrammed)).NotTo(BeNil())
		g.Expect(condition(gc.Status.Conditions, v1alpha1.ConditionProgrammed).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(condition(gc.Status.Conditions, v1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(gc.Status.RequestsToday).To(Equal(int64(5)))
		g.Expect(gc.Status.TokensToday).To(Equal(int64(500)))
		g.Expect(gc.Status.LastUsed).NotTo(BeNil())
		g.Expect(gc.Status.LastUsed.Time.Equal(last)).To(BeTrue())
	}).WithTimeout(60 * time.Second).Should(Succeed())

	// Nothing requeues the client on a timer any more: a small change of use reaches status at the
	// first poll after clientStatusRefresh, a big one at the poll that sees it.
	a.set(map[string]int64{key: gen}, adminapi.ClientUsage{Client: h.ns + "/search", Day: day, Requests: 4, Tokens: 400, LastUsed: &last})
	h.clock.Step(clientStatusRefresh)
	gm.Eventually(func(g Gomega) {
		g.Expect(h.gatewayClient(g, "search").Status.RequestsToday).To(Equal(int64(6)))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	a.set(map[string]int64{key: gen}, adminapi.ClientUsage{Client: h.ns + "/search", Day: day, Requests: 40, Tokens: 4000, LastUsed: &last})
	gm.Eventually(func(g Gomega) {
		g.Expect(h.gatewayClient(g, "search").Status.TokensToday).To(Equal(int64(4200)))
	}).WithTimeout(20 * time.Second).Should(Succeed())
}

// The poller's rule for GatewayClients: the replicas or the served generation, the first use, a
// drop, a big move at once; a small move once clientStatusRefresh has passed; nothing else.
func TestGatewayClientFollowsThePoller(t *testing.T) {
	now := testStart
	key := routing.ObjectKey("GatewayClient", "ns", "a")
	one := []replicaInfo{{Name: "r1", Reachable: true, Hash: "h1", Generations: map[string]int64{key: 1}}}
	served2 := []replicaInfo{{Name: "r1", Reachable: true, Hash: "h2", Generations: map[string]int64{key: 2}}}
	other := []replicaInfo{{Name: "r1", Reachable: true, Hash: "h3", Generations: map[string]int64{key: 1, "RoutingPolicy/ns/p": 4}}}
	two := append(slices.Clone(one), replicaInfo{Name: "r2", Reachable: true, Hash: "h1"})
	view := func(r []replicaInfo) liveView { return liveView{Polled: true, Replicas: r} }
	u := func(req, tok int64) clientUsage { return clientUsage{Requests: req, Tokens: tok} }
	recent := clientSent{usage: u(100, 10000), at: now.Add(-time.Second)}
	for _, tc := range []struct {
		name       string
		prev, next liveView
		sent       clientSent
		usage      clientUsage
		want       bool
	}{
		{"nothing changed", view(one), view(one), recent, u(100, 10000), false},
		{"another object's generation", view(one), view(other), recent, u(100, 10000), false},
		{"its served generation", view(one), view(served2), recent, u(100, 10000), true},
		{"a replica came", view(one), view(two), recent, u(100, 10000), true},
		{"the first poll", liveView{}, view(one), clientSent{}, clientUsage{}, true},
		{"first use", view(one), view(one), clientSent{at: now}, u(1, 0), true},
		{"a small move, just written", view(one), view(one), recent, u(101, 10050), false},
		{"a small move, written long ago", view(one), view(one), clientSent{usage: recent.usage, at: now.Add(-clientStatusRefresh)}, u(101, 10050), true},
		{"a big move of requests", view(one), view(one), recent, u(250, 10000), true},
		{"a big move of tokens", view(one), view(one), recent, u(100, 30000), true},
		{"a drop (new day, a replica gone)", view(one), view(one), recent, u(0, 0), true},
	} {
		if got := clientNeedsReconcile(tc.prev, tc.next, key, tc.sent, tc.usage, now); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestUntilClientChange(t *testing.T) {
	now := testStart // 10:00 UTC
	gc := &v1alpha1.GatewayClient{}
	if d := untilClientChange(gc, now); d != 0 {
		t.Errorf("idle client without expiry: requeue after %s, want none", d)
	}
	gc.Status.RequestsToday = 3
	if d := untilClientChange(gc, now); d.Round(time.Second) != 14*time.Hour {
		t.Errorf("a day's use in status: requeue after %s, want at midnight (14h)", d)
	}
	gc.Spec.ExpiresAt = &metav1.Time{Time: now.Add(time.Hour)}
	if d := untilClientChange(gc, now); d.Round(time.Second) != time.Hour {
		t.Errorf("expiring in an hour: requeue after %s, want 1h", d)
	}
}

func TestAggregateClientsCountsToday(t *testing.T) {
	now := testStart
	yesterday := now.Add(-24 * time.Hour).Format(time.DateOnly)
	got := aggregateClients([]*adminapi.ChannelsResponse{
		{Clients: []adminapi.ClientUsage{{Client: "ns/a", Day: now.Format(time.DateOnly), Requests: 1, Tokens: 10}}},
		{Clients: []adminapi.ClientUsage{{Client: "ns/a", Day: yesterday, Requests: 7, Tokens: 70}, {Client: "ns/a", Day: now.Format(time.DateOnly), Requests: 2, Tokens: 20}}},
	}, now)
	if u := got["ns/a"]; u.Requests != 3 || u.Tokens != 30 {
		t.Fatalf("usage %+v, want 3 requests and 30 tokens (yesterday's left out)", u)
	}
	if !strings.Contains(clientsFingerprint(routing.Inputs{Clients: []v1alpha1.GatewayClient{{}}}, 2), "clients") {
		t.Fatal("fingerprint without clients part")
	}
}

// When a replica goes away and nothing else changes, the table follows the ready count: each of
// the remaining replicas enforces a larger share of every limit (the poller asks for a compile).
func TestGatewayClientLimitsFollowTheReadyReplicas(t *testing.T) {
	gm := NewWithT(t)
	a, b := newClientReplica(t, "proxy-a"), newClientReplica(t, "proxy-b")
	h := startController(t, "gwc-scale", func(o *Options) { o.AdminURLs = []string{a.srv.URL, b.srv.URL} })
	h.apply(clientManifest)
	gm.Eventually(func(g Gomega) {
		tbl := h.publishedTable(g)
		g.Expect(findClient(tbl, h.ns, "search")).NotTo(BeNil())
		g.Expect(tbl.ProxyReplicas).To(Equal(2))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	b.srv.Close()
	gm.Eventually(func(g Gomega) {
		g.Expect(h.publishedTable(g).ProxyReplicas).To(Equal(1))
	}).WithTimeout(20 * time.Second).Should(Succeed())
}
