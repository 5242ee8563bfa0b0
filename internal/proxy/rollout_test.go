package proxy

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/mockprovider"
)

// TestRolloutTenPercent: with rollout.percent 10 and chan-a (listed first) failing, 10% ± 2% of
// 2,000 requests get the policy's failover and ejection (straight to chan-b once chan-a is
// ejected) and the rest keep following the listed order (chan-a, then chan-b), every one in the
// cohort its request id hashes to. The metric and the admin API count the cohorts apart, and a
// session's X-Switchyard-Cohort keeps all its requests in one cohort.
func TestRolloutTenPercent(t *testing.T) {
	r := newRigOpts(t, rigConfig{policy: "rollout: {percent: 10}\nretry: {budgetPercent: 100}"},
		func(o *Options) { o.RequestIDHeader = "X-Request-Id" })
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503})
	pol := r.srv.cfg.Load().models["gpt-4o"].Policy
	if pol.Rollout == nil || pol.Rollout.Percent != 10 {
		t.Fatalf("compiled rollout: %+v", pol.Rollout)
	}

	const n = 2000
	var policy, avoided, listedViaA int
	for i := range n {
		id := fmt.Sprintf("rollout-%04d", i)
		rep := r.post("/v1/chat/completions", chat("gpt-4o", false), "X-Request-Id", id)
		if rep.err != nil || rep.status != http.StatusOK {
			t.Fatalf("%s: %d %v %s", id, rep.status, rep.err, rep.body)
		}
		attempts := rep.header.Get("X-Switchyard-Attempts")
		if !strings.HasSuffix(rep.header.Get("X-Switchyard-Channel"), "chan-b") {
			t.Fatalf("%s answered by %s", id, rep.header.Get("X-Switchyard-Channel"))
		}
		switch failover.ChooseCohort(pol, id) {
		case failover.CohortPolicy:
			policy++
			if attempts == "1" {
				avoided++ // chan-a ejected: the policy went straight to chan-b
			}
		default:
			if attempts != "2" {
				t.Fatalf("%s (listed cohort) took %s attempts, want chan-a then chan-b", id, attempts)
			}
			listedViaA++
		}
	}
	if r.phase("chan-a", "gpt-4o") != "Ejected" {
		t.Fatalf("chan-a is %s, want Ejected by the failures both cohorts saw", r.phase("chan-a", "gpt-4o"))
	}
	t.Logf("%d of %d requests in the policy cohort (%.1f%%), %d of them straight to chan-b", policy, n, float64(policy)*100/n, avoided)
	if policy < n*8/100 || policy > n*12/100 {
		t.Errorf("%d of %d requests in the policy cohort, want 10%% ± 2%%", policy, n)
	}
	// chan-a trips after 5 failures in a row: only the policy requests before that can have tried it.
	if policy-avoided > 5 {
		t.Errorf("%d of %d policy requests still tried the ejected chan-a", policy-avoided, policy)
	}
	if got := r.A.Requests("gpt-4o"); got != listedViaA+policy-avoided {
		t.Errorf("chan-a saw %d requests, want %d listed + %d policy", got, listedViaA, policy-avoided)
	}
	for cohort, want := range map[string]int{"policy": policy, "listed": n - policy} {
		if got := testutil.ToFloat64(r.srv.metrics.Requests.WithLabelValues("", "gpt-4o", "success", cohort)); int(got) != want {
			t.Errorf("switchyard_requests_total{cohort=%q} = %v, want %d", cohort, got, want)
		}
	}
	ro := r.srv.ChannelsState().Rollouts
	if len(ro) != 1 || ro[0].Name != "/chat" || ro[0].Percent != 10 ||
		ro[0].Policy != (adminapi.CohortCounts{Requests: int64(policy), Successes: int64(policy)}) ||
		ro[0].Listed != (adminapi.CohortCounts{Requests: int64(n - policy), Successes: int64(n - policy)}) {
		t.Errorf("admin API rollouts: %+v", ro) // latency 0: the test clock does not move
	}

	// Sticky sessions: the cohort header, not the request id, decides.
	for _, session := range []string{"session-7", "session-42", "session-99"} {
		want := "2"
		if failover.ChooseCohort(pol, session) == failover.CohortPolicy {
			want = "1"
		}
		for i := range 10 {
			rep := r.post("/v1/chat/completions", chat("gpt-4o", false), "X-Request-Id", fmt.Sprintf("%s-%d", session, i), CohortHeader, session)
			if got := rep.header.Get("X-Switchyard-Attempts"); got != want {
				t.Fatalf("%s request %d: %s attempts, want %s (one cohort per session)", session, i, got, want)
			}
		}
	}
}

// TestDryRunRoutesListed: a DryRun policy journals the ejection its rules would make (a DryRun
// event, the would-be phase in the admin API and switchyard_channel_dryrun_phase) while every
// request keeps trying chan-a first and fails over to chan-b, as without health: chan-a is
// neither ejected nor counted in switchyard_ejections_total.
func TestDryRunRoutesListed(t *testing.T) {
	r := newRig(t, rigConfig{policy: "rollout: {mode: DryRun}\nretry: {budgetPercent: 100}"})
	r.A.SetBehavior("gpt-4o", mockprovider.Behavior{Mode: mockprovider.ModeStatus, Status: 503})
	for i := range 40 {
		rep := r.post("/v1/chat/completions", chat("gpt-4o", false))
		if rep.status != http.StatusOK || rep.header.Get("X-Switchyard-Attempts") != "2" {
			t.Fatalf("request %d: %d, %s attempts; want chan-a then chan-b", i, rep.status, rep.header.Get("X-Switchyard-Attempts"))
		}
	}
	r.step(0) // publish the gauges and the journal's metrics
	if got := r.A.Requests("gpt-4o"); got != 40 {
		t.Errorf("chan-a saw %d of 40 requests", got)
	}
	ca := r.channel("chan-a", "gpt-4o")
	dry, _ := ca["dryRun"].(map[string]any)
	if ca["phase"] != "Healthy" || dry == nil || dry["phase"] != "Ejected" {
		t.Fatalf("admin API: phase %v, dryRun %v", ca["phase"], dry)
	}
	var found bool
	for _, ev := range r.srv.EventsSince(0).Events {
		if ev.Channel == "chan-a" && ev.To == "Ejected" {
			if !strings.HasPrefix(ev.Reason, health.DryRunPrefix) || !strings.HasPrefix(ev.Message, "would eject chan-a × gpt-4o: ") {
				t.Errorf("an ejection journaled as %s: %s", ev.Reason, ev.Message)
			}
			found = true
		}
	}
	if !found {
		t.Error("no would-be ejection in the journal")
	}
	body := scrape(t, r)
	if !strings.Contains(body, `switchyard_channel_dryrun_phase{channel="chan-a",model="gpt-4o",namespace="",phase="Ejected"} 1`) {
		t.Errorf("no dry-run phase series for chan-a:\n%s", grepLines(body, "dryrun"))
	}
	if strings.Contains(body, `switchyard_ejections_total{channel="chan-a"`) {
		t.Errorf("a would-be ejection was counted as one:\n%s", grepLines(body, "ejections"))
	}
	if got := testutil.ToFloat64(r.srv.metrics.Requests.WithLabelValues("", "gpt-4o", "success", "listed")); got != 40 {
		t.Errorf("switchyard_requests_total{cohort=\"listed\"} = %v, want 40", got)
	}
}

func scrape(t *testing.T, r *rig) string {
	t.Helper()
	resp, err := http.Get(r.admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
