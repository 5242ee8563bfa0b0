package controller

import (
	"context"
	"maps"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/adminapi"
)

func TestAggregate(t *testing.T) {
	at := func(s int) time.Time { return testStart.Add(time.Duration(s) * time.Second) }
	withTransition := func(s adminapi.ChannelState, sec int, reason string) adminapi.ChannelState {
		s.LastTransition = &adminapi.Transition{Time: at(sec), Reason: reason, Message: reason + " figures"}
		return s
	}
	cases := []struct {
		name    string
		reports []replicaReport
		want    modelAggregate
	}{
		{
			name: "one replica",
			reports: []replicaReport{{Replica: "a", Channels: liveStates(
				state("c", "m", "Healthy", 97, 100, 240, 5, 1840))}},
			want: modelAggregate{Phase: v1alpha1.PhaseHealthy, Replicas: map[string]int32{"Healthy": 1}, HealthScore: 97,
				TrafficPercent: 100, WindowRequests: 240, WindowFailures: 5, ErrorRatePercent: 2, P95LatencyMillis: 1840},
		},
		{
			name: "the phase most traffic sees; score and share weighted by traffic; sums; worst p95",
			reports: []replicaReport{
				{Replica: "a", Channels: liveStates(state("c", "m", "Healthy", 97, 100, 100, 0, 1000))},
				{Replica: "b", Channels: liveStates(state("c", "m", "Healthy", 90, 100, 100, 10, 1200))},
				{Replica: "c", Channels: liveStates(withTransition(state("c", "m", "RampingUp", 80, 15, 100, 20, 3000), 5, "ProbesPassed"))},
			},
			want: modelAggregate{Phase: v1alpha1.PhaseHealthy, Replicas: map[string]int32{"Healthy": 2, "RampingUp": 1}, HealthScore: 89,
				TrafficPercent: 71, WindowRequests: 300, WindowFailures: 30, ErrorRatePercent: 10, P95LatencyMillis: 3000},
		},
		{
			name: "a tie goes to the worse phase; its latest transition",
			reports: []replicaReport{
				{Replica: "a", Channels: liveStates(withTransition(state("c", "m", "Ejected", 10, 0, 10, 9, 100), 1, "ConsecutiveFailures"))},
				{Replica: "b", Channels: liveStates(withTransition(state("c", "m", "Ejected", 20, 0, 10, 8, 100), 3, "ErrorRateExceeded"))},
				{Replica: "c", Channels: liveStates(withTransition(state("c", "m", "Healthy", 90, 100, 10, 0, 100), 9, "RampCompleted"))},
				{Replica: "d", Channels: liveStates(state("c", "m", "Healthy", 95, 100, 10, 0, 100))},
			},
			want: modelAggregate{Phase: v1alpha1.PhaseEjected, Replicas: map[string]int32{"Ejected": 2, "Healthy": 2}, HealthScore: 53,
				TrafficPercent: 50, WindowRequests: 40, WindowFailures: 17, ErrorRatePercent: 43, P95LatencyMillis: 100,
				LastTransition: &adminapi.Transition{Time: at(3), Reason: "ErrorRateExceeded", Message: "ErrorRateExceeded figures"}},
		},
		{
			name: "ejections and panic add up; a phase this version does not know is Unknown; idle replicas count heads",
			reports: []replicaReport{
				{Replica: "a", Channels: liveStates(adminapi.ChannelState{Channel: "c", Model: "m", Phase: "Sleeping", HealthScore: 150, TrafficPercent: -5, Ejections: 2, Panic: true})},
				{Replica: "b", Channels: liveStates(adminapi.ChannelState{Channel: "c", Model: "m", Phase: "Ejected", HealthScore: 5, Ejections: 1})},
			},
			want: modelAggregate{Phase: v1alpha1.PhaseEjected, Replicas: map[string]int32{"Unknown": 1, "Ejected": 1}, HealthScore: 52,
				TrafficPercent: 0, Ejections: 3, Panic: true},
		},
	}
	dry := func(phase string, sec int, reason string) adminapi.ChannelState {
		s := state("c", "m", "Healthy", 100, 100, 10, 0, 100)
		s.DryRun = &adminapi.DryRunState{Phase: phase}
		if reason != "" {
			s.DryRun.LastTransition = &adminapi.Transition{Time: at(sec), Reason: reason}
		}
		return s
	}
	cases = append(cases, struct {
		name    string
		reports []replicaReport
		want    modelAggregate
	}{
		name: "dry run: the would-be phase most replicas report, and its latest rule",
		reports: []replicaReport{
			{Replica: "a", Channels: liveStates(dry("Ejected", 1, "DryRunErrorRateExceeded"))},
			{Replica: "b", Channels: liveStates(dry("Ejected", 4, "DryRunConsecutiveFailures"))},
			{Replica: "c", Channels: liveStates(dry("Healthy", 9, "DryRunRampCompleted"))},
		},
		want: modelAggregate{Phase: v1alpha1.PhaseHealthy, Replicas: map[string]int32{"Healthy": 3}, HealthScore: 100, TrafficPercent: 100,
			WindowRequests: 30, P95LatencyMillis: 100, DryRunPhase: v1alpha1.PhaseEjected, DryRunReason: "DryRunConsecutiveFailures"},
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := aggregate(tc.reports)
			if diff := cmp.Diff(map[modelKey]modelAggregate{{"c", "m"}: tc.want}, got); diff != "" {
				t.Errorf("aggregate (-want +got):\n%s", diff)
			}
			// Order-independent.
			rev := make([]replicaReport, len(tc.reports))
			for i, r := range tc.reports {
				rev[len(rev)-1-i] = r
			}
			if diff := cmp.Diff(got, aggregate(rev)); diff != "" {
				t.Errorf("aggregate depends on replica order:\n%s", diff)
			}
		})
	}
	if got := aggregate(nil); len(got) != 0 {
		t.Errorf("aggregate(nil) = %v", got)
	}
}

