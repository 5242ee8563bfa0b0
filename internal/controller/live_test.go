package controller

import (
	"context"
	"encoding/json"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/routing"
)

const liveManifests = `
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: openai-direct}
spec:
  provider: openai
  baseURL: https://api.openai.example/v1
  models: [{name: gpt-4o}, {name: gpt-4o-mini}]
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: azure-eastus}
spec:
  provider: azure-openai
  baseURL: https://azure.example/openai/v1
  models: [{name: gpt-4o}]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: openai-direct}, {name: azure-eastus}]
`

func state(channel, model, phase string, score, traffic, requests, failures int, p95 int64) adminapi.ChannelState {
	return adminapi.ChannelState{Channel: channel, Model: model, Provider: "openai", Phase: phase, HealthScore: score,
		TrafficPercent: traffic, WindowRequests: requests, WindowFailures: failures, P95LatencyMillis: p95}
}

func ejected(channel string, score int, at time.Time) adminapi.ChannelState {
	s := state(channel, "gpt-4o", "Ejected", score, 0, 240, 52, 2900)
	s.Ejections = 1
	s.LastTransition = &adminapi.Transition{Time: at, Reason: "ErrorRateExceeded", Message: "error rate 21.7% (52/240) >= 18% over 120s"}
	return s
}

func ejection(channel string, at time.Time) adminapi.Event {
	return adminapi.Event{Time: at, Channel: channel, Model: "gpt-4o", From: "Healthy", To: "Ejected",
		Reason: "ErrorRateExceeded", Message: "error rate 21.7% (52/240) >= 18% over 120s", Actor: "rule"}
}

// The API server refuses loopback addresses in EndpointSlices, so the slice lists a documentation
// address (TEST-NET-1) and the controller's HTTP client under test dials the stand-in for it.
const testNetIP = "192.0.2.10"

