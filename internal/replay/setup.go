package replay

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/failover"
	"github.com/switchyard-io/switchyard/internal/health"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// Setup is what a replay runs: for every public model, the policy that routes it, its candidate
// channels and its resolved health settings.
type Setup struct {
	Models []ModelRoute // sorted by model name
	// table is the compiled table the models come from: the failover planner reads the policies
	// (fallback and context-overflow chains, retry, panic routing) and channels (failure domains,
	// timeouts, residency) from it.
	table *routing.Table
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
	policy       *routing.Policy // in Setup.table
}

// LoadSetup reads RoutingPolicy manifests from policyPath and, optionally, ProviderChannel
// manifests from channelsPath (ProviderChannels found in the policy file count too), and resolves
// each policy exactly as the proxy does: scenario defaults first, then the policy's overrides.
//
// Without channel manifests every listed channel is taken to serve every model of its policy with
// weight 100 (or the policy's per-channel weight). With them, a channel serves the models it lists,
// has its own weight, and requireResidency filters as in the compiled table. Secrets, base URLs
// and fault injection do not matter to a replay of history and are ignored; an operator override
// (spec.disabled) keeps the channel out of rotation, as in the proxy.
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

// NewSetup resolves policies against channels (either may come from anywhere) with
// routing.Compile, the function the controller and the standalone proxy publish with: the same
// conflict rule (the older policy keeps a contested model; without timestamps, name order), the
// same candidates in the same order, the same residency filter and weights.
//
// Without channel manifests every listed channel is taken to serve every model of its policy with
// weight 100 (or the policy's per-channel weight): a stand-in channel is made for each. Secrets,
// base URLs and fault injection do not matter to a replay of history and are dropped before
// compiling. The routes and health targets come from failover.BuildRoutes, as in the proxy: a
// disabled channel (spec.disabled, until spec.disabledUntil) is out of rotation, and a DryRun
// policy's rules run on shadows that journal what they would do.
func NewSetup(policies []v1alpha1.RoutingPolicy, channels []v1alpha1.ProviderChannel) (*Setup, error) {
	if len(policies) == 0 {
		return nil, errors.New("no RoutingPolicy in --policy")
	}
	in := routing.Inputs{Policies: policies}
	if len(channels) > 0 {
		for _, pc := range channels {
			pc := *pc.DeepCopy()
			pc.Spec.CredentialsRef, pc.Spec.FaultInjection = nil, nil
			in.Channels = append(in.Channels, pc)
		}
	} else {
		var err error
		if in.Channels, err = standInChannels(policies); err != nil {
			return nil, err
		}
	}
	t, problems := routing.Compile(in)
	if blocking := routing.Blocking(problems); len(blocking) > 0 {
		msgs := make([]string, len(blocking))
		for i, p := range blocking {
			msgs[i] = p.String()
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	s := &Setup{table: t}
	for _, m := range failover.BuildRoutes(failover.RouteInputs{Table: t}).Models {
		p := m.Policy
		s.Models = append(s.Models, ModelRoute{Model: m.Name, Policy: qualified(p.Namespace, p.Name), Scenario: p.Scenario,
			Strategy: m.Strategy, Settings: p.Settings, Candidates: m.Candidates, MaxAttempts: p.Retry.MaxAttempts,
			PanicRouting: p.PanicRouting, policy: p})
	}
	sort.Slice(s.Models, func(i, j int) bool { return s.Models[i].Model < s.Models[j].Model })
	return s, nil
}

// standInChannels makes a channel for every one a policy lists, serving all of the policy's
// models (and those of every other policy that lists it), for a replay without channel manifests.
func standInChannels(policies []v1alpha1.RoutingPolicy) ([]v1alpha1.ProviderChannel, error) {
	byID := map[string]*v1alpha1.ProviderChannel{}
	var order []string
	for i := range policies {
		rp := &policies[i]
		if rp.Spec.ChannelSelector != nil {
			return nil, fmt.Errorf("RoutingPolicy %s: spec.channelSelector needs the ProviderChannel manifests (--channels)", qualified(rp.Namespace, rp.Name))
		}
		for _, ref := range rp.Spec.Channels {
			id := routing.ChannelID(rp.Namespace, ref.Name)
			pc := byID[id]
			if pc == nil {
				pc = &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: rp.Namespace, Name: ref.Name},
					Spec: v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderOpenAI, BaseURL: "http://replay.invalid/v1"}}
				byID[id] = pc
				order = append(order, id)
			}
			for _, m := range rp.Spec.Models {
				if !servesModel(pc, m) {
					pc.Spec.Models = append(pc.Spec.Models, v1alpha1.ChannelModel{Name: m})
				}
			}
		}
	}
	out := make([]v1alpha1.ProviderChannel, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	return out, nil
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
