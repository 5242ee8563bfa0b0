package routing

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
)

// fallbackInputs: team-a/chat routes gpt-4o and falls back (fallbackModels or
// contextOverflowModels, by overflow) to gpt-4o-mini, which targetNS/mini routes with accept as
// its acceptFallbackFrom. Each namespace has its own channel.
func fallbackInputs(targetNS string, overflow bool, accept ...string) Inputs {
	channel := func(ns, model string) v1alpha1.ProviderChannel {
		return v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "openai"}, Spec: v1alpha1.ProviderChannelSpec{
			Provider: v1alpha1.ProviderOpenAI, BaseURL: "https://" + ns + ".example/v1", Models: []v1alpha1.ChannelModel{{Name: model}}}}
	}
	source := v1alpha1.RoutingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "chat"}, Spec: v1alpha1.RoutingPolicySpec{
		Models: []string{"gpt-4o"}, Channels: []v1alpha1.ChannelRef{{Name: "openai"}}}}
	if overflow {
		source.Spec.ContextOverflowModels = []string{"gpt-4o-mini"}
	} else {
		source.Spec.FallbackModels = []string{"gpt-4o-mini"}
	}
	target := v1alpha1.RoutingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: targetNS, Name: "mini"}, Spec: v1alpha1.RoutingPolicySpec{
		Models: []string{"gpt-4o-mini"}, Channels: []v1alpha1.ChannelRef{{Name: "openai"}}, AcceptFallbackFrom: accept}}
	in := Inputs{Channels: []v1alpha1.ProviderChannel{channel("team-a", "gpt-4o")}, Policies: []v1alpha1.RoutingPolicy{source, target}}
	if targetNS == "team-a" {
		in.Channels[0].Spec.Models = append(in.Channels[0].Spec.Models, v1alpha1.ChannelModel{Name: "gpt-4o-mini"})
	} else {
		in.Channels = append(in.Channels, channel(targetNS, "gpt-4o-mini"))
	}
	return in
}

// TestCompileFallbackAcrossNamespacesNeedsConsent: a fallback or context-overflow model routed by
// a policy in another namespace is a FallbackNotAccepted problem on the source policy unless the
// target's acceptFallbackFrom lists the source's namespace or "*". The message names the field,
// the model, the target policy and what to add to it; the target itself has no problem.
func TestCompileFallbackAcrossNamespacesNeedsConsent(t *testing.T) {
	for _, tt := range []struct {
		name     string
		targetNS string
		overflow bool
		accept   []string
		refused  bool
	}{
		{"same namespace, no consent needed", "team-a", false, nil, false},
		{"other namespace, no acceptFallbackFrom", "team-b", false, nil, true},
		{"other namespace, accepts another team", "team-b", false, []string{"team-c"}, true},
		{"other namespace, accepts team-a", "team-b", false, []string{"team-c", "team-a"}, false},
		{"other namespace, accepts any", "team-b", false, []string{"*"}, false},
		{"context overflow, no acceptFallbackFrom", "team-b", true, nil, true},
		{"context overflow, accepts team-a", "team-b", true, []string{"team-a"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tbl, problems := Compile(fallbackInputs(tt.targetNS, tt.overflow, tt.accept...))
			if !tt.refused {
				if len(problems) > 0 {
					t.Fatalf("problems: %v", problems)
				}
				if p, _ := tbl.Policy(tt.targetNS, "mini"); len(tt.accept) > 0 && strings.Join(p.AcceptFallbackFrom, ",") != strings.Join(tt.accept, ",") {
					t.Errorf("the table carries acceptFallbackFrom %v, want %v", p.AcceptFallbackFrom, tt.accept)
				}
				return
			}
			if len(problems) != 1 {
				t.Fatalf("problems: %v, want exactly one, on team-a/chat", problems)
			}
			p := problems[0]
			if p.Kind != "RoutingPolicy" || p.Namespace != "team-a" || p.Name != "chat" || p.Reason != ReasonFallbackNotAccepted {
				t.Fatalf("problem on %s %s/%s reason %s, want RoutingPolicy team-a/chat %s", p.Kind, p.Namespace, p.Name, p.Reason, ReasonFallbackNotAccepted)
			}
			field := "spec.fallbackModels"
			if tt.overflow {
				field = "spec.contextOverflowModels"
			}
			for _, want := range []string{field, `"gpt-4o-mini"`, "RoutingPolicy team-b/mini", "acceptFallbackFrom: [team-a]"} {
				if !strings.Contains(p.Message, want) {
					t.Errorf("message %q does not mention %q", p.Message, want)
				}
			}
		})
	}
}

// TestFallbackConsentFollowsTheSourceNamespace: consent names a namespace, so it is checked
// against the namespace of the policy that falls back, whatever the policy's name, and a policy
// without a namespace (standalone manifests) is accepted across namespaces only by "*".
func TestFallbackConsentFollowsTheSourceNamespace(t *testing.T) {
	target := Policy{Namespace: "team-b", Name: "mini", AcceptFallbackFrom: []string{"team-a"}}
	for ns, want := range map[string]bool{"team-b": true, "team-a": true, "team-c": false, "": false, "team-a-2": false} {
		if got := target.AcceptsFallbackFrom(ns); got != want {
			t.Errorf("AcceptsFallbackFrom(%q) = %v, want %v", ns, got, want)
		}
	}
	if star := (Policy{Namespace: "team-b", AcceptFallbackFrom: []string{AnyNamespace}}); !star.AcceptsFallbackFrom("") {
		t.Error(`"*" does not accept a policy without a namespace`)
	}
	in := fallbackInputs("team-b", false)
	in.Policies[0].Namespace = ""
	in.Channels[0].Namespace = ""
	_, problems := Compile(in)
	if len(problems) != 1 || problems[0].Reason != ReasonFallbackNotAccepted || !strings.Contains(problems[0].Message, `acceptFallbackFrom: ["*"]`) {
		t.Errorf("problems: %v, want FallbackNotAccepted suggesting \"*\"", problems)
	}
}

// TestRevokedConsentNeverFreezesTheSource: when team-b withdraws acceptFallbackFrom, team-a's
// policy gets the problem but is not held back (one team's change must not freeze another's
// edits): it is published as compiled, its own models served, fallbackModels and all. The proxy
// skips the hop, since the target refuses.
func TestRevokedConsentNeverFreezesTheSource(t *testing.T) {
	last, problems := Compile(fallbackInputs("team-b", false, "team-a"))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	in := fallbackInputs("team-b", false)
	in.Policies[0].Spec.Retry = &v1alpha1.Retry{MaxAttempts: ptr(int32(2))} // team-a edits its policy meanwhile
	compiled, problems := Compile(in)
	if len(problems) != 1 || problems[0].HoldsBack() {
		t.Fatalf("problems %v: want one FallbackNotAccepted that does not hold back", problems)
	}
	out, held, extra := Isolate(compiled, problems, last)
	if len(extra) > 0 || len(held) != 0 {
		t.Fatalf("held %+v, extra %v; want nothing held", held, extra)
	}
	src, _ := out.Policy("team-a", "chat")
	dst, _ := out.Policy("team-b", "mini")
	if src == nil || dst == nil || len(src.FallbackModels) != 1 || src.Retry.MaxAttempts != 2 || dst.AcceptsFallbackFrom("team-a") {
		t.Fatalf("published source %+v, target %+v: want team-a's edit published, still falling back, and the target refusing", src, dst)
	}
}
