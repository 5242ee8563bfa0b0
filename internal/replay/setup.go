package replay

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Setup is what a replay runs: for every public model, the policy that routes it, its candidate
// channels and its resolved health settings.
type Setup struct {
	Models []ModelRoute // sorted by model name
}

// ModelRoute is one model as a RoutingPolicy routes it.
type ModelRoute struct {
	Model        string
	Policy       string // namespace/name, or name
	Scenario     string
	Strategy     health.Strategy
	Settings     health.Settings
	Candidates   []health.Candidate // policy order
	MaxAttempts  int
	PanicRouting bool
}

// LoadSetup reads RoutingPolicy manifests from policyPath and, optionally, ProviderChannel
// manifests from channelsPath (ProviderChannels found in the policy file count too), and resolves
// each policy exactly as the proxy does: scenario defaults first, then the policy's overrides.
//
// Without channel manifests every listed channel is taken to serve every model of its policy with
// weight 100 (or the policy's per-channel weight). With them, a channel serves the models it lists,
// has its own weight, and requireResidency filters as in the compiled table. Secrets, base URLs
// and operator overrides (spec.disabled) do not matter to a replay of history and are ignored.
func LoadSetup(policyPath, channelsPath string) (*Setup, error) {
	in, err := routing.LoadManifests(policyPath)
	if err != nil {
		return nil, fmt.Errorf("failed to load --policy: %w", err)
	}
	if channelsPath != "" {
		ch, err := routing.LoadManifests(channelsPath)
		if err != nil {
			return nil, fmt.Errorf("failed to load --channels: %w", err)
		}
		in.Channels = append(in.Channels, ch.Channels...)
	}
	return NewSetup(in.Policies, in.Channels)
}

// NewSetup resolves policies against channels (either may come from anywhere).
func NewSetup(policies []v1alpha1.RoutingPolicy, channels []v1alpha1.ProviderChannel) (*Setup, error) {
	if len(policies) == 0 {
		return nil, errors.New("no RoutingPolicy in --policy")
	}
	byName := map[string]*v1alpha1.ProviderChannel{}
	for i := range channels {
		pc := &channels[i]
		k := qualified(pc.Namespace, pc.Name)
		if _, dup := byName[k]; dup {
			return nil, fmt.Errorf("ProviderChannel %s is defined twice", k)
		}
		byName[k] = pc
	}
	policies = slices.Clone(policies)
	sort.Slice(policies, func(i, j int) bool {
		return qualified(policies[i].Namespace, policies[i].Name) < qualified(policies[j].Namespace, policies[j].Name)
	})
	s := &Setup{}
	claimed := map[string]string{}
	for i := range policies {
		rp := &policies[i]
		name := qualified(rp.Namespace, rp.Name)
		eff, err := routing.ResolvePolicy(&rp.Spec)
		if err != nil {
			return nil, fmt.Errorf("RoutingPolicy %s: %w", name, err)
		}
		strategy, _ := health.ParseStrategy(eff.Strategy) // validated by ResolvePolicy
		refs, err := candidateRefs(rp, channels)
		if err != nil {
			return nil, fmt.Errorf("RoutingPolicy %s: %w", name, err)
		}
		if len(rp.Spec.Models) == 0 {
			return nil, fmt.Errorf("RoutingPolicy %s: spec.models: at least one model is required", name)
		}
		for _, m := range rp.Spec.Models {
			if other, ok := claimed[m]; ok {
				return nil, fmt.Errorf("RoutingPolicy %s: model %q is already routed by RoutingPolicy %s; one policy per model", name, m, other)
			}
			claimed[m] = name
			mr := ModelRoute{Model: m, Policy: name, Scenario: eff.Scenario, Strategy: strategy, Settings: eff.Settings,
				MaxAttempts: eff.Retry.MaxAttempts, PanicRouting: eff.PanicRouting}
			for _, ref := range refs {
				w := routing.DefaultWeight
				if pc, ok := byName[qualified(rp.Namespace, ref.Name)]; ok {
					if !servesModel(pc, m) {
						continue
					}
					if len(rp.Spec.RequireResidency) > 0 && !slices.Contains(rp.Spec.RequireResidency, pc.Spec.Residency) {
						continue
					}
					if pc.Spec.Weight > 0 {
						w = int(pc.Spec.Weight)
					}
				} else if len(channels) > 0 {
					return nil, fmt.Errorf("RoutingPolicy %s: ProviderChannel %s not found in the channel manifests", name, qualified(rp.Namespace, ref.Name))
				}
				if ref.Weight != nil {
					w = int(*ref.Weight)
				}
				mr.Candidates = append(mr.Candidates, health.Candidate{Channel: routing.ChannelID(rp.Namespace, ref.Name), Weight: w})
			}
			if len(mr.Candidates) == 0 {
				return nil, fmt.Errorf("RoutingPolicy %s: model %q is served by none of the policy's channels", name, m)
			}
			s.Models = append(s.Models, mr)
		}
	}
	sort.Slice(s.Models, func(i, j int) bool { return s.Models[i].Model < s.Models[j].Model })
	return s, nil
}

func candidateRefs(rp *v1alpha1.RoutingPolicy, channels []v1alpha1.ProviderChannel) ([]v1alpha1.ChannelRef, error) {
	spec := &rp.Spec
	if (len(spec.Channels) > 0) == (spec.ChannelSelector != nil) {
		return nil, errors.New("spec: exactly one of channels or channelSelector is required")
	}
	if spec.ChannelSelector == nil {
		seen := map[string]bool{}
		for _, r := range spec.Channels {
			if seen[r.Name] {
				return nil, fmt.Errorf("spec.channels: %s is listed twice", r.Name)
			}
			seen[r.Name] = true
		}
		return spec.Channels, nil
	}
	if len(channels) == 0 {
		return nil, errors.New("spec.channelSelector needs the ProviderChannel manifests (--channels)")
	}
	sel, err := metav1.LabelSelectorAsSelector(spec.ChannelSelector)
	if err != nil {
		return nil, fmt.Errorf("spec.channelSelector: %w", err)
	}
	var refs []v1alpha1.ChannelRef
	for i := range channels {
		if channels[i].Namespace == rp.Namespace && sel.Matches(labels.Set(channels[i].Labels)) {
			refs = append(refs, v1alpha1.ChannelRef{Name: channels[i].Name})
		}
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Name < refs[j].Name })
	if len(refs) == 0 {
		return nil, errors.New("spec.channelSelector selects no ProviderChannel")
	}
	return refs, nil
}

func servesModel(pc *v1alpha1.ProviderChannel, m string) bool {
	for _, cm := range pc.Spec.Models {
		if cm.Name == m {
			return true
		}
	}
	return false
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// describe is a one-line summary of a model's routing, for the report header.
func (m *ModelRoute) describe() string {
	names := make([]string, len(m.Candidates))
	for i, c := range m.Candidates {
		names[i] = fmt.Sprintf("%s (weight %d)", c.Channel, c.Weight)
	}
	return fmt.Sprintf("%s: policy %s, scenario %s, strategy %s, candidates %s", m.Model, m.Policy, m.Scenario, m.Strategy, strings.Join(names, ", "))
}