func testNetClient() *http.Client {
	d := &net.Dialer{}
	return &http.Client{Timeout: time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, port, err := net.SplitHostPort(addr); err == nil && host == testNetIP {
				addr = net.JoinHostPort("127.0.0.1", port)
			}
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// endpointSlice lists a stand-in as a ready endpoint of the proxy Service's admin port.
func endpointSlice(t *testing.T, h *harness, s *standIn, pod string) {
	_, port, err := net.SplitHostPort(s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: h.ns, Name: "switchyard-proxy-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: DefaultProxyService}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{testNetIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: h.ns, Name: pod},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(DefaultAdminPortName), Port: ptr.To(int32(p)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if err := h.c.Create(context.Background(), slice); err != nil {
		t.Fatal(err)
	}
}

// TestLiveStatus: three replicas in mixed phases (two polled by URL, one found through the proxy
// Service's EndpointSlice) become the contract's status fields, replica counts and one Event per
// transition; nothing is written while nothing meaningful changes; unreachable replicas are a
// condition.
func TestLiveStatus(t *testing.T) {
	r1, r2, r3 := newStandIn(t, "proxy-0"), newStandIn(t, "proxy-1"), newStandIn(t, "proxy-2")
	h := startController(t, "live", func(o *Options) {
		o.AdminURLs = []string{r1.srv.URL, r2.srv.URL}
		o.ProxyService = DefaultProxyService
		o.HTTPClient = testNetClient()
	})
	endpointSlice(t, h, r3, "switchyard-proxy-2")
	ctx := context.Background()

	t1, t2 := testStart.Add(-30*time.Second), testStart.Add(-28*time.Second)
	stable := func(jitter int) {
		r1.set(
			state(h.id("openai-direct"), "gpt-4o", "Healthy", 97-jitter, 100, 100+jitter, 2, 1800),
			state(h.id("openai-direct"), "gpt-4o-mini", "Healthy", 99, 100, 50, 0, 900),
			state(h.id("azure-eastus"), "gpt-4o", "Healthy", 95+jitter, 100, 60, 1, 2000),
		)
		r2.set(
			state(h.id("openai-direct"), "gpt-4o", "Healthy", 92+jitter, 100, 80, 4, 2100),
			state(h.id("openai-direct"), "gpt-4o-mini", "Healthy", 98, 100, 40, 0, 950),
			ejected(h.id("azure-eastus"), 20, t1),
		)
		r3.set(
			state(h.id("openai-direct"), "gpt-4o", "Degraded", 45+jitter, 100, 120-jitter, 12, 2400),
			state(h.id("openai-direct"), "gpt-4o-mini", "Healthy", 97, 100, 45, 1, 1000),
			ejected(h.id("azure-eastus"), 15, t2),
		)
	}
	stable(0)
	r2.record(ejection(h.id("azure-eastus"), t1))
	r3.record(ejection(h.id("azure-eastus"), t2))
	h.apply(liveManifests)

	openai, azure, chat := &v1alpha1.ProviderChannel{}, &v1alpha1.ProviderChannel{}, &v1alpha1.RoutingPolicy{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(h.c.Get(ctx, h.key("openai-direct"), openai)).To(Succeed())
		g.Expect(openai.Status.Phase).To(Equal(v1alpha1.PhaseHealthy))
		// Weighted by each replica's traffic (210, 360 and 405 requests in their windows).
		g.Expect(openai.Status.HealthScore).To(Equal(ptr.To(int32(73))))
		g.Expect(openai.Status.TrafficPercent).To(Equal(ptr.To(int32(100))))
		g.Expect(openai.Status.Models).To(HaveLen(2))
		m := openai.Status.Models[0]
		g.Expect(m.Name).To(Equal("gpt-4o"))
		g.Expect(m.Phase).To(Equal(v1alpha1.PhaseHealthy))
		g.Expect(m.HealthScore).To(Equal(int32(73)))
		g.Expect(m.TrafficPercent).To(Equal(int32(100)))
		g.Expect(m.WindowRequests).To(Equal(int64(300)))
		g.Expect(m.ErrorRatePercent).To(Equal(int32(6))) // 18 of 300
		g.Expect(m.P95LatencyMillis).To(Equal(int64(2400)))
		g.Expect(m.Replicas).To(Equal(map[string]int32{"Healthy": 2, "Degraded": 1}))
		g.Expect(condition(openai.Status.Conditions, v1alpha1.ConditionAvailable).Status).To(Equal(metav1.ConditionTrue))
		reporting := condition(openai.Status.Conditions, ConditionProxiesReporting)
		g.Expect(reporting).NotTo(BeNil())
		g.Expect(reporting.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(reporting.Message).To(Equal("every proxy replica reports"))

		g.Expect(h.c.Get(ctx, h.key("azure-eastus"), azure)).To(Succeed())
		g.Expect(azure.Status.Phase).To(Equal(v1alpha1.PhaseEjected))
		// Ejected by replicas carrying 765 of the 975 requests; proxy-0 still sends its share.
		g.Expect(azure.Status.HealthScore).To(Equal(ptr.To(int32(34))))
		g.Expect(azure.Status.TrafficPercent).To(Equal(ptr.To(int32(21))))
		g.Expect(azure.Status.Replicas).To(Equal("2/3"))
		a := azure.Status.Models[0]
		g.Expect(a.Replicas).To(Equal(map[string]int32{"Healthy": 1, "Ejected": 2}))
		g.Expect(a.Ejections).To(Equal(int64(2)))
		g.Expect(a.Reason).To(Equal("ErrorRateExceeded"))
		g.Expect(a.Message).To(Equal("error rate 21.7% (52/240) >= 18% over 120s"))
		g.Expect(a.LastTransitionTime.Time).To(BeTemporally("==", t2))
		available := condition(azure.Status.Conditions, v1alpha1.ConditionAvailable)
		g.Expect(available.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(available.Reason).To(Equal(ReasonNotRoutable))

		g.Expect(h.c.Get(ctx, h.key("chat"), chat)).To(Succeed())
		g.Expect(chat.Status.Channels).To(Equal([]v1alpha1.PolicyChannelStatus{
			{Channel: "openai-direct", Model: "gpt-4o", Phase: v1alpha1.PhaseHealthy, HealthScore: 73, TrafficPercent: 100},
			{Channel: "azure-eastus", Model: "gpt-4o", Phase: v1alpha1.PhaseEjected, HealthScore: 34, TrafficPercent: 21},
		}))
		g.Expect(condition(chat.Status.Conditions, v1alpha1.ConditionAvailable).Status).To(Equal(metav1.ConditionTrue))
		degraded := condition(chat.Status.Conditions, v1alpha1.ConditionDegraded)
		g.Expect(degraded.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(degraded.Message).To(ContainSubstring("azure-eastus/gpt-4o is Ejected"))

		// Two replicas journaled the same ejection: one Event.
		evs := h.eventsWithReason(g, "azure-eastus", "ErrorRateExceeded")
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Type).To(Equal(corev1.EventTypeWarning))
		g.Expect(evs[0].Note).To(ContainSubstring("gpt-4o: Healthy -> Ejected: error rate 21.7% (52/240) >= 18% over 120s"))
	}).WithTimeout(20 * time.Second).Should(Succeed())

	// A stable system writes nothing: figures drift by less than a step for many polls.
	rv := map[string]string{"openai-direct": openai.ResourceVersion, "azure-eastus": azure.ResourceVersion, "chat": chat.ResourceVersion}
	for i := range 12 {
		stable(i % 3)
		time.Sleep(h.opts.PollInterval)
	}
	g := NewWithT(t)
	for name, want := range rv {
		var obj client.Object = &v1alpha1.ProviderChannel{}
		if name == "chat" {
			obj = &v1alpha1.RoutingPolicy{}
		}
		g.Expect(h.c.Get(ctx, h.key(name), obj)).To(Succeed())
		g.Expect(obj.GetResourceVersion()).To(Equal(want), "%s was written while nothing changed", name)
	}
	g.Expect(h.eventsWithReason(g, "azure-eastus", "ErrorRateExceeded")).To(HaveLen(1))

	// A phase change is written, and the third replica's report of the same ejection is no news.
	t3 := testStart.Add(-20 * time.Second)
	r1.set(
		state(h.id("openai-direct"), "gpt-4o", "Healthy", 97, 100, 100, 2, 1800),
		state(h.id("openai-direct"), "gpt-4o-mini", "Healthy", 99, 100, 50, 0, 900),
		ejected(h.id("azure-eastus"), 25, t3),
	)
	r1.record(ejection(h.id("azure-eastus"), t3))
	g.Eventually(func(g Gomega) {
		g.Expect(h.c.Get(ctx, h.key("azure-eastus"), azure)).To(Succeed())
		g.Expect(azure.Status.Models[0].Replicas).To(BeNil()) // all three agree: no count
		g.Expect(azure.Status.Replicas).To(BeEmpty())
		g.Expect(azure.Status.Models[0].LastTransitionTime.Time).To(BeTemporally("==", t3))
	}).WithTimeout(10 * time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(h.eventsWithReason(g, "azure-eastus", "ErrorRateExceeded")).To(HaveLen(1))
	}).WithTimeout(time.Second).Should(Succeed())

	// An unreachable replica is a condition; the others keep the status live.
	r2.setDown(true)
	g.Eventually(func(g Gomega) {
		g.Expect(h.c.Get(ctx, h.key("openai-direct"), openai)).To(Succeed())
		reporting := condition(openai.Status.Conditions, ConditionProxiesReporting)
		g.Expect(reporting.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(reporting.Reason).To(Equal(ReasonSomeUnreachable))
		g.Expect(reporting.Message).To(ContainSubstring("1 of 3 proxy replicas unreachable: " + r2.srv.URL))
		g.Expect(openai.Status.Models[0].Replicas).To(Equal(map[string]int32{"Healthy": 1, "Degraded": 1}))
		g.Expect(openai.Status.Models[0].Phase).To(Equal(v1alpha1.PhaseDegraded)) // most of the reporting traffic (405 of 615) sees it
		// The same on the controller's metrics, for the alert.
		g.Expect(promtestutil.ToFloat64(proxyReplicas.WithLabelValues(h.ns, "unreachable"))).To(Equal(1.0))
		g.Expect(promtestutil.ToFloat64(proxyReplicas.WithLabelValues(h.ns, "reporting"))).To(Equal(2.0))
	}).WithTimeout(10 * time.Second).Should(Succeed())

	// None reachable: the last data stays, marked as not live.
	r1.setDown(true)
	r3.setDown(true)
	g.Eventually(func(g Gomega) {
		g.Expect(h.c.Get(ctx, h.key("openai-direct"), openai)).To(Succeed())
		reporting := condition(openai.Status.Conditions, ConditionProxiesReporting)
		g.Expect(reporting.Reason).To(Equal(ReasonNoneReachable))
		g.Expect(reporting.Message).To(ContainSubstring("not live"))
		g.Expect(openai.Status.Models[0].Phase).To(Equal(v1alpha1.PhaseDegraded))
		g.Expect(openai.Status.Models[0].Replicas).To(Equal(map[string]int32{"Healthy": 1, "Degraded": 1}))
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

// TestDisabledOverride: patching spec.disabled (with a named field manager) updates the
// ConfigMap, shows Disabled at once while the proxies still report Healthy, and journals who did
// it, why and until when; disabledUntil ends the override by itself.
func TestDisabledOverride(t *testing.T) {
	r1 := newStandIn(t, "proxy-0")
	h := startController(t, "disabled", func(o *Options) { o.AdminURLs = []string{r1.srv.URL} })
	r1.set(state(h.id("openai-direct"), "gpt-4o", "Healthy", 97, 100, 100, 1, 1500))
	h.apply(`
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: openai-direct}
spec:
  provider: openai
  baseURL: https://api.openai.example/v1
  models: [{name: gpt-4o}]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: openai-direct}]
`)
	ctx := context.Background()
	g := NewWithT(t)
	pc := &v1alpha1.ProviderChannel{}
	phase := func(want v1alpha1.Phase) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			g.Expect(h.c.Get(ctx, h.key("openai-direct"), pc)).To(Succeed())
			g.Expect(pc.Status.Phase).To(Equal(want))
			g.Expect(pc.Status.Models).To(HaveLen(1))
			g.Expect(pc.Status.Models[0].Phase).To(Equal(want))
		}).WithTimeout(15 * time.Second).Should(Succeed())
	}
	patch := func(manager, body string) {
		t.Helper()
		obj := &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "openai-direct"}}
		g.Expect(h.c.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", []byte(body)), client.FieldOwner(manager))).To(Succeed())
	}
	publishedDisabled := func(g Gomega) bool {
		var tbl routing.Table
		g.Expect(json.Unmarshal([]byte(h.configMap(g).Data[TableKey]), &tbl)).To(Succeed())
		ch, ok := tbl.Channel(h.id("openai-direct"))
		g.Expect(ok).To(BeTrue())
		return ch.Disabled
	}
	phase(v1alpha1.PhaseHealthy)

	patch("kubectl-patch", `{"spec":{"disabled":true,"disabledReason":"INC-1234 provider incident"}}`)
	phase(v1alpha1.PhaseDisabled) // the proxy still reports Healthy
	g.Expect(pc.Status.Disabled).To(BeTrue())
	g.Expect(pc.Status.TrafficPercent).To(Equal(ptr.To(int32(0))))
	g.Expect(pc.Status.Models[0].Message).To(Equal("disabled by kubectl-patch: INC-1234 provider incident"))
	g.Eventually(func(g Gomega) {
		g.Expect(publishedDisabled(g)).To(BeTrue())
		evs := h.eventsWithReason(g, "openai-direct", ReasonDisabled)
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Note).To(ContainSubstring("disabled by kubectl-patch: INC-1234 provider incident"))
	}).WithTimeout(10 * time.Second).Should(Succeed())

	patch("argocd-controller", `{"spec":{"disabled":false,"disabledReason":null}}`)
	phase(v1alpha1.PhaseHealthy)
	g.Eventually(func(g Gomega) {
		g.Expect(publishedDisabled(g)).To(BeFalse())
		evs := h.eventsWithReason(g, "openai-direct", ReasonEnabled)
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Note).To(ContainSubstring("enabled by argocd-controller"))
	}).WithTimeout(10 * time.Second).Should(Succeed())

	until := h.clock.Now().Add(3 * time.Second).UTC().Format(time.RFC3339)
	patch("argocd-controller", `{"spec":{"disabled":true,"disabledReason":"maintenance","disabledUntil":"`+until+`"}}`)
	phase(v1alpha1.PhaseDisabled)
	g.Eventually(func(g Gomega) {
		evs := h.eventsWithReason(g, "openai-direct", ReasonDisabled)
		g.Expect(evs).To(HaveLen(2))
		notes := []string{evs[0].Note, evs[1].Note}
		g.Expect(notes).To(ContainElement(ContainSubstring("disabled by argocd-controller: maintenance (until " + until + ")")))
	}).WithTimeout(10 * time.Second).Should(Succeed())

	// At disabledUntil the controller looks again by itself and the status moves on; an Event says
	// the override ended, and that the controller clears the fields.
	h.clock.Step(5 * time.Second)
	phase(v1alpha1.PhaseHealthy)
	g.Eventually(func(g Gomega) {
		evs := h.eventsWithReason(g, "openai-direct", ReasonOverrideEnded)
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Type).To(Equal(corev1.EventTypeNormal))
		g.Expect(evs[0].Note).To(ContainSubstring("override ended at disabledUntil " + until + "; the controller clears spec.disabled, disabledUntil and disabledReason"))
		g.Expect(h.eventsWithReason(g, "openai-direct", ReasonEnabled)).To(HaveLen(1))
	}).WithTimeout(10 * time.Second).Should(Succeed())

	// The expired override is cleared from the spec, so that the on-call engineer's next
	// `kubectl patch … {"spec":{"disabled":true}}` is a change, and takes effect, instead of a
	// no-op against the old date while DISABLED reads true.
	g.Eventually(func(g Gomega) {
		g.Expect(h.c.Get(ctx, h.key("openai-direct"), pc)).To(Succeed())
		g.Expect(pc.Spec.Disabled).To(BeFalse())
		g.Expect(pc.Spec.DisabledUntil).To(BeNil())
		g.Expect(pc.Spec.DisabledReason).To(BeEmpty())
		g.Expect(pc.Status.Disabled).To(BeFalse())
	}).WithTimeout(10 * time.Second).Should(Succeed())
	patch("kubectl-patch", `{"spec":{"disabled":true}}`)
	phase(v1alpha1.PhaseDisabled)
	g.Expect(pc.Status.Disabled).To(BeTrue())
	g.Eventually(func(g Gomega) { g.Expect(publishedDisabled(g)).To(BeTrue()) }).WithTimeout(10 * time.Second).Should(Succeed())
	g.Expect(meta.FindStatusCondition(pc.Status.Conditions, ConditionOverrideApplied)).To(HaveField("Status", metav1.ConditionTrue))
}

