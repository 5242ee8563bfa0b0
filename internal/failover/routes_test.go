package failover

import (
	"reflect"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// TestBuildRoutes: candidates are the policy's channels that serve the model, in policy order
// with the policy's weights; every candidate is a health target with the policy's settings, the
// rollout's DryRun and the channel's operator override; a policy's models share one budget.
func TestBuildRoutes(t *testing.T) {
	until := t0.Add(time.Hour)
	set := health.DefaultSettings("chat")
	strict := health.DefaultSettings("batch")
	table := &routing.Table{
		Channels: []routing.Channel{
			{Namespace: "team", Name: "a", Models: []routing.ChannelModel{{Name: "gpt-4o"}, {Name: "gpt-4o-mini"}}},
			{Namespace: "team", Name: "b", Models: []routing.ChannelModel{{Name: "gpt-4o"}},
				Disabled: true, DisabledReason: "maintenance", DisabledUntil: &until},
			{Namespace: "team", Name: "c", Models: []routing.ChannelModel{{Name: "gpt-4o-mini"}}},
		},
		Policies: []routing.Policy{
			{Namespace: "team", Name: "chat", Models: []string{"gpt-4o", "gpt-4o-mini"}, Strategy: "Priority", Settings: set,
				Channels: []routing.PolicyChannel{{Channel: "team/b", Weight: 30}, {Channel: "team/a", Weight: 70}, {Channel: "team/c", Weight: 10}, {Channel: "team/gone", Weight: 5}}},
			{Namespace: "team", Name: "shadow", Models: []string{"o3"}, Strategy: "HealthScore", Settings: strict,
				Rollout: &routing.Rollout{DryRun: true, Percent: 100}, Channels: []routing.PolicyChannel{{Channel: "team/a", Weight: 100}}},
			{Namespace: "team", Name: "empty"},
		},
	}
	table.Channels[0].Models = append(table.Channels[0].Models, routing.ChannelModel{Name: "o3"})
	var asked []string
	shared := NewBudget()
	got := BuildRoutes(RouteInputs{Table: table, Budget: func(p *routing.Policy) *Budget {
		asked = append(asked, p.Name)
		return shared
	}})

	type model struct {
		name, policy string
		strategy     health.Strategy
		cands        []health.Candidate
	}
	var models []model
	for _, m := range got.Models {
		models = append(models, model{m.Name, m.Policy.Name, m.Strategy, m.Candidates})
		if m.Policy != &table.Policies[0] && m.Policy != &table.Policies[1] {
			t.Errorf("%s: Policy does not point into the table", m.Name)
		}
		if m.Budget != shared {
			t.Errorf("%s: not the budget Budget returned", m.Name)
		}
	}
	wantModels := []model{
		{"gpt-4o", "chat", health.StrategyPriority, []health.Candidate{{Channel: "team/b", Weight: 30}, {Channel: "team/a", Weight: 70}}},
		{"gpt-4o-mini", "chat", health.StrategyPriority, []health.Candidate{{Channel: "team/a", Weight: 70}, {Channel: "team/c", Weight: 10}}},
		{"o3", "shadow", health.StrategyHealthScore, []health.Candidate{{Channel: "team/a", Weight: 100}}},
	}
	if !reflect.DeepEqual(models, wantModels) {
		t.Errorf("models\n got %+v\nwant %+v", models, wantModels)
	}
	if want := []string{"chat", "shadow"}; !reflect.DeepEqual(asked, want) {
		t.Errorf("Budget asked for %v, want %v (once per policy with models)", asked, want)
	}

	wantTargets := []health.Target{
		{Key: health.Key{Channel: "team/b", Model: "gpt-4o"}, Settings: set, Disabled: true, DisabledReason: "maintenance", DisabledUntil: until},
		{Key: health.Key{Channel: "team/a", Model: "gpt-4o"}, Settings: set},
		{Key: health.Key{Channel: "team/a", Model: "gpt-4o-mini"}, Settings: set},
		{Key: health.Key{Channel: "team/c", Model: "gpt-4o-mini"}, Settings: set},
		{Key: health.Key{Channel: "team/a", Model: "o3"}, Settings: strict, DryRun: true},
	}
	if !reflect.DeepEqual(got.Targets, wantTargets) {
		t.Errorf("targets\n got %+v\nwant %+v", got.Targets, wantTargets)
	}
}

// TestBuildRoutesOwnBudgets: without Budget every policy gets a new budget, shared by its models.
func TestBuildRoutesOwnBudgets(t *testing.T) {
	table := &routing.Table{
		Channels: []routing.Channel{{Name: "a", Models: []routing.ChannelModel{{Name: "m1"}, {Name: "m2"}, {Name: "m3"}}}},
		Policies: []routing.Policy{
			{Name: "p", Models: []string{"m1", "m2"}, Strategy: "Priority", Channels: []routing.PolicyChannel{{Channel: "a", Weight: 100}}},
			{Name: "q", Models: []string{"m3"}, Strategy: "Priority", Channels: []routing.PolicyChannel{{Channel: "a", Weight: 100}}},
		},
	}
	got := BuildRoutes(RouteInputs{Table: table}).Models
	if len(got) != 3 || got[0].Budget == nil || got[0].Budget != got[1].Budget || got[2].Budget == got[0].Budget {
		t.Fatalf("budgets %p %p %p: want one per policy", got[0].Budget, got[1].Budget, got[2].Budget)
	}
	if r := BuildRoutes(RouteInputs{}); r.Models != nil || r.Targets != nil {
		t.Errorf("a nil table: %+v", r)
	}
}
