package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
			reports: []replicaReport{{Replica: "a", Channels: []adminapi.ChannelState{
				state("c", "m", "Healthy", 97, 100, 240, 5, 1840)}}},
			want: modelAggregate{Phase: v1alpha1.PhaseHealthy, Replicas: map[string]int32{"Healthy": 1}, HealthScore: 97,
				TrafficPercent: 100, WindowRequests: 240, WindowFailures: 5, ErrorRatePercent: 2, P95LatencyMillis: 1840},
		},
		{
			name: "majority phase; lowest score and share; sums; worst p95",
			reports: []replicaReport{
				{Replica: "a", Channels: []adminapi.ChannelState{state("c", "m", "Healthy", 97, 100, 100, 0, 1000)}},
				{Replica: "b", Channels: []adminapi.ChannelState{state("c", "m", "Healthy", 90, 100, 100, 10, 1200)}},
				{Replica: "c", Channels: []adminapi.ChannelState{withTransition(state("c", "m", "RampingUp", 80, 15, 100, 20, 3000), 5, "ProbesPassed")}},
			},
			want: modelAggregate{Phase: v1alpha1.PhaseHealthy, Replicas: map[string]int32{"Healthy": 2, "RampingUp": 1}, HealthScore: 80,
				TrafficPercent: 15, WindowRequests: 300, WindowFailures: 30, ErrorRatePercent: 10, P95LatencyMillis: 3000},
		},
		{
			name: "a tie goes to the worse phase; its latest transition",
			reports: []replicaReport{
				{Replica: "a", Channels: []adminapi.ChannelState{withTransition(state("c", "m", "Ejected", 10, 0, 10, 9, 100), 1, "ConsecutiveFailures")}},
				{Replica: "b", Channels: []adminapi.ChannelState{withTransition(state("c", "m", "Ejected", 20, 0, 10, 8, 100), 3, "ErrorRateExceeded")}},
				{Replica: "c", Channels: []adminapi.ChannelState{withTransition(state("c", "m", "Healthy", 90, 100, 10, 0, 100), 9, "RampCompleted")}},
				{Replica: "d", Channels: []adminapi.ChannelState{state("c", "m", "Healthy", 95, 100, 10, 0, 100)}},
			},
			want: modelAggregate{Phase: v1alpha1.PhaseEjected, Replicas: map[string]int32{"Ejected": 2, "Healthy": 2}, HealthScore: 10,
				TrafficPercent: 0, WindowRequests: 40, WindowFailures: 17, ErrorRatePercent: 43, P95LatencyMillis: 100,
				LastTransition: &adminapi.Transition{Time: at(3), Reason: "ErrorRateExceeded", Message: "ErrorRateExceeded figures"}},
		},
		{
			name: "ejections and panic add up; a phase this version does not know is Unknown",
			reports: []replicaReport{
				{Replica: "a", Channels: []adminapi.ChannelState{{Channel: "c", Model: "m", Phase: "Sleeping", HealthScore: 150, TrafficPercent: -5, Ejections: 2, Panic: true}}},
				{Replica: "b", Channels: []adminapi.ChannelState{{Channel: "c", Model: "m", Phase: "Ejected", HealthScore: 5, Ejections: 1}}},
			},
			want: modelAggregate{Phase: v1alpha1.PhaseEjected, Replicas: map[string]int32{"Unknown": 1, "Ejected": 1}, HealthScore: 5,
				TrafficPercent: 0, Ejections: 3, Panic: true},
		},
	}
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
