package failover

import (
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// RouteInputs is what BuildRoutes turns into routes.
type RouteInputs struct {
	// Table is the compiled routing table; the Models' Policy pointers point into it.
	Table *routing.Table
	// Budget returns a policy's retry budget, shared by its models. The proxy keeps a policy's
	// budget across reloads; nil gives every policy a new one (a replay run, a simulation).
	Budget func(p *routing.Policy) *Budget
}

// CompiledRoutes is the compiled table as the planner and the health engine see it.
type CompiledRoutes struct {
	// Models are the routed public models, in table order: policies oldest first, each policy's
	// models in its order. Compile gives a model to one policy only.
	Models []Model
	// Targets are the health engine's keys, one per model × candidate, in Models order, with the
	// policy's settings, its rollout's DryRun and the channel's operator override (Disabled).
	Targets []health.Target
}

// BuildRoutes is the one translation of a compiled table into per-model routes and health
// targets: the proxy configures its engine and planner with it, and so do replay and simulate,
// so a disabled channel or a DryRun policy is judged alike in all three. It is pure.
func BuildRoutes(in RouteInputs) CompiledRoutes {
	t := in.Table
	var out CompiledRoutes
	if t == nil {
		return out
	}
	channels := make(map[string]*routing.Channel, len(t.Channels))
	for i := range t.Channels {
		channels[t.Channels[i].ID()] = &t.Channels[i]
	}
	for i := range t.Policies {
		p := &t.Policies[i]
		if len(p.Models) == 0 {
			continue
		}
		strategy, _ := health.ParseStrategy(p.Strategy) // validated by Compile
		var b *Budget
		if in.Budget != nil {
			b = in.Budget(p)
		} else {
			b = NewBudget()
		}
		dryRun := p.Rollout != nil && p.Rollout.DryRun
		for _, model := range p.Models {
			m := Model{Name: model, Policy: p, Strategy: strategy, Budget: b}
			for _, pc := range p.Channels {
				ch := channels[pc.Channel]
				if ch == nil {
					continue
				}
				if _, ok := ch.Upstream(model); !ok {
					continue
				}
				m.Candidates = append(m.Candidates, health.Candidate{Channel: ch.ID(), Weight: pc.Weight})
				tg := health.Target{Key: health.Key{Channel: ch.ID(), Model: model}, Settings: p.Settings,
					Disabled: ch.Disabled, DisabledReason: ch.DisabledReason, DryRun: dryRun}
				if ch.DisabledUntil != nil {
					tg.DisabledUntil = *ch.DisabledUntil
				}
				out.Targets = append(out.Targets, tg)
			}
			out.Models = append(out.Models, m)
		}
	}
	return out
}