// fleetOf is n replicas' reports of one channel×model (c/m) in phase, each replica also
// carrying other traffic (a key of its own with busy requests), which is its weight.
func fleetOf(n int, phase string, traffic, busy int, fleet *adminapi.FleetKeyState) []replicaReport {
	out := make([]replicaReport, n)
	for i := range out {
		s := state("c", "m", phase, 100, traffic, 0, 0, 100)
		if phase != "Healthy" {
			s.HealthScore = 10
		}
		s.Fleet = fleet
		other := state("c", "other-"+phase+strconv.Itoa(i), "Healthy", 100, 100, busy, 0, 100)
		out[i] = replicaReport{Replica: phase + strconv.Itoa(i), Channels: liveStates(s, other)}
	}
	return out
}

// TestAggregateByTraffic: the fleet's phase is the verdict the store holds, else the one most of
// the traffic sees; the score and share are what the traffic gets. The example first:
// one replica of 200 ejecting a channel must not read Healthy with TRAFFIC 0%.
func TestAggregateByTraffic(t *testing.T) {
	verdict := &adminapi.FleetKeyState{Phase: "Ejected", VerdictBy: "proxy-7", Replicas: map[string]int{"Ejected": 3}}
	noVerdict := &adminapi.FleetKeyState{Phase: "Healthy"}
	cases := []struct {
		name           string
		reports        []replicaReport
		phase          v1alpha1.Phase
		score, traffic int32
		replicas       map[string]int32
	}{
		{"1 of 200 ejected, equal traffic", append(fleetOf(199, "Healthy", 100, 50, nil), fleetOf(1, "Ejected", 0, 50, nil)...),
			v1alpha1.PhaseHealthy, 99, 99, map[string]int32{"Healthy": 199, "Ejected": 1}},
		{"the busy replica outweighs idle ones", append(fleetOf(3, "Healthy", 100, 1, nil), fleetOf(1, "Ejected", 0, 100, nil)...),
			v1alpha1.PhaseEjected, 12, 2, map[string]int32{"Healthy": 3, "Ejected": 1}},
		{"the verdict the store holds wins over the traffic's view", append(fleetOf(197, "Healthy", 100, 50, verdict), fleetOf(3, "Ejected", 0, 50, verdict)...),
			v1alpha1.PhaseEjected, 98, 98, map[string]int32{"Healthy": 197, "Ejected": 3}},
		{"no verdict held: the traffic decides", append(fleetOf(197, "Healthy", 100, 50, noVerdict), fleetOf(3, "Ejected", 0, 50, noVerdict)...),
			v1alpha1.PhaseHealthy, 98, 98, map[string]int32{"Healthy": 197, "Ejected": 3}},
		{"all agree", fleetOf(200, "Ejected", 0, 50, nil), v1alpha1.PhaseEjected, 10, 0, map[string]int32{"Ejected": 200}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := aggregate(tc.reports)[modelKey{"c", "m"}]
			if g.Phase != tc.phase || g.HealthScore != tc.score || g.TrafficPercent != tc.traffic || !maps.Equal(g.Replicas, tc.replicas) {
				t.Errorf("got %s score %d traffic %d replicas %v; want %s %d %d %v", g.Phase, g.HealthScore, g.TrafficPercent, g.Replicas,
					tc.phase, tc.score, tc.traffic, tc.replicas)
			}
		})
	}
}

func TestPhaseOrder(t *testing.T) {
	order := []v1alpha1.Phase{v1alpha1.PhaseHealthy, v1alpha1.PhaseUnknown, v1alpha1.PhaseDegraded, v1alpha1.PhaseRateLimited,
		v1alpha1.PhaseRampingUp, v1alpha1.PhaseProbing, v1alpha1.PhaseEjected, v1alpha1.PhaseDisabled}
	for i := 1; i < len(order); i++ {
		if got := worstPhase(order[i-1], order[i]); got != order[i] {
			t.Errorf("worstPhase(%s, %s) = %s", order[i-1], order[i], got)
		}
		if got := worstPhase(order[i], order[i-1]); got != order[i] {
			t.Errorf("worstPhase(%s, %s) = %s", order[i], order[i-1], got)
		}
	}
}

