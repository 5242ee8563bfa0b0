// Package routingtest builds routing inputs for the tests and benchmarks of several packages:
// the scale at which the published config must still fit the API server. It is test support
// only; nothing outside _test.go files imports it.
package routingtest

import (
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// The scale the proxy is benchmarked for (docs/benchmarks.md): 1,000 channels × 5 models is
// 5,000 channel×model keys; here every public model has its own policy, so 1,000 policies.
const (
	// ScaleTeams teams of ScaleGroup channels each.
	ScaleTeams    = 200
	ScaleChannels = ScaleTeams * ScaleGroup
	// ScaleGroup channels (one team's) serve the same ScaleModels models; each model is one policy
	// over the group's channels.
	ScaleGroup    = 5
	ScaleModels   = 5 // per channel
	ScalePolicies = ScaleTeams * ScaleModels
	// ScaleKeyLength is the length of each provider key (an OpenAI project key is about this long).
	ScaleKeyLength = 164
)

// scaleSite is one of a group's channels: what makes its names and URLs realistic in length.
type scaleSite struct {
	suffix, provider, region string
}

var scaleSites = [ScaleGroup]scaleSite{
	{"openai-direct", "openai", "us"},
	{"azure-eastus", "azure-openai", "eastus"},
	{"azure-westeurope", "azure-openai", "westeurope"},
	{"azure-swedencentral", "azure-openai", "swedencentral"},
	{"reseller-eu", "openai", "eu-west-1"},
}

var scaleUpstreams = [ScaleModels]string{"gpt-4o-2024-08-06", "gpt-4o-mini-2024-07-18", "gpt-4.1-2025-04-14", "o3-mini-2025-01-31", "text-embedding-3-large"}

// ScaleInputs returns ScaleChannels channels, ScalePolicies policies and the Secrets holding
// their keys, all in namespace ns.
func ScaleInputs(ns string) routing.Inputs { return Teams(ns, ScaleTeams) }

// Teams returns the objects of n teams in namespace ns: per team ScaleGroup channels, one policy
// per model (ScaleModels) and one Secret with the channels' keys. The same call gives the same
// objects, keys included; team i is the same whatever n.
func Teams(ns string, n int) routing.Inputs {
	rng := rand.New(rand.NewPCG(13, 7))
	var in routing.Inputs
	for g := range n {
		team := fmt.Sprintf("team-%03d", g)
		secret := corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: team + "-llm-keys", Namespace: ns},
			Data:       map[string][]byte{},
		}
		models := make([]string, ScaleModels)
		for i := range models {
			models[i] = fmt.Sprintf("%s-%s", team, scaleUpstreams[i])
		}
		var refs []v1alpha1.ChannelRef
		for c, site := range scaleSites {
			name := team + "-" + site.suffix
			base := "https://api.openai.com/v1"
			switch {
			case site.provider == "azure-openai":
				base = fmt.Sprintf("https://%s-%s.openai.azure.com/openai/v1", team, site.region)
			case c > 0:
				base = fmt.Sprintf("https://llm-gateway.%s.example-reseller.com/v1", site.region)
			}
			spec := v1alpha1.ProviderChannelSpec{
				Provider:       v1alpha1.Provider(site.provider),
				BaseURL:        base,
				CredentialsRef: &v1alpha1.SecretKeyRef{Name: secret.Name, Key: site.suffix},
				FailureDomain: &v1alpha1.FailureDomain{
					Region: site.region, Account: fmt.Sprintf("%s-%s-billing", team, site.provider), Egress: fmt.Sprintf("nat-%s", site.region),
				},
			}
			for i, m := range models {
				spec.Models = append(spec.Models, v1alpha1.ChannelModel{Name: m, UpstreamModel: scaleUpstreams[i]})
			}
			in.Channels = append(in.Channels, v1alpha1.ProviderChannel{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"team": team}},
				Spec:       spec,
			})
			secret.Data[site.suffix] = []byte(key(rng))
			refs = append(refs, v1alpha1.ChannelRef{Name: name})
		}
		in.Secrets = append(in.Secrets, secret)
		for i, m := range models {
			spec := v1alpha1.RoutingPolicySpec{Models: []string{m}, Channels: refs}
			if i == 0 {
				spec.FallbackModels = []string{models[1]} // gpt-4o falls back to its mini
			}
			in.Policies = append(in.Policies, v1alpha1.RoutingPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: m, Namespace: ns},
				Spec:       spec,
			})
		}
	}
	return in
}

const keyAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"

// key is a random provider key: random bytes do not compress, as real keys do not.
func key(rng *rand.Rand) string {
	b := []byte("sk-proj-")
	for len(b) < ScaleKeyLength {
		b = append(b, keyAlphabet[rng.IntN(len(keyAlphabet))])
	}
	return string(b)
}
