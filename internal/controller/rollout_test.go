package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
)

const rolloutKeyA, rolloutKeyB = "sk-rollout-a-5d1e", "sk-rollout-b-8c2f"

// rolloutManifests: two channels on mock providers, listed openai-direct first, and a policy
// with the given rollout.
func rolloutManifests(aURL, bURL, rollout string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: keys}
stringData: {a: %s, b: %s}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: openai-direct}
spec:
  provider: openai
  baseURL: %s/v1
  credentialsRef: {name: keys, key: a}
  models: [{name: gpt-4o}]
  failureDomain: {region: a}
---
apiVersion: switchyard.io/v1alpha1
kind: ProviderChannel
metadata: {name: azure-eastus}
spec:
  provider: openai
  baseURL: %s/v1
  credentialsRef: {name: keys, key: b}
  models: [{name: gpt-4o}]
  failureDomain: {region: b}
---
apiVersion: switchyard.io/v1alpha1
kind: RoutingPolicy
metadata: {name: chat}
spec:
  models: [gpt-4o]
  channels: [{name: openai-direct}, {name: azure-eastus}]
  strategy: Priority
  retry: {budgetPercent: 100}
  rollout: %s
`, rolloutKeyA, rolloutKeyB, aURL, bURL, rollout)
}

// TestDryRunJournalsWhileTrafficFlows: a RoutingPolicy in DryRun, served by a real proxy (fed
// from the ConfigMap, polled on its admin API) in front of two mock providers over real HTTP.
// openai-direct answers 503 to everything: the policy's rules would eject it, and the API
// server shows that as an Event with the DryRun prefix and as status.dryRun, while every request
// keeps going to openai-direct first and fails over to azure-eastus in listed order, and the
// channel itself stays Healthy. Then the policy goes to a 10% rollout, and status.rollout puts
// the two cohorts side by side.
func TestDryRunJournalsWhileTrafficFlows(t *testing.T) {
	var served atomic.Pointer[http.Handler]
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := served.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	t.Cleanup(admin.Close)
	h := startController(t, "rollout", func(o *Options) { o.AdminURLs = []string{admin.URL} })
	srv := startReader(t, h)
	adminHandler := srv.AdminHandler()
	served.Store(&adminHandler)
	api := httptest.NewServer(srv.Handler())
	t.Cleanup(api.Close)
	a := mockprovider.New(mockprovider.Options{Name: "a", APIKey: rolloutKeyA})
	b := mockprovider.New(mockprovider.Options{Name: "b", APIKey: rolloutKeyB})
	as, bs := httptest.NewServer(a), httptest.NewServer(b)
	t.Cleanup(func() { a.Close(); b.Close(); as.Close(); bs.Close() })
	a.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503})

	h.apply(rolloutManifests(as.URL, bs.URL, "{mode: DryRun}"))
	ctx := context.Background()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		tbl := h.publishedTable(g)
		pol, ok := tbl.Policy(h.ns, "chat")
		g.Expect(ok).To(BeTrue())
		g.Expect(pol.Rollout).NotTo(BeNil())
		g.Expect(pol.Rollout.DryRun).To(BeTrue())
		g.Expect(srv.ChannelsState().Config.Hash).To(Equal(tbl.Hash()))
	}).WithTimeout(20 * time.Second).Should(Succeed())

	post := func(id string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, api.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]}`))
		req.Header.Set("Content-Type", "application/json")
		if id != "" {
			req.Header.Set("X-Switchyard-Cohort", id)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for i := range 30 {
		resp := post("")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Switchyard-Attempts") != "2" ||
			resp.Header.Get("X-Switchyard-Channel") != h.id("azure-eastus") {
			t.Fatalf("request %d: %d by %s after %s attempts; want openai-direct, then azure-eastus", i, resp.StatusCode,
				resp.Header.Get("X-Switchyard-Channel"), resp.Header.Get("X-Switchyard-Attempts"))
		}
	}
	g.Expect(a.Requests("gpt-4o")).To(Equal(30), "every request tried openai-direct first")

	g.Eventually(func(g Gomega) {
		rp := &v1alpha1.RoutingPolicy{}
		g.Expect(h.c.Get(ctx, h.key("chat"), rp)).To(Succeed())
		var dry *v1alpha1.PolicyDryRunStatus
		for i := range rp.Status.DryRun {
			if rp.Status.DryRun[i].Channel == "openai-direct" && rp.Status.DryRun[i].Model == "gpt-4o" {
				dry = &rp.Status.DryRun[i]
			}
		}
		g.Expect(dry).NotTo(BeNil(), "status.dryRun: %+v", rp.Status.DryRun)
		g.Expect(dry.Phase).To(Equal(v1alpha1.PhaseEjected))
		g.Expect(dry.Reason).To(HavePrefix("DryRun"))
		for _, row := range rp.Status.Channels {
			if row.Channel == "openai-direct" {
				g.Expect(row.Phase).To(Equal(v1alpha1.PhaseHealthy), "the channel itself")
			}
		}
		var journaled bool
		for _, e := range h.events(g, "openai-direct") {
			if strings.HasPrefix(e.Reason, "DryRun") && strings.Contains(e.Note, "-> Ejected: would eject "+h.id("openai-direct")+" × gpt-4o") {
				g.Expect(e.Type).To(Equal(corev1.EventTypeNormal), "a would-be ejection is no warning")
				journaled = true
			}
		}
		g.Expect(journaled).To(BeTrue(), "no DryRun ejection Event on openai-direct")
	}).WithTimeout(20 * time.Second).Should(Succeed())
	// Still the listed order after the would-be ejection.
	if resp := post(""); resp.Header.Get("X-Switchyard-Attempts") != "2" {
		t.Fatalf("after the would-be ejection: %s attempts, want openai-direct first", resp.Header.Get("X-Switchyard-Attempts"))
	}

	// A 10% rollout: the policy cohort gets the ejection, the listed one keeps the listed order.
	h.apply(rolloutManifests(as.URL, bs.URL, "{percent: 10}"))
	g.Eventually(func(g Gomega) {
		tbl := h.publishedTable(g)
		pol, _ := tbl.Policy(h.ns, "chat")
		g.Expect(pol.Rollout).NotTo(BeNil())
		g.Expect(pol.Rollout.Percent).To(Equal(10))
		g.Expect(srv.ChannelsState().Config.Hash).To(Equal(tbl.Hash()))
	}).WithTimeout(20 * time.Second).Should(Succeed())
	var policy, listed int64
	for i := range 200 {
		resp := post(fmt.Sprintf("session-%d", i))
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		if resp.Header.Get("X-Switchyard-Attempts") == "2" {
			listed++
		} else {
			policy++
		}
	}
	// Counts that only creep reach status once a minute (rolloutRefresh): let that minute pass.
	h.clock.Step(rolloutRefresh)
	g.Eventually(func(g Gomega) {
		rp := &v1alpha1.RoutingPolicy{}
		g.Expect(h.c.Get(ctx, h.key("chat"), rp)).To(Succeed())
		g.Expect(rp.Status.DryRun).To(BeEmpty())
		ro := rp.Status.Rollout
		g.Expect(ro).NotTo(BeNil())
		g.Expect(ro.Percent).To(Equal(int32(10)))
		// The counts start again with the new rollout. The first requests of the policy cohort
		// may have met openai-direct before it was ejected (two attempts, like the listed order).
		g.Expect(ro.Policy.Requests + ro.Listed.Requests).To(Equal(policy + listed))
		g.Expect(ro.Policy.Requests).To(BeNumerically(">=", policy))
		g.Expect(ro.Policy.Requests - policy).To(BeNumerically("<=", 5))
		g.Expect(ro.Policy.SuccessRate).To(Equal("100.0"))
		g.Expect(ro.Listed.SuccessRate).To(Equal("100.0"))
		g.Expect(ro.Policy.MeanLatency).NotTo(BeEmpty())
		g.Expect(ro.Listed.MeanLatency).NotTo(BeEmpty())
	}).WithTimeout(20 * time.Second).Should(Succeed())
	t.Logf("10%% rollout over 200 sessions: %d straight to azure-eastus (policy cohort, openai-direct ejected), %d in listed order", policy, listed)
}
