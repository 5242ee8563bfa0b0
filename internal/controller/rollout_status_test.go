package controller

import (
	"testing"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/adminapi"
)

// TestAggregateRollouts: replicas' cohort sums add up per policy, and status shows the rate
// (rounded down, so 99.96% is not "100.0") and the mean latency from the sums.
func TestAggregateRollouts(t *testing.T) {
	reports := []replicaReport{
		{Replica: "p-0", Rollouts: []adminapi.RolloutState{{Name: "llm/chat", Percent: 10,
			Policy: adminapi.CohortCounts{Requests: 100, Successes: 99, LatencyNanos: 100 * 800e6},
			Listed: adminapi.CohortCounts{Requests: 900, Successes: 850, LatencyNanos: 900 * 1200e6}}}},
		{Replica: "p-1", Rollouts: []adminapi.RolloutState{{Name: "llm/chat", Percent: 10,
			Policy: adminapi.CohortCounts{Requests: 100, Successes: 100, LatencyNanos: 100 * 600e6},
			Listed: adminapi.CohortCounts{Requests: 1100, Successes: 1099, LatencyNanos: 1100 * 1000e6}}}},
	}
	got := aggregateRollouts(reports)["llm/chat"]
	p, l := cohortStatus(got.Policy), cohortStatus(got.Listed)
	if p.Requests != 200 || p.SuccessRate != "99.5" || p.MeanLatency != "700ms" {
		t.Errorf("policy cohort: %+v", p)
	}
	if l.Requests != 2000 || l.SuccessRate != "97.4" || l.MeanLatency != "1.09s" {
		t.Errorf("listed cohort: %+v", l)
	}
	if s := cohortStatus(adminapi.CohortCounts{Requests: 10000, Successes: 9996}); s.SuccessRate != "99.9" {
		t.Errorf("99.96%% shows as %s", s.SuccessRate)
	}
	if s := cohortStatus(adminapi.CohortCounts{}); s.SuccessRate != "" || s.MeanLatency != "" {
		t.Errorf("no requests: %+v", s)
	}
}

// TestRolloutsChanged: a new rate or a tenth more requests is worth a status write at once;
// counts that creep wait for the refresh; a dry-run phase that moves concerns every rollout.
func TestRolloutsChanged(t *testing.T) {
	view := func(req, ok int64, dry string) liveView {
		return liveView{
			Rollouts: map[string]rolloutAggregate{"llm/chat": {Percent: 10, Policy: adminapi.CohortCounts{Requests: req, Successes: ok}}},
			Models:   map[modelKey]modelAggregate{{"llm/a", "gpt-4o"}: {DryRunPhase: v1alpha1.Phase(dry)}},
		}
	}
	for _, tc := range []struct {
		name               string
		prev, next         liveView
		significant, minor int
	}{
		{"unchanged", view(1000, 1000, ""), view(1000, 1000, ""), 0, 0},
		{"creeping", view(1000, 1000, ""), view(1050, 1050, ""), 0, 1},
		{"a tenth more", view(1000, 1000, ""), view(1120, 1120, ""), 1, 0},
		{"the rate moved", view(1000, 1000, ""), view(1001, 990, ""), 1, 0},
		{"a dry-run phase moved", view(1000, 1000, "Healthy"), view(1000, 1000, "Ejected"), 1, 0},
		{"the rollout went", view(1000, 1000, ""), liveView{}, 1, 0},
	} {
		s, m := rolloutsChanged(tc.prev, tc.next)
		if len(s) != tc.significant || len(m) != tc.minor {
			t.Errorf("%s: significant %v, minor %v", tc.name, s, m)
		}
	}
}
