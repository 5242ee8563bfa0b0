package controller

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/adminapi"
)

// TestReplicaChurnWritesNothing: a rolling update of the proxies (one replica added, then an
// old one removed, six times over, through the admin Service's EndpointSlice) while every
// replica agrees that all 40 channels are Healthy writes no status at all: the replica count is
// in no field or message while the replicas agree. It counts the objects whose
// resourceVersion moved, so any write by anyone fails it.
func TestReplicaChurnWritesNothing(t *testing.T) {
	const channels, start, steps = 40, 4, 6
	h := startController(t, "churn", func(o *Options) {
		o.ProxyService = DefaultProxyService
		o.HTTPClient = testNetClient()
	})
	ctx := context.Background()
	var manifest strings.Builder
	var states []adminapi.ChannelState
	for i := range channels {
		fmt.Fprintf(&manifest, "apiVersion: switchyard.io/v1alpha1\nkind: ProviderChannel\nmetadata: {name: ch-%02d}\nspec:\n"+
			"  provider: openai\n  baseURL: https://api.openai.example/v1\n  models: [{name: gpt-4o}]\n---\n", i)
		states = append(states, state(h.id(fmt.Sprintf("ch-%02d", i)), "gpt-4o", "Healthy", 98, 100, 20, 0, 800))
	}
	manifest.WriteString("apiVersion: switchyard.io/v1alpha1\nkind: RoutingPolicy\nmetadata: {name: chat}\nspec:\n  models: [gpt-4o]\n  channels: [")
	for i := range channels {
		if i > 0 {
			manifest.WriteString(", ")
		}
		fmt.Fprintf(&manifest, "{name: ch-%02d}", i)
	}
	manifest.WriteString("]\n")

	var pool []*standIn
	for i := range start + steps {
		s := newStandIn(t, fmt.Sprintf("proxy-%d", i))
		s.set(states...)
		pool = append(pool, s)
	}
	serving := func(from, to int) { replicaSlice(t, h, pool[from:to]) }
	// polled waits until the poller has read s a few more times: it has acted on the slice.
	polled := func(s *standIn) {
		n := s.polls.Load()
		NewWithT(t).Eventually(s.polls.Load).WithTimeout(20 * time.Second).Should(BeNumerically(">=", n+3))
	}
	serving(0, start)
	h.apply(manifest.String())

	g := NewWithT(t)
	versions := func(g Gomega) map[string]string {
		out := map[string]string{}
		var pcs v1alpha1.ProviderChannelList
		g.Expect(h.c.List(ctx, &pcs, client.InNamespace(h.ns))).To(Succeed())
		for _, pc := range pcs.Items {
			out["pch/"+pc.Name] = pc.ResourceVersion
		}
		var rps v1alpha1.RoutingPolicyList
		g.Expect(h.c.List(ctx, &rps, client.InNamespace(h.ns))).To(Succeed())
		for _, rp := range rps.Items {
			out["rp/"+rp.Name] = rp.ResourceVersion
		}
		return out
	}
	// Settled: every channel Healthy from every replica, and a few polls without a write.
	var before map[string]string
	g.Eventually(func(g Gomega) {
		var pcs v1alpha1.ProviderChannelList
		g.Expect(h.c.List(ctx, &pcs, client.InNamespace(h.ns))).To(Succeed())
		g.Expect(pcs.Items).To(HaveLen(channels))
		for _, pc := range pcs.Items {
			g.Expect(pc.Status.Phase).To(Equal(v1alpha1.PhaseHealthy))
			r := condition(pc.Status.Conditions, ConditionProxiesReporting)
			g.Expect(r).NotTo(BeNil())
			g.Expect(r.Status).To(Equal(metav1.ConditionTrue))
		}
		before = versions(g)
		polled(pool[0])
		g.Expect(versions(g)).To(Equal(before))
	}).WithTimeout(time.Minute).Should(Succeed())

	began := time.Now()
	for i := range steps {
		serving(i, start+i+1) // surge: a new replica comes
		polled(pool[start+i])
		serving(i+1, start+i+1) // an old one goes
		polled(pool[start+i])
	}
	after := versions(g)
	var written []string
	for k, v := range before {
		if after[k] != v {
			written = append(written, k)
		}
	}
	t.Logf("rolling update of %d replicas in %s: %d of %d objects written", steps, time.Since(began).Round(time.Millisecond), len(written), len(before))
	if len(written) > 0 {
		t.Errorf("a change of the replica set alone wrote %v", written)
	}
	var pc v1alpha1.ProviderChannel
	g.Expect(h.c.Get(ctx, h.key("ch-00"), &pc)).To(Succeed())
	if pc.Status.Replicas != "" || pc.Status.Models[0].Replicas != nil {
		t.Errorf("agreeing replicas show a count: %q %v", pc.Status.Replicas, pc.Status.Models[0].Replicas)
	}

	// Disagreement is news: one replica ejecting a channel is written, with its count.
	pool[start+steps-1].set(append([]adminapi.ChannelState{ejected(h.id("ch-00"), 10, testStart)}, states[1:]...)...)
	g.Eventually(func(g Gomega) {
		g.Expect(h.c.Get(ctx, h.key("ch-00"), &pc)).To(Succeed())
		g.Expect(pc.Status.Replicas).To(Equal(fmt.Sprintf("%d/%d", start-1, start)))
		g.Expect(pc.Status.Models[0].Replicas).To(Equal(map[string]int32{"Healthy": start - 1, "Ejected": 1}))
	}).WithTimeout(20 * time.Second).Should(Succeed())
}

// replicaSlice makes the admin Service's EndpointSlices list exactly these stand-ins as ready
// endpoints, one slice each (a slice has one port set, and each stand-in listens on its own
// port; the API server refuses loopback addresses: see testNetIP). New ones are created before
// old ones go, as a rolling update does, so the set is never empty.
func replicaSlice(t *testing.T, h *harness, replicas []*standIn) {
	t.Helper()
	ctx := context.Background()
	var list discoveryv1.EndpointSliceList
	if err := h.c.List(ctx, &list, client.InNamespace(h.ns)); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, s := range replicas {
		name := "switchyard-proxy-" + s.replica
		want[name] = true
		if slices.ContainsFunc(list.Items, func(e discoveryv1.EndpointSlice) bool { return e.Name == name }) {
			continue
		}
		_, port, err := net.SplitHostPort(s.srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name,
				Labels: map[string]string{discoveryv1.LabelServiceName: DefaultProxyService}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{testNetIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: h.ns, Name: s.replica}}},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To(DefaultAdminPortName), Port: ptr.To(int32(p)), Protocol: ptr.To(corev1.ProtocolTCP)}},
		}
		if err := h.c.Create(ctx, slice); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range list.Items {
		if !want[e.Name] {
			if err := h.c.Delete(ctx, &e); err != nil {
				t.Fatal(err)
			}
		}
	}
}