// fleetStatus is the status of channel llm/openai-direct (model gpt-4o) computed from the
// replicas' reports, over the status it had before.
func fleetStatus(pc *v1alpha1.ProviderChannel, reports []replicaReport) v1alpha1.ProviderChannelStatus {
	for i := range reports {
		for j := range reports[i].Channels {
			if reports[i].Channels[j].Model == "m" {
				reports[i].Channels[j].Channel, reports[i].Channels[j].Model = "llm/openai-direct", "gpt-4o"
			}
		}
	}
	infos := make([]replicaInfo, len(reports))
	for i, r := range reports {
		infos[i] = replicaInfo{Name: r.Replica, Reachable: true}
	}
	return channelStatus(channelInputs{Channel: pc, Now: testStart, Ready: readyTrue, ScoreStep: 5,
		Live: liveView{Polled: true, Replicas: infos, Models: aggregate(reports)}})
}

// TestFleetStatus: what `kubectl get pch` shows of a fleet. One replica of 200 ejecting the
// channel reads Healthy, TRAFFIC 99 and REPLICAS 199/200 (it read Healthy with 0% before); a
// fleet verdict reads Ejected with the replicas that adopted it so far; replicas that agree
// show no count, and a change of the replica set alone changes nothing in status.
func TestFleetStatus(t *testing.T) {
	pc := channel("gpt-4o")
	one := fleetStatus(pc, append(fleetOf(199, "Healthy", 100, 50, nil), fleetOf(1, "Ejected", 0, 50, nil)...))
	if one.Phase != v1alpha1.PhaseHealthy || *one.TrafficPercent != 99 || one.Replicas != "199/200" {
		t.Errorf("1 of 200 ejected: %s TRAFFIC %d REPLICAS %q; want Healthy 99 199/200", one.Phase, *one.TrafficPercent, one.Replicas)
	}
	verdict := &adminapi.FleetKeyState{Phase: "Ejected", VerdictBy: "proxy-7"}
	v := fleetStatus(pc, append(fleetOf(163, "Ejected", 0, 50, verdict), fleetOf(37, "Healthy", 100, 50, verdict)...))
	if v.Phase != v1alpha1.PhaseEjected || v.Replicas != "163/200" || !maps.Equal(v.Models[0].Replicas, map[string]int32{"Ejected": 163, "Healthy": 37}) {
		t.Errorf("a fleet verdict: %s REPLICAS %q models %v; want Ejected 163/200", v.Phase, v.Replicas, v.Models[0].Replicas)
	}

	busy := func(n int) []replicaReport {
		r := fleetOf(n, "Healthy", 100, 50, nil)
		for i := range r {
			r[i].Channels[0].WindowRequests = 10
		}
		return r
	}
	agree := fleetStatus(pc, busy(200))
	if agree.Replicas != "" || agree.Models[0].Replicas != nil || *agree.TrafficPercent != 100 {
		t.Errorf("200 agreeing replicas: REPLICAS %q, models[].replicas %v, TRAFFIC %d", agree.Replicas, agree.Models[0].Replicas, *agree.TrafficPercent)
	}
	pc.Status = agree
	// A rolling update moves the count by its surge (25% by default), not to a handful.
	for _, n := range []int{199, 150, 201, 250} {
		if next := fleetStatus(pc, busy(n)); !equality.Semantic.DeepEqual(agree, next) {
			t.Errorf("%d replicas instead of 200 changed the status:\n%s", n, cmp.Diff(agree, next))
		}
	}
}

// TestLiveViewFollowsDeltas: the poller's compact view of a replica, merged from deltas of the
// proxy's handler, is keepLive of the replica's full state after each change.
func TestLiveViewFollowsDeltas(t *testing.T) {
	var states []adminapi.ChannelState
	for i := range 20 {
		states = append(states, state("llm/c-"+strconv.Itoa(i), "m", "Healthy", 98, 100, 10, 0, 800))
	}
	h := &adminapi.ChannelsHandler{State: func() adminapi.ChannelsResponse {
		return adminapi.ChannelsResponse{Channels: slices.Clone(states)}
	}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := adminapi.Client{BaseURL: srv.URL}
	view := newLiveView()
	for step := range 4 {
		switch step {
		case 1:
			states[3].Phase, states[3].TrafficPercent = "Ejected", 0
			states[3].Fleet = &adminapi.FleetKeyState{Phase: "Ejected", VerdictBy: "proxy-1"}
		case 2:
			states = append(states[:5], states[6:]...)
		case 3:
			states = append(states, state("llm/a-new", "m", "RampingUp", 70, 15, 3, 0, 900))
		}
		resp, err := c.ChannelsSince(context.Background(), view.Cursor())
		if err != nil {
			t.Fatal(err)
		}
		if step > 0 && !resp.Delta {
			t.Fatalf("step %d: not a delta", step)
		}
		view.Apply(resp)
		want := liveStates(states...)
		slices.SortFunc(want, func(a, b liveState) int { return strings.Compare(a.Channel, b.Channel) })
		if diff := cmp.Diff(want, view.Channels(), cmp.AllowUnexported(liveState{}, rareState{})); diff != "" {
			t.Errorf("step %d (-want +got):\n%s", step, diff)
		}
	}
}
