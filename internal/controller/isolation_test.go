package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// TestOneTeamsMistakeNeverStopsAnother: two teams in two namespaces share one controller and one
// running proxy (fed from the ConfigMap by source.ConfigMapSource, polled by the controller on its admin API,
// as in a cluster). Each team has a channel named "a": both are served, each under its own
// namespace. Team B breaks its objects one way after another (a deleted Secret, a policy naming a
// missing channel, a newer policy contesting team A's model, a model its channels do not serve),
// undoes each break, and then does them all again. Every time, team A's change (a key rotation, a
// new channel and a policy edit, the end of a drill, another policy edit) reaches the running
// proxy, and A's objects are Programmed at their new generation; B's broken objects keep their
// last good form or are left out, saying so in Accepted, Programmed and Ready.
func TestOneTeamsMistakeNeverStopsAnother(t *testing.T) {
	var teamB string
	var served atomic.Pointer[http.Handler]
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := served.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	t.Cleanup(admin.Close)
	h := startController(t, "isolation", func(o *Options) {
		teamB = o.ProxyNamespace + "-b"
		o.WatchNamespaces = append(o.WatchNamespaces, teamB)
		o.AdminURLs = []string{admin.URL}
	})
	srv := startReader(t, h)
	adminHandler := srv.AdminHandler()
	served.Store(&adminHandler)

	ctx := context.Background()
	g := NewWithT(t)
	g.Expect(h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamB}})).To(Succeed())
	applyB := func(manifest string) {
		t.Helper()
		if out, errOut, err := h.env.Kubectl(stringsReader(manifest), "apply", "-n", teamB, "--server-side", "--field-manager=test", "--force-conflicts", "-f", "-"); err != nil {
			t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
		}
	}
	deleteB := func(obj client.Object) {
		t.Helper()
		obj.SetNamespace(teamB)
		NewWithT(t).Expect(client.IgnoreNotFound(h.c.Delete(ctx, obj))).To(Succeed())
	}
	b := func(name string) string { return teamB + "/" + name }
	conditions := func(g Gomega, ns, kind, name string) (metav1.Object, []metav1.Condition) {
		key := client.ObjectKey{Namespace: ns, Name: name}
		if kind == "ProviderChannel" {
			pc := &v1alpha1.ProviderChannel{}
			g.Expect(h.c.Get(ctx, key, pc)).To(Succeed())
			return pc, pc.Status.Conditions
		}
		rp := &v1alpha1.RoutingPolicy{}
		g.Expect(h.c.Get(ctx, key, rp)).To(Succeed())
		return rp, rp.Status.Conditions
	}
	// servedByProxy waits until the running proxy serves what the ConfigMap holds and check holds
	// for it, and until team A's objects are Programmed and Ready at their current generation.
	servedByProxy := func(what string, check func(g Gomega, tbl *routing.Table, keys map[string]string)) {
		t.Helper()
		NewWithT(t).Eventually(func(g Gomega) {
			tbl := h.publishedTable(g)
			g.Expect(srv.ChannelsState().Config.Hash).To(Equal(tbl.Hash()), "the proxy does not serve the published config yet")
			keys := map[string]string{}
			for id, k := range tbl.Credentials {
				keys[id] = k.Reveal()
			}
			check(g, tbl, keys)
			for _, o := range tbl.Channels {
				if o.Namespace == h.ns {
					programmed(g, conditions, h.ns, "ProviderChannel", o.Name)
				}
			}
			programmed(g, conditions, h.ns, "RoutingPolicy", "chat")
		}).WithTimeout(20*time.Second).Should(Succeed(), what)
	}
	// brokenB waits until one of team B's objects says what is wrong and how it is served
	// (programmedReason "": Programmed is True, the proxies serve the generation it has).
	brokenB := func(kind, name, reason, programmedReason, says string, onTopOfOthers bool) {
		t.Helper()
		NewWithT(t).Eventually(func(g Gomega) {
			_, conds := conditions(g, teamB, kind, name)
			for typ, want := range map[string]string{v1alpha1.ConditionAccepted: reason, v1alpha1.ConditionReady: reason, v1alpha1.ConditionProgrammed: programmedReason} {
				c := condition(conds, typ)
				g.Expect(c).NotTo(BeNil(), typ)
				if want == "" {
					// Served at the generation it has: a Secret gone does not change the channel's.
					g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", typ, c.Message)
					continue
				}
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse), typ)
				if onTopOfOthers && typ != v1alpha1.ConditionProgrammed {
					// An earlier break of B's may be the first problem named.
					continue
				}
				g.Expect(c.Reason).To(Equal(want), "%s: %s", typ, c.Message)
			}
			g.Expect(condition(conds, v1alpha1.ConditionReady).Message).To(ContainSubstring(says))
		}).WithTimeout(20*time.Second).Should(Succeed(), kind+" "+name)
	}
	readyB := func() {
		t.Helper()
		NewWithT(t).Eventually(func(g Gomega) {
			for _, o := range [][2]string{{"ProviderChannel", "a"}, {"ProviderChannel", "b"}, {"RoutingPolicy", "claude"}} {
				programmed(g, conditions, teamB, o[0], o[1])
			}
		}).WithTimeout(20*time.Second).Should(Succeed(), "team B is Ready again")
	}

	h.apply(`
apiVersion: v1
kind: Secret
metadata: {name: key-a}
stringData: {apiKey: sk-a-0}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: a}
spec:
  provider: openai
  baseURL: https://a.example.com/v1
  credentialsRef: {name: key-a, key: apiKey}
  models: [{name: gpt-4o}]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: a}]
`)
	bBase := `
apiVersion: v1
kind: Secret
metadata: {name: key-b}
stringData: {apiKey: sk-b-1}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: a}
spec:
  provider: openai
  baseURL: https://b-a.example.com/v1
  models: [{name: claude}]
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: b}
spec:
  provider: openai
  baseURL: https://b.example.com/v1
  credentialsRef: {name: key-b, key: apiKey}
  models: [{name: claude}]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: claude}
spec:
  models: [claude]
  channels: [{name: b}, {name: a}]
`
	applyB(bBase)
	servedByProxy("both teams, each with a channel named a", func(g Gomega, tbl *routing.Table, keys map[string]string) {
		g.Expect(tbl.Channels).To(HaveLen(3))
		aa, _ := tbl.Channel(h.id("a"))
		ba, _ := tbl.Channel(b("a"))
		g.Expect(aa).NotTo(BeNil())
		g.Expect(ba).NotTo(BeNil())
		g.Expect(aa.BaseURL).To(Equal("https://a.example.com/v1"))
		g.Expect(ba.BaseURL).To(Equal("https://b-a.example.com/v1"))
		g.Expect(keys).To(Equal(map[string]string{h.id("a"): "sk-a-0", b("b"): "sk-b-1"}))
		p, _ := tbl.PolicyFor("claude")
		g.Expect(p).NotTo(BeNil(), "the policy of claude is not served yet")
		g.Expect(p.Channels).To(Equal([]routing.PolicyChannel{{Channel: b("b"), Weight: 100}, {Channel: b("a"), Weight: 100}}))
	})
	readyB()

	// Team A's changes: each call makes a new one, so a redone break meets a new change.
	n := 0
	rotateKey := func() func(Gomega, *routing.Table, map[string]string) {
		n++
		key := fmt.Sprintf("sk-a-%d", n)
		h.apply("apiVersion: v1\nkind: Secret\nmetadata: {name: key-a}\nstringData: {apiKey: " + key + "}\n")
		return func(g Gomega, _ *routing.Table, keys map[string]string) { g.Expect(keys[h.id("a")]).To(Equal(key)) }
	}
	addChannel := func() func(Gomega, *routing.Table, map[string]string) {
		n++
		name := fmt.Sprintf("a-%d", n)
		h.apply("apiVersion: switchyard.io/v1alpha1\nkind: ProviderChannel\nmetadata: {name: " + name + "}\nspec:\n  provider: openai\n  baseURL: https://" + name + ".example.com/v1\n  models: [{name: gpt-4o}]\n" +
			"---\napiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: chat}\nspec:\n  models: [gpt-4o]\n  channels: [{name: a}, {name: " + name + "}]\n")
		return func(g Gomega, tbl *routing.Table, _ map[string]string) {
			p, _ := tbl.PolicyFor("gpt-4o")
			g.Expect(p).NotTo(BeNil(), "the policy of gpt-4o is not served yet")
			g.Expect(p.Channels).To(Equal([]routing.PolicyChannel{{Channel: h.id("a"), Weight: 100}, {Channel: h.id(name), Weight: 100}}))
		}
	}
	endDrill := func() func(Gomega, *routing.Table, map[string]string) {
		// The drill starts before B's break and ends after it.
		pc := &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "a"}}
		g.Expect(h.c.Patch(ctx, pc, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"faultInjection":null}}`)))).To(Succeed())
		return func(g Gomega, tbl *routing.Table, _ map[string]string) {
			a, _ := tbl.Channel(h.id("a"))
			g.Expect(a.Fault).To(BeNil())
			p, _ := tbl.PolicyFor("gpt-4o")
			g.Expect(p).NotTo(BeNil(), "the policy of gpt-4o is not served yet")
			g.Expect(p.Namespace).To(Equal(h.ns), "team A lost its model")
		}
	}
	editPolicy := func() func(Gomega, *routing.Table, map[string]string) {
		n++
		weight := 100 + n
		h.apply(fmt.Sprintf("apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: chat}\nspec:\n  models: [gpt-4o]\n  channels: [{name: a, weight: %d}]\n", weight))
		return func(g Gomega, tbl *routing.Table, _ map[string]string) {
			p, _ := tbl.PolicyFor("gpt-4o")
			g.Expect(p).NotTo(BeNil(), "the policy of gpt-4o is not served yet")
			g.Expect(p.Channels).To(Equal([]routing.PolicyChannel{{Channel: h.id("a"), Weight: weight}}))
		}
	}

	type breakage struct {
		name string
		// before runs ahead of the break (the drill that A ends afterwards).
		before          func()
		breakB, undoB   func()
		changeA         func() func(Gomega, *routing.Table, map[string]string)
		kind, obj       string
		reason, pReason string
		says            string
		// stillServed checks B's broken object in the table while broken.
		stillServed func(Gomega, *routing.Table, map[string]string)
	}
	breaks := []breakage{
		{name: "B deletes its Secret; A rotates its key",
			breakB:  func() { deleteB(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key-b"}}) },
			undoB:   func() { applyB(bBase) },
			changeA: rotateKey,
			kind:    "ProviderChannel", obj: "b", reason: routing.ReasonSecretNotFound, pReason: "",
			says: "the proxies keep serving its last good version",
			stillServed: func(g Gomega, tbl *routing.Table, keys map[string]string) {
				g.Expect(keys[b("b")]).To(Equal("sk-b-1"), "B's channel keeps its last good key")
			}},
		{name: "B's policy names a missing channel; A adds a channel and edits its policy",
			breakB: func() {
				applyB("apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: claude}\nspec:\n  models: [claude]\n  channels: [{name: b}, {name: ghost}]\n")
			},
			undoB:   func() { applyB(bBase) },
			changeA: addChannel,
			kind:    "RoutingPolicy", obj: "claude", reason: routing.ReasonChannelNotFound, pReason: ReasonStale,
			says: "the proxies keep serving its last good version",
			stillServed: func(g Gomega, tbl *routing.Table, _ map[string]string) {
				p, _ := tbl.PolicyFor("claude")
				g.Expect(p).NotTo(BeNil(), "the policy of claude is not served yet")
				g.Expect(p).NotTo(BeNil())
				g.Expect(p.Channels).To(HaveLen(2))
			}},
		{name: "B adds a newer policy for A's model; A ends its drill",
			before: func() {
				h.apply("apiVersion: switchyard.io/v1alpha1\nkind: ProviderChannel\nmetadata: {name: a}\nspec:\n  provider: openai\n  baseURL: https://a.example.com/v1\n  credentialsRef: {name: key-a, key: apiKey}\n  models: [{name: gpt-4o}]\n  faultInjection: {abortStatus: 503, percent: 10}\n")
				servedByProxy("A's drill", func(g Gomega, tbl *routing.Table, _ map[string]string) {
					a, _ := tbl.Channel(h.id("a"))
					g.Expect(a.Fault).NotTo(BeNil())
				})
				// The older policy keeps a contested model, and creation times have whole
				// seconds: B's must come at least a second after A's.
				chat := &v1alpha1.RoutingPolicy{}
				g.Expect(h.c.Get(ctx, h.key("chat"), chat)).To(Succeed())
				g.Eventually(func() bool { return time.Now().After(chat.CreationTimestamp.Add(1100 * time.Millisecond)) }).
					WithTimeout(3 * time.Second).Should(BeTrue())
			},
			breakB: func() {
				applyB("apiVersion: switchyard.io/v1alpha1\nkind: ProviderChannel\nmetadata: {name: b-local}\nspec:\n  provider: openai\n  baseURL: http://127.0.0.1:9/v1\n  models: [{name: gpt-4o}]\n" +
					"---\napiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: grab}\nspec:\n  models: [gpt-4o]\n  channels: [{name: b-local}]\n")
			},
			undoB: func() {
				deleteB(&v1alpha1.RoutingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "grab"}})
				deleteB(&v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Name: "b-local"}})
			},
			changeA: endDrill,
			kind:    "RoutingPolicy", obj: "grab", reason: routing.ReasonModelConflict, pReason: ReasonPending,
			says: "it is left out of the proxy config"},
		{name: "B's policy routes a model none of its channels serves; A edits its policy",
			breakB: func() {
				applyB("apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: claude}\nspec:\n  models: [claude, claude-opus]\n  channels: [{name: b}, {name: a}]\n")
			},
			undoB: func() {
				applyB("apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: claude}\nspec:\n  models: [claude]\n  channels: [{name: b}, {name: a}]\n")
			},
			changeA: editPolicy,
			kind:    "RoutingPolicy", obj: "claude", reason: routing.ReasonModelNotServed, pReason: ReasonStale,
			says: "the proxies keep serving its last good version",
			stillServed: func(g Gomega, tbl *routing.Table, _ map[string]string) {
				p, _ := tbl.PolicyFor("claude")
				g.Expect(p).NotTo(BeNil(), "the policy of claude is not served yet")
				g.Expect(p).NotTo(BeNil())
				g.Expect(p.Models).To(Equal([]string{"claude"}))
			}},
	}
	run := func(br breakage, onTopOfOthers bool) {
		t.Helper()
		if br.before != nil {
			br.before()
		}
		br.breakB()
		brokenB(br.kind, br.obj, br.reason, br.pReason, br.says, onTopOfOthers)
		check := br.changeA()
		servedByProxy(br.name, func(g Gomega, tbl *routing.Table, keys map[string]string) {
			check(g, tbl, keys)
			if br.stillServed != nil {
				br.stillServed(g, tbl, keys)
			}
		})
		// A's change did not fix B: the break still shows.
		brokenB(br.kind, br.obj, br.reason, br.pReason, br.says, onTopOfOthers)
	}
	// Each break, undone before the next.
	for _, br := range breaks {
		t.Logf("break: %s", br.name)
		run(br, false)
		br.undoB()
		readyB()
	}
	// Again, each break on top of the ones before it; then all undone at once.
	for _, br := range breaks {
		t.Logf("redo: %s", br.name)
		run(br, true)
	}
	for _, br := range breaks {
		br.undoB()
	}
	readyB()
	servedByProxy("B undid everything", func(g Gomega, tbl *routing.Table, keys map[string]string) {
		g.Expect(keys[b("b")]).To(Equal("sk-b-1"))
		_, grabbed := tbl.Policy(teamB, "grab")
		g.Expect(grabbed).To(BeFalse())
		p, _ := tbl.PolicyFor("claude")
		g.Expect(p).NotTo(BeNil(), "the policy of claude is not served yet")
		g.Expect(p.Channels).To(Equal([]routing.PolicyChannel{{Channel: b("b"), Weight: 100}, {Channel: b("a"), Weight: 100}}))
	})

	// B falls back to A's model without A's consent: B's policy is still published as written
	// (the proxy skips the hop) and says so; A's consent, given and withdrawn, never freezes B.
	applyB("apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: claude}\nspec:\n  models: [claude]\n  channels: [{name: a}, {name: b}]\n  fallbackModels: [gpt-4o]\n")
	refs := func(status metav1.ConditionStatus, ready metav1.ConditionStatus) {
		t.Helper()
		NewWithT(t).Eventually(func(g Gomega) {
			obj, conds := conditions(g, teamB, "RoutingPolicy", "claude")
			rr := condition(conds, ConditionResolvedRefs)
			g.Expect(rr).NotTo(BeNil())
			g.Expect(rr.Status).To(Equal(status), rr.Message)
			g.Expect(rr.ObservedGeneration).To(Equal(obj.GetGeneration()))
			if status == metav1.ConditionFalse {
				g.Expect(rr.Reason).To(Equal(routing.ReasonFallbackNotAccepted))
				g.Expect(rr.Message).To(ContainSubstring("acceptFallbackFrom: [" + teamB + "]"))
			}
			g.Expect(condition(conds, v1alpha1.ConditionAccepted).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(condition(conds, v1alpha1.ConditionProgrammed).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(condition(conds, v1alpha1.ConditionReady).Status).To(Equal(ready))
		}).WithTimeout(20*time.Second).Should(Succeed(), "ResolvedRefs "+string(status))
	}
	refs(metav1.ConditionFalse, metav1.ConditionFalse)
	servedByProxy("B's edit, with a fallback A does not accept", func(g Gomega, tbl *routing.Table, _ map[string]string) {
		p, _ := tbl.PolicyFor("claude")
		g.Expect(p).NotTo(BeNil(), "the policy of claude is not served yet")
		g.Expect(p.Channels).To(Equal([]routing.PolicyChannel{{Channel: b("a"), Weight: 100}, {Channel: b("b"), Weight: 100}}))
		g.Expect(p.FallbackModels).To(Equal([]string{"gpt-4o"}))
	})
	h.apply("apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: chat}\nspec:\n  models: [gpt-4o]\n  channels: [{name: a}]\n  acceptFallbackFrom: [" + teamB + "]\n")
	refs(metav1.ConditionTrue, metav1.ConditionTrue)
	h.apply("apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: chat}\nspec:\n  models: [gpt-4o]\n  channels: [{name: a}]\n")
	refs(metav1.ConditionFalse, metav1.ConditionFalse)
	applyB("apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: claude}\nspec:\n  models: [claude]\n  channels: [{name: b}]\n  fallbackModels: [gpt-4o]\n")
	servedByProxy("B's next edit, consent withdrawn", func(g Gomega, tbl *routing.Table, _ map[string]string) {
		p, _ := tbl.PolicyFor("claude")
		g.Expect(p).NotTo(BeNil(), "the policy of claude is not served yet")
		g.Expect(p.Channels).To(Equal([]routing.PolicyChannel{{Channel: b("b"), Weight: 100}}))
	})
}

// programmed asserts that an object is Accepted, Programmed and Ready at its current generation.
func programmed(g Gomega, conditions func(Gomega, string, string, string) (metav1.Object, []metav1.Condition), ns, kind, name string) {
	obj, conds := conditions(g, ns, kind, name)
	for _, typ := range []string{v1alpha1.ConditionAccepted, v1alpha1.ConditionProgrammed, v1alpha1.ConditionReady} {
		c := condition(conds, typ)
		g.Expect(c).NotTo(BeNil(), "%s %s/%s has no %s", kind, ns, name, typ)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s %s/%s %s: %s", kind, ns, name, typ, c.Message)
		g.Expect(c.ObservedGeneration).To(Equal(obj.GetGeneration()), "%s %s/%s %s", kind, ns, name, typ)
	}
}
