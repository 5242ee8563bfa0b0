package routing

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
)

// Two teams share a gateway; team B breaks its objects in turn while team A changes its own.
// Every compiled object is published as compiled; a broken one that was published before keeps its
// last good form, a new broken one is left out.
func TestIsolateKeepsOneTeamsMistakeFromTheOther(t *testing.T) {
	ch := func(ns, name, secret string) v1alpha1.ProviderChannel {
		pc := v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.ProviderChannelSpec{
			Provider: v1alpha1.ProviderOpenAI, BaseURL: "https://" + name + ".example/v1", Models: []v1alpha1.ChannelModel{{Name: "m-" + ns}}}}
		if secret != "" {
			pc.Spec.CredentialsRef = &v1alpha1.SecretKeyRef{Name: secret, Key: "apiKey"}
		}
		return pc
	}
	pol := func(ns, name string, channels ...string) v1alpha1.RoutingPolicy {
		rp := v1alpha1.RoutingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.RoutingPolicySpec{Models: []string{"m-" + ns}}}
		for _, c := range channels {
			rp.Spec.Channels = append(rp.Spec.Channels, v1alpha1.ChannelRef{Name: c})
		}
		return rp
	}
	secret := func(ns, name, key string) corev1.Secret {
		return corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"apiKey": []byte(key)}}
	}
	base := Inputs{
		Channels: []v1alpha1.ProviderChannel{ch("team-a", "a1", "ka"), ch("team-b", "b1", "kb")},
		Policies: []v1alpha1.RoutingPolicy{pol("team-a", "pa", "a1"), pol("team-b", "pb", "b1")},
		Secrets:  []corev1.Secret{secret("team-a", "ka", "sk-a-1"), secret("team-b", "kb", "sk-b-1")},
	}
	last, problems := Compile(base)
	if len(problems) > 0 {
		t.Fatal(problems)
	}

	// B's channel loses its Secret; B adds a policy for a model nobody serves. A rotates its key
	// and adds a channel to its policy.
	in := base
	in.Secrets = []corev1.Secret{secret("team-a", "ka", "sk-a-2")}
	in.Channels = []v1alpha1.ProviderChannel{ch("team-a", "a1", "ka"), ch("team-a", "a2", ""), ch("team-b", "b1", "kb")}
	bad := pol("team-b", "pb-new", "b1")
	bad.Spec.Models = []string{"m-new"}
	in.Policies = []v1alpha1.RoutingPolicy{pol("team-a", "pa", "a1", "a2"), pol("team-b", "pb", "b1"), bad}
	compiled, problems := Compile(in)
	if len(problems) == 0 {
		t.Fatal("team B's breakage went unnoticed")
	}
	out, held, _ := Isolate(compiled, problems, last)

	if k := out.Credentials["team-a/a1"]; k.Reveal() != "sk-a-2" {
		t.Errorf("team A's key rotation did not get through: %q", k.Reveal())
	}
	if _, ok := out.Channel("team-a/a2"); !ok {
		t.Error("team A's new channel did not get through")
	}
	if p, _ := out.PolicyFor("m-team-a"); p == nil || len(p.Channels) != 2 {
		t.Errorf("team A's policy edit did not get through: %+v", p)
	}
	b1, ok := out.Channel("team-b/b1")
	if !ok || out.Credentials["team-b/b1"].Reveal() != "sk-b-1" {
		t.Errorf("team B's existing channel does not keep its last good form: %+v %v", b1, ok)
	}
	if p, _ := out.PolicyFor("m-team-b"); p == nil || p.Name != "pb" {
		t.Errorf("team B's policy, broken only by its channel, does not keep serving: %+v", p)
	}
	if _, ok := out.PolicyFor("m-new"); ok {
		t.Error("a new broken policy was published")
	}
	want := map[string]Served{"ProviderChannel/team-b/b1": ServedLastGood, "RoutingPolicy/team-b/pb": ServedLastGood, "RoutingPolicy/team-b/pb-new": ServedLeftOut}
	for _, h := range held {
		k := h.Kind + "/" + h.Namespace + "/" + h.Name
		if want[k] != h.Served {
			t.Errorf("%s served %s, want %q", k, h.Served, want[k])
		}
		delete(want, k)
	}
	if len(want) > 0 {
		t.Errorf("not reported: %v", want)
	}

	// Nothing else changed: restoring the broken object gives back the last table, hash and all.
	in = base
	in.Secrets = base.Secrets[:1]
	compiled, problems = Compile(in)
	if out, _, _ := Isolate(compiled, problems, last); out.Hash() != last.Hash() {
		t.Errorf("hash %s, want the last table's %s", out.Hash(), last.Hash())
	}
	// With nothing published before, a broken object is left out and the rest still publishes.
	out, held, _ = Isolate(compiled, problems, nil)
	if _, ok := out.Channel("team-b/b1"); ok || len(out.Channels) != 1 || len(held) == 0 || held[0].Served != ServedLeftOut {
		t.Errorf("without a last table: %+v, %+v", out.Channels, held)
	}
}

// While team A's policy is broken it keeps its model: team B's newer policy for the same model is
// left out with a ModelConflict, and takes the model only once A's policy is gone.
func TestIsolateABrokenPolicyKeepsItsModel(t *testing.T) {
	channel := func(ns, name string) v1alpha1.ProviderChannel {
		return v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.ProviderChannelSpec{
			Provider: v1alpha1.ProviderOpenAI, BaseURL: "https://" + name + ".example/v1", Models: []v1alpha1.ChannelModel{{Name: "gpt-4o"}}}}
	}
	policy := func(ns, name string, channels ...string) v1alpha1.RoutingPolicy {
		rp := v1alpha1.RoutingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.RoutingPolicySpec{Models: []string{"gpt-4o"}}}
		for _, c := range channels {
			rp.Spec.Channels = append(rp.Spec.Channels, v1alpha1.ChannelRef{Name: c})
		}
		return rp
	}
	last, problems := Compile(Inputs{Channels: []v1alpha1.ProviderChannel{channel("team-a", "a"), channel("team-b", "b")},
		Policies: []v1alpha1.RoutingPolicy{policy("team-a", "chat", "a")}})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	// A's policy now names a missing channel; B adds a policy for gpt-4o.
	in := Inputs{Channels: []v1alpha1.ProviderChannel{channel("team-a", "a"), channel("team-b", "b")},
		Policies: []v1alpha1.RoutingPolicy{policy("team-a", "chat", "a", "ghost"), policy("team-b", "grab", "b")}}
	compiled, problems := Compile(in)
	out, held, more := Isolate(compiled, problems, last)
	if p, ok := out.PolicyFor("gpt-4o"); !ok || p.Name != "chat" {
		t.Fatalf("gpt-4o is routed by %+v, want A's chat in its last good form", p)
	}
	if len(more) != 1 || more[0].Name != "grab" || more[0].Reason != ReasonModelConflict || !strings.Contains(more[0].Message, "team-a/chat") {
		t.Errorf("the newcomer's problem: %+v", more)
	}
	left := false
	for _, h := range held {
		left = left || (h.Name == "grab" && h.Served == ServedLeftOut)
	}
	if !left {
		t.Errorf("grab not reported as left out: %+v", held)
	}
	// A deletes its policy: B's takes the model.
	in.Policies = in.Policies[1:]
	compiled, problems = Compile(in)
	out, _, more = Isolate(compiled, problems, last)
	if p, ok := out.PolicyFor("gpt-4o"); !ok || p.Name != "grab" || len(more) != 0 || len(problems) != 0 {
		t.Errorf("after A's policy is gone: %+v, %v, %v", p, more, problems)
	}
}
