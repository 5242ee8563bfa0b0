package controller

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

// TestConfigMapFromSamples: the sample channels and policies become the routing ConfigMap, the
// same table the standalone proxy compiles from the same files; the keys go to the Secret only.
func TestConfigMapFromSamples(t *testing.T) {
	h := startController(t, "golden-chat", nil)
	sample, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "chat-gpt4o.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	h.apply(string(sample))

	var cm *corev1.ConfigMap
	NewWithT(t).Eventually(func(g Gomega) {
		cm = h.configMap(g)
		var tbl routing.Table
		g.Expect(json.Unmarshal([]byte(cm.Data[TableKey]), &tbl)).To(Succeed())
		g.Expect(tbl.Channels).To(HaveLen(2))
		g.Expect(tbl.Policies).To(HaveLen(2))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	// The golden file names the namespace llm, whatever this run's namespace is.
	normal := strings.ReplaceAll(cm.Data[TableKey], `"namespace": "`+h.ns+`"`, `"namespace": "llm"`)
	// and channel IDs: the harness numbers its namespaces, so this one depends on the tests before it.
	normal = strings.ReplaceAll(normal, `"`+h.ns+`/`, `"golden-chat-1/`)
	testutil.Golden(t, *update, "chat-gpt4o.configmap.golden.json", []byte(normal+"\n"))

	// The same function as the standalone proxy: compiling the files gives the same table and hash.
	in, err := routing.LoadManifests(filepath.Join("..", "..", "config", "samples", "chat-gpt4o.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	setNamespace(&in, h.ns)
	want, problems := routing.Compile(in)
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	r, err := render(want)
	if err != nil {
		t.Fatal(err)
	}
	if !r.table.Equal(cm.Data, cm.BinaryData) || r.table.Compressed() {
		t.Errorf("ConfigMap table differs from routing.Compile of the same manifests (or is not plain JSON)")
	}
	if got := cm.Annotations[ConfigHashAnnotation]; got != want.Hash() {
		t.Errorf("hash annotation %q, want %q", got, want.Hash())
	}
	if cm.Labels[ManagedByLabel] != ManagedByValue {
		t.Errorf("ConfigMap labels %v", cm.Labels)
	}
	for _, key := range []string{"sk-placeholder-openai", "placeholder-azure-key"} {
		for k, v := range cm.Data {
			if strings.Contains(v, key) {
				t.Errorf("ConfigMap key %s carries a provider key", k)
			}
		}
	}
	g := NewWithT(t)
	g.Expect(h.credentials(g)).To(Equal(map[string]string{
		h.id("openai-direct"): "sk-placeholder-openai",
		h.id("azure-eastus"):  "placeholder-azure-key",
	}))
	sec := &corev1.Secret{}
	g.Expect(h.c.Get(context.Background(), h.key(DefaultConfigMapName+"-credentials"), sec)).To(Succeed())
	g.Expect(sec.Annotations).To(HaveKeyWithValue(ConfigHashAnnotation, want.Hash()))
	g.Expect(sec.Labels).To(HaveKeyWithValue(ManagedByLabel, ManagedByValue))
	g.Expect(sec.Labels).To(HaveKeyWithValue(routing.InternalSecretLabel, "true")) // no channel may reference it

	NewWithT(t).Eventually(func(g Gomega) {
		for _, name := range []string{"openai-direct", "azure-eastus"} {
			pc := &v1alpha1.ProviderChannel{}
			g.Expect(h.c.Get(context.Background(), h.key(name), pc)).To(Succeed())
			ready := condition(pc.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
			g.Expect(ready.ObservedGeneration).To(Equal(pc.Generation))
			g.Expect(pc.Status.ObservedGeneration).To(Equal(pc.Generation))
		}
		for _, name := range []string{"chat-gpt4o", "chat-gpt4o-mini"} {
			rp := &v1alpha1.RoutingPolicy{}
			g.Expect(h.c.Get(context.Background(), h.key(name), rp)).To(Succeed())
			ready := condition(rp.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
		}
	}).WithTimeout(20 * time.Second).Should(Succeed())
}

// setNamespace gives manifests read from files the namespace, and the generation (1, for objects
// just created), the API server gives them.
func setNamespace(in *routing.Inputs, ns string) {
	for i := range in.Channels {
		in.Channels[i].Namespace, in.Channels[i].Generation = ns, 1
	}
	for i := range in.Policies {
		in.Policies[i].Namespace, in.Policies[i].Generation = ns, 1
	}
	for i := range in.Secrets {
		in.Secrets[i].Namespace = ns
	}
}

const baseManifests = `
apiVersion: v1
kind: Secret
metadata: {name: key-a}
stringData: {apiKey: sk-test-a}
---
apiVersion: v1
kind: Secret
metadata: {name: key-b}
stringData: {apiKey: sk-test-b}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: a}
spec:
  provider: openai
  baseURL: https://a.example.com/v1
  credentialsRef: {name: key-a, key: apiKey}
  models: [{name: gpt-4o}, {name: gpt-4o-mini}]
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: b}
spec:
  provider: azure-openai
  baseURL: https://b.example.com/openai/v1
  credentialsRef: {name: key-b, key: apiKey}
  models: [{name: gpt-4o}]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: a}, {name: b}]
`

// waitGood waits for the base manifests to be published and every object Ready; it returns the hash.
func (h *harness) waitGood(channels, policies []string) string {
	h.t.Helper()
	var hash string
	NewWithT(h.t).Eventually(func(g Gomega) {
		for _, name := range channels {
			pc := &v1alpha1.ProviderChannel{}
			g.Expect(h.c.Get(context.Background(), h.key(name), pc)).To(Succeed())
			ready := condition(pc.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "%s: %s", name, ready.Message)
		}
		for _, name := range policies {
			rp := &v1alpha1.RoutingPolicy{}
			g.Expect(h.c.Get(context.Background(), h.key(name), rp)).To(Succeed())
			ready := condition(rp.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "%s: %s", name, ready.Message)
		}
		hash = h.configMap(g).Annotations[ConfigHashAnnotation]
		g.Expect(hash).NotTo(BeEmpty())
	}).WithTimeout(20 * time.Second).Should(Succeed())
	return hash
}

// TestProblemsAreStatus: each kind of problem sets Ready=False with a reason and a message that
// names the object, emits a Warning Event, and leaves the last good config serving; fixing it
// recovers.
func TestProblemsAreStatus(t *testing.T) {
	h := startController(t, "problems", nil)
	h.apply(baseManifests)
	good := h.waitGood([]string{"a", "b"}, []string{"chat"})
	goodForm := sameButGenerations(h.publishedTable(NewWithT(t)))
	ctx := context.Background()

	patchChannel := func(name, patch string) func() {
		return func() {
			pc := &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
			if err := h.c.Patch(ctx, pc, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
				t.Fatal(err)
			}
		}
	}
	patchPolicy := func(name, patch string) func() {
		return func() {
			rp := &v1alpha1.RoutingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
			if err := h.c.Patch(ctx, rp, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
				t.Fatal(err)
			}
		}
	}
	deleteObj := func(obj client.Object) func() {
		return func() {
			if err := h.c.Delete(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name        string
		breakIt     func()
		fix         func()
		kind, obj   string
		reason      string
		mentions    []string
		alsoBlocked string // a policy that loses its channel
	}{
		{
			name:    "missing Secret",
			breakIt: deleteObj(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "key-a"}}),
			fix: func() {
				h.apply("apiVersion: v1\nkind: Secret\nmetadata: {name: key-a}\nstringData: {apiKey: sk-test-a}\n")
			},
			kind: "ProviderChannel", obj: "a", reason: routing.ReasonSecretNotFound,
			mentions: []string{"ProviderChannel " + h.ns + "/a", "Secret " + h.ns + "/key-a"}, alsoBlocked: "chat",
		},
		{
			name: "missing key",
			breakIt: func() {
				h.apply("apiVersion: v1\nkind: Secret\nmetadata: {name: key-b}\ndata: {token: c2stdGVzdC1i}\n")
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "key-b"}}
				if err := h.c.Patch(ctx, s, client.RawPatch("application/merge-patch+json", []byte(`{"data":{"apiKey":null}}`))); err != nil {
					t.Fatal(err)
				}
			},
			fix: func() {
				h.apply("apiVersion: v1\nkind: Secret\nmetadata: {name: key-b}\nstringData: {apiKey: sk-test-b}\n")
			},
			kind: "ProviderChannel", obj: "b", reason: routing.ReasonSecretKeyNotFound,
			mentions: []string{"ProviderChannel " + h.ns + "/b", h.ns + "/key-b", `"apiKey"`},
		},
		{
			// provider: anthropic, this case before, is refused by the API server now
			// (test/crdvalidation). A channel in the controller's own namespace reaching for the
			// controller's credentials Secret (every team's keys) is refused by the compiler.
			name:    "the controller's own credentials Secret",
			breakIt: patchChannel("b", `{"spec":{"credentialsRef":{"name":"`+DefaultConfigMapName+`-credentials","key":"`+CredentialsKey+`"}}}`),
			fix:     patchChannel("b", `{"spec":{"credentialsRef":{"name":"key-b","key":"apiKey"}}}`),
			kind:    "ProviderChannel", obj: "b", reason: routing.ReasonRefNotPermitted,
			mentions:    []string{"ProviderChannel " + h.ns + "/b", "Switchyard's own credentials Secret"},
			alsoBlocked: "chat",
		},
		{
			name:    "missing channel",
			breakIt: patchPolicy("chat", `{"spec":{"channels":[{"name":"a"},{"name":"b"},{"name":"ghost"}]}}`),
			fix:     patchPolicy("chat", `{"spec":{"channels":[{"name":"a"},{"name":"b"}]}}`),
			kind:    "RoutingPolicy", obj: "chat", reason: routing.ReasonChannelNotFound,
			mentions: []string{"RoutingPolicy " + h.ns + "/chat", "ProviderChannel " + h.ns + "/ghost"},
		},
		{
			name:    "model no channel serves",
			breakIt: patchPolicy("chat", `{"spec":{"models":["gpt-4o","gpt-5"]}}`),
			fix:     patchPolicy("chat", `{"spec":{"models":["gpt-4o"]}}`),
			kind:    "RoutingPolicy", obj: "chat", reason: routing.ReasonModelNotServed,
			mentions: []string{"RoutingPolicy " + h.ns + "/chat", `"gpt-5"`},
		},
		{
			name: "two policies claim one model",
			breakIt: func() {
				h.apply("apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: chat-copy}\nspec:\n  models: [gpt-4o]\n  channels: [{name: b}]\n")
			},
			fix:  deleteObj(&v1alpha1.RoutingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "chat-copy"}}),
			kind: "RoutingPolicy", obj: "chat-copy", reason: routing.ReasonModelConflict,
			mentions: []string{"RoutingPolicy " + h.ns + "/chat-copy", `"gpt-4o"`, "RoutingPolicy " + h.ns + "/chat"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.breakIt()
			var obj client.Object = &v1alpha1.ProviderChannel{}
			if tc.kind == "RoutingPolicy" {
				obj = &v1alpha1.RoutingPolicy{}
			}
			conds := func(o client.Object) []metav1.Condition {
				if pc, ok := o.(*v1alpha1.ProviderChannel); ok {
					return pc.Status.Conditions
				}
				return o.(*v1alpha1.RoutingPolicy).Status.Conditions
			}
			NewWithT(t).Eventually(func(g Gomega) {
				g.Expect(h.c.Get(ctx, h.key(tc.obj), obj)).To(Succeed())
				ready := condition(conds(obj), v1alpha1.ConditionReady)
				g.Expect(ready).NotTo(BeNil())
				g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(ready.Reason).To(Equal(tc.reason))
				for _, m := range tc.mentions {
					g.Expect(ready.Message).To(ContainSubstring(m))
				}
				g.Expect(ready.ObservedGeneration).To(Equal(obj.GetGeneration()))
				warnings := h.eventsWithReason(g, tc.obj, tc.reason)
				g.Expect(warnings).NotTo(BeEmpty())
				g.Expect(warnings[0].Type).To(Equal(corev1.EventTypeWarning))
				g.Expect(warnings[0].Note).To(ContainSubstring(tc.mentions[0]))
			}).WithTimeout(20 * time.Second).Should(Succeed())
			if tc.alsoBlocked != "" {
				NewWithT(t).Eventually(func(g Gomega) {
					rp := &v1alpha1.RoutingPolicy{}
					g.Expect(h.c.Get(ctx, h.key(tc.alsoBlocked), rp)).To(Succeed())
					ready := condition(rp.Status.Conditions, v1alpha1.ConditionReady)
					g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
					g.Expect(ready.Reason).To(Equal(routing.ReasonChannelNotReady))
				}).WithTimeout(20 * time.Second).Should(Succeed())
			}
			// The status was written after the sync that refused to publish: the last good
			// config is what the proxies still read.
			g := NewWithT(t)
			g.Expect(h.configMap(g).Annotations[ConfigHashAnnotation]).To(Equal(good))
			g.Expect(h.credentials(g)).To(Equal(map[string]string{h.id("a"): "sk-test-a", h.id("b"): "sk-test-b"}))

			tc.fix()
			// The fix gives the object a new generation, which the table records (Programmed
			// compares it); everything else is the last good table.
			h.waitGood([]string{"a", "b"}, []string{"chat"})
			if got := sameButGenerations(h.publishedTable(NewWithT(t))); got != goodForm {
				t.Errorf("table after the fix differs from the good one beyond generations:\n%s\nwant\n%s", got, goodForm)
			}
			good = h.configMap(NewWithT(t)).Annotations[ConfigHashAnnotation]
			if h.c.Get(ctx, h.key(tc.obj), obj) == nil { // not when the fix was a deletion
				NewWithT(t).Eventually(func(g Gomega) {
					g.Expect(h.eventsWithReason(g, tc.obj, ReasonProblemResolved)).NotTo(BeEmpty())
				}).WithTimeout(10 * time.Second).Should(Succeed())
			}
		})
	}
}

// TestOwnedObjectsRepaired: deleting or editing the ConfigMap or the Secret restores them, also
// while problems hold publishing back (from the last good config).
func TestOwnedObjectsRepaired(t *testing.T) {
	h := startController(t, "repair", nil)
	h.apply(baseManifests)
	good := h.waitGood([]string{"a", "b"}, []string{"chat"})
	ctx := context.Background()
	g := NewWithT(t)
	want := h.configMap(g).Data[TableKey]

	g.Expect(h.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: DefaultConfigMapName}})).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		cm := h.configMap(g)
		g.Expect(cm.Annotations[ConfigHashAnnotation]).To(Equal(good))
		g.Expect(cm.Data[TableKey]).To(Equal(want))
	}).WithTimeout(20 * time.Second).Should(Succeed())

	cm := h.configMap(g)
	cm.Data[TableKey] = `{"channels":[],"policies":[]}`
	g.Expect(h.c.Update(ctx, cm)).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(h.configMap(g).Data[TableKey]).To(Equal(want))
	}).WithTimeout(20 * time.Second).Should(Succeed())

	g.Expect(h.c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: DefaultConfigMapName + "-credentials"}})).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(h.credentials(g)).To(Equal(map[string]string{h.id("a"): "sk-test-a", h.id("b"): "sk-test-b"}))
	}).WithTimeout(20 * time.Second).Should(Succeed())

	// With a problem holding the new config back, a deleted ConfigMap comes back as the last good one.
	pc := &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "b"}}
	g.Expect(h.c.Patch(ctx, pc, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"credentialsRef":{"name":"missing"}}}`)))).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(h.c.Get(ctx, h.key("b"), pc)).To(Succeed())
		g.Expect(condition(pc.Status.Conditions, v1alpha1.ConditionReady).Reason).To(Equal(routing.ReasonSecretNotFound))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	g.Expect(h.c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: DefaultConfigMapName}})).To(Succeed())
	NewWithT(t).Eventually(func(g Gomega) {
		cm := h.configMap(g)
		g.Expect(cm.Annotations[ConfigHashAnnotation]).To(Equal(good))
		g.Expect(cm.Data[TableKey]).To(Equal(want))
	}).WithTimeout(20 * time.Second).Should(Succeed())
}

// TestOverrideGetsThroughWhileHeldBack: with a broken object elsewhere the last good config keeps
// serving, but an on-call `spec.disabled` still reaches the proxies' ConfigMap.
func TestOverrideGetsThroughWhileHeldBack(t *testing.T) {
	h := startController(t, "override", nil)
	h.apply(baseManifests)
	good := h.waitGood([]string{"a", "b"}, []string{"chat"})
	ctx := context.Background()
	h.apply("apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: broken}\nspec:\n  models: [other]\n  channels: [{name: ghost}]\n")
	NewWithT(t).Eventually(func(g Gomega) {
		rp := &v1alpha1.RoutingPolicy{}
		g.Expect(h.c.Get(ctx, h.key("broken"), rp)).To(Succeed())
		ready := condition(rp.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	g := NewWithT(t)
	g.Expect(h.configMap(g).Annotations[ConfigHashAnnotation]).To(Equal(good), "the broken policy must not be published")

	pc := &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "b"}}
	if err := h.c.Patch(ctx, pc, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"disabled":true,"disabledReason":"INC-42"}}`))); err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func(g Gomega) {
		var tbl routing.Table
		g.Expect(json.Unmarshal([]byte(h.configMap(g).Data[TableKey]), &tbl)).To(Succeed())
		ch, ok := tbl.Channel(h.id("b"))
		g.Expect(ok).To(BeTrue())
		g.Expect(ch.Disabled).To(BeTrue())
		g.Expect(ch.DisabledReason).To(Equal("INC-42"))
		_, broken := tbl.PolicyFor("other")
		g.Expect(broken).To(BeFalse(), "the broken policy leaked into the served table")
	}).WithTimeout(20 * time.Second).Should(Succeed())
}
