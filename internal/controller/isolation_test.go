package controller

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// TestOneTeamsMistakeNeverStopsAnother: two teams in two namespaces share one controller. Team B
// breaks its objects one way after another (a deleted Secret, a policy naming a missing channel,
// a newer policy contesting a model, a channel name team A uses); each time team A's change (a
// key rotation, a new channel and a policy edit, the end of a drill, another policy edit) still
// reaches the published config, and team B's broken objects keep their last good form or are
// left out, saying so in their status. Then team B fixes everything and is Ready again.
func TestOneTeamsMistakeNeverStopsAnother(t *testing.T) {
	var teamB string
	h := startController(t, "isolation", func(o *Options) {
		teamB = o.ProxyNamespace + "-b"
		o.WatchNamespaces = append(o.WatchNamespaces, teamB)
	})
	ctx := context.Background()
	g := NewWithT(t)
	g.Expect(h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamB}})).To(Succeed())
	applyB := func(manifest string) {
		t.Helper()
		if out, errOut, err := h.env.Kubectl(stringsReader(manifest), "apply", "-n", teamB, "--server-side", "--field-manager=test", "--force-conflicts", "-f", "-"); err != nil {
			t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
		}
	}
	table := func(g Gomega) *routing.Table {
		var tbl routing.Table
		g.Expect(json.Unmarshal([]byte(h.configMap(g).Data[TableKey]), &tbl)).To(Succeed())
		return &tbl
	}
	published := func(what string, check func(g Gomega, tbl *routing.Table, keys map[string]string)) {
		t.Helper()
		NewWithT(t).Eventually(func(g Gomega) { check(g, table(g), h.credentials(g)) }).
			WithTimeout(20*time.Second).Should(Succeed(), what)
	}
	readyFalse := func(kind, name, reason, says string) {
		t.Helper()
		NewWithT(t).Eventually(func(g Gomega) {
			var conds []metav1.Condition
			key := client.ObjectKey{Namespace: teamB, Name: name}
			if kind == "ProviderChannel" {
				pc := &v1alpha1.ProviderChannel{}
				g.Expect(h.c.Get(ctx, key, pc)).To(Succeed())
				conds = pc.Status.Conditions
			} else {
				rp := &v1alpha1.RoutingPolicy{}
				g.Expect(h.c.Get(ctx, key, rp)).To(Succeed())
				conds = rp.Status.Conditions
			}
			ready := condition(conds, v1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(reason))
			g.Expect(ready.Message).To(ContainSubstring(says))
		}).WithTimeout(20*time.Second).Should(Succeed(), kind+" "+name)
	}

	h.apply(`
apiVersion: v1
kind: Secret
metadata: {name: key-a}
stringData: {apiKey: sk-a-1}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: a}
spec:
  provider: openai
  baseURL: https://a.example.com/v1
  credentialsRef: {name: key-a, key: apiKey}
  models: [{name: gpt-4o}]
  faultInjection: {abortStatus: 503, percent: 10}
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: a}]
`)
	applyB(`
apiVersion: v1
kind: Secret
metadata: {name: key-b}
stringData: {apiKey: sk-b-1}
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
  channels: [{name: b}]
`)
	published("both teams", func(g Gomega, tbl *routing.Table, keys map[string]string) {
		g.Expect(tbl.Channels).To(HaveLen(2))
		g.Expect(tbl.Policies).To(HaveLen(2))
		g.Expect(keys).To(Equal(map[string]string{h.id("a"): "sk-a-1", teamB + "/b": "sk-b-1"}))
	})

	// 1. B deletes its Secret; A rotates its key.
	g.Expect(h.c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "key-b"}})).To(Succeed())
	h.apply("apiVersion: v1\nkind: Secret\nmetadata: {name: key-a}\nstringData: {apiKey: sk-a-2}\n")
	published("A's key rotation, B's channel at its last good key", func(g Gomega, tbl *routing.Table, keys map[string]string) {
		g.Expect(keys).To(Equal(map[string]string{h.id("a"): "sk-a-2", teamB + "/b": "sk-b-1"}))
		_, ok := tbl.PolicyFor("claude")
		g.Expect(ok).To(BeTrue())
	})
	readyFalse("ProviderChannel", "b", routing.ReasonSecretNotFound, "the proxies keep serving its last good version")

	// 2. B's policy names a channel that does not exist; A adds a channel and edits its policy.
	applyB("apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: claude}\nspec:\n  models: [claude]\n  channels: [{name: b}, {name: ghost}]\n")
	h.apply("apiVersion: switchyard.io/v1alpha1\nkind: ProviderChannel\nmetadata: {name: a2}\nspec:\n  provider: openai\n  baseURL: https://a2.example.com/v1\n  models: [{name: gpt-4o}]\n---\napiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: chat}\nspec:\n  models: [gpt-4o]\n  channels: [{name: a}, {name: a2}]\n")
	published("A's new channel and policy edit", func(g Gomega, tbl *routing.Table, _ map[string]string) {
		p, ok := tbl.PolicyFor("gpt-4o")
		g.Expect(ok).To(BeTrue())
		g.Expect(p.Channels).To(HaveLen(2))
		c, ok := tbl.PolicyFor("claude")
		g.Expect(ok).To(BeTrue())
		g.Expect(c.Channels).To(Equal([]routing.PolicyChannel{{Channel: teamB + "/b", Weight: 100}}))
	})
	readyFalse("RoutingPolicy", "claude", routing.ReasonChannelNotReady, "the proxies keep serving its last good version")

	// 3. B adds a newer policy for A's model; A ends its drill. The older policy keeps a contested
	// model, and creation times have whole seconds: B's comes at least a second after A's.
	chat := &v1alpha1.RoutingPolicy{}
	g.Expect(h.c.Get(ctx, h.key("chat"), chat)).To(Succeed())
	g.Eventually(func() bool { return time.Now().After(chat.CreationTimestamp.Add(1100 * time.Millisecond)) }).
		WithTimeout(3 * time.Second).Should(BeTrue())
	applyB("apiVersion: switchyard.io/v1alpha1\nkind: ProviderChannel\nmetadata: {name: b-local}\nspec:\n  provider: openai\n  baseURL: http://127.0.0.1:9/v1\n  models: [{name: gpt-4o}]\n" +
		"---\napiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: grab}\nspec:\n  models: [gpt-4o]\n  channels: [{name: b-local}]\n")
	pc := &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "a"}}
	g.Expect(h.c.Patch(ctx, pc, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"faultInjection":null}}`)))).To(Succeed())
	published("the end of A's drill; A keeps its model", func(g Gomega, tbl *routing.Table, _ map[string]string) {
		a, ok := tbl.Channel(h.id("a"))
		g.Expect(ok).To(BeTrue())
		g.Expect(a.Fault).To(BeNil())
		p, _ := tbl.PolicyFor("gpt-4o")
		g.Expect(p.Name).To(Equal("chat"))
	})
	readyFalse("RoutingPolicy", "grab", routing.ReasonModelConflict, "it is left out of the proxy config")

	// 4. B creates a channel with the name of one of A's; A changes its policy.
	applyB("apiVersion: switchyard.io/v1alpha1\nkind: ProviderChannel\nmetadata: {name: a2}\nspec:\n  provider: openai\n  baseURL: https://evil.example.com/v1\n  models: [{name: gpt-4o}]\n")
	h.apply("apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: chat}\nspec:\n  models: [gpt-4o]\n  channels: [{name: a2}, {name: a}]\n")
	published("A's policy edit; A's a2, not B's copy of the name", func(g Gomega, tbl *routing.Table, _ map[string]string) {
		a2, ok := tbl.Channel(h.id("a2"))
		g.Expect(ok).To(BeTrue())
		g.Expect(a2.BaseURL).To(Equal("https://a2.example.com/v1"))
		p, _ := tbl.PolicyFor("gpt-4o")
		g.Expect(p.Channels).To(Equal([]routing.PolicyChannel{{Channel: h.id("a2"), Weight: 100}, {Channel: h.id("a"), Weight: 100}}))
		b2, ok := tbl.Channel(teamB + "/a2") // B's own, under its own name
		g.Expect(ok).To(BeTrue())
		g.Expect(b2.BaseURL).To(Equal("https://evil.example.com/v1"))
	})

	// B undoes every mistake: everything of B's is Ready and published as it is now.
	applyB("apiVersion: v1\nkind: Secret\nmetadata: {name: key-b}\nstringData: {apiKey: sk-b-2}\n---\napiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: claude}\nspec:\n  models: [claude]\n  channels: [{name: b}]\n")
	g.Expect(h.c.Delete(ctx, &v1alpha1.RoutingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "grab"}})).To(Succeed())
	g.Expect(h.c.Delete(ctx, &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "b-local"}})).To(Succeed())
	g.Expect(h.c.Delete(ctx, &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "a2"}})).To(Succeed())
	published("B's fixes", func(g Gomega, tbl *routing.Table, keys map[string]string) {
		g.Expect(keys).To(Equal(map[string]string{h.id("a"): "sk-a-2", teamB + "/b": "sk-b-2"}))
		g.Expect(tbl.Channels).To(HaveLen(3)) // a, a2 (A's) and b
		g.Expect(tbl.Policies).To(HaveLen(2))
	})
	NewWithT(t).Eventually(func(g Gomega) {
		b := &v1alpha1.ProviderChannel{}
		g.Expect(h.c.Get(ctx, client.ObjectKey{Namespace: teamB, Name: "b"}, b)).To(Succeed())
		g.Expect(condition(b.Status.Conditions, v1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		rp := &v1alpha1.RoutingPolicy{}
		g.Expect(h.c.Get(ctx, client.ObjectKey{Namespace: teamB, Name: "claude"}, rp)).To(Succeed())
		g.Expect(condition(rp.Status.Conditions, v1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(20 * time.Second).Should(Succeed())
}