// TestDisabledUntilInThePast: admission cannot read the clock, so a disabledUntil already past is
// accepted. The controller says so (a Warning Event and the OverrideApplied condition naming the
// time, the override not in effect) and erases nothing the operator wrote; a time ahead then
// takes effect.
func TestDisabledUntilInThePast(t *testing.T) {
	r1 := newStandIn(t, "proxy-0")
	h := startController(t, "inpast", func(o *Options) { o.AdminURLs = []string{r1.srv.URL} })
	r1.set(state(h.id("openai-direct"), "gpt-4o", "Healthy", 97, 100, 100, 1, 1500))
	h.apply(`
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: openai-direct}
spec:
  provider: openai
  baseURL: https://api.openai.example/v1
  models: [{name: gpt-4o}]
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: openai-direct}]
`)
	ctx := context.Background()
	g := NewWithT(t)
	pc := &v1alpha1.ProviderChannel{}
	get := func(g Gomega) {
		g.Expect(h.c.Get(ctx, h.key("openai-direct"), pc)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		get(g)
		g.Expect(pc.Status.Phase).To(Equal(v1alpha1.PhaseHealthy))
	}).WithTimeout(15 * time.Second).Should(Succeed())
	patch := func(body string) {
		t.Helper()
		obj := &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "openai-direct"}}
		g.Expect(h.c.Patch(ctx, obj, client.RawPatch("application/merge-patch+json", []byte(body)), client.FieldOwner("kubectl-patch"))).To(Succeed())
	}

	past := h.clock.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339)
	patch(`{"spec":{"disabled":true,"disabledReason":"INC-77","disabledUntil":"` + past + `"}}`)
	g.Eventually(func(g Gomega) {
		get(g)
		c := meta.FindStatusCondition(pc.Status.Conditions, ConditionOverrideApplied)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(ReasonDisabledUntilInPast))
		g.Expect(c.Message).To(ContainSubstring("spec.disabledUntil " + past + " had passed"))
		g.Expect(c.ObservedGeneration).To(Equal(pc.Generation))
		g.Expect(pc.Status.Disabled).To(BeFalse())
		g.Expect(pc.Status.Phase).To(Equal(v1alpha1.PhaseHealthy))
		evs := h.eventsWithReason(g, "openai-direct", ReasonDisabledUntilInPast)
		g.Expect(evs).To(HaveLen(1))
		g.Expect(evs[0].Type).To(Equal(corev1.EventTypeWarning))
		g.Expect(evs[0].Note).To(ContainSubstring(past))
	}).WithTimeout(15 * time.Second).Should(Succeed())
	// Nothing the operator wrote is erased (it was before: all three fields within 100 ms).
	g.Consistently(func(g Gomega) {
		get(g)
		g.Expect(pc.Spec.Disabled).To(BeTrue())
		g.Expect(pc.Spec.DisabledReason).To(Equal("INC-77"))
		g.Expect(pc.Spec.DisabledUntil).NotTo(BeNil())
		g.Expect(pc.Spec.DisabledUntil.UTC().Format(time.RFC3339)).To(Equal(past))
	}).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Expect(h.eventsWithReason(g, "openai-direct", ReasonDisabled)).To(BeEmpty())

	ahead := h.clock.Now().Add(30 * time.Minute).UTC().Format(time.RFC3339)
	patch(`{"spec":{"disabledUntil":"` + ahead + `"}}`)
	g.Eventually(func(g Gomega) {
		get(g)
		g.Expect(pc.Status.Phase).To(Equal(v1alpha1.PhaseDisabled))
		g.Expect(pc.Status.Disabled).To(BeTrue())
		c := meta.FindStatusCondition(pc.Status.Conditions, ConditionOverrideApplied)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("(until " + ahead + ")"))
		g.Expect(h.eventsWithReason(g, "openai-direct", ReasonDisabled)).To(HaveLen(1))
	}).WithTimeout(15 * time.Second).Should(Succeed())
}
