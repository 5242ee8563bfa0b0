package routing

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite golden files")

func compileFiles(t *testing.T, files ...string) (*Table, []Problem) {
	t.Helper()
	var in Inputs
	for _, f := range files {
		one, err := LoadManifests(f)
		if err != nil {
			t.Fatal(err)
		}
		in.Channels = append(in.Channels, one.Channels...)
		in.Policies = append(in.Policies, one.Policies...)
		in.Secrets = append(in.Secrets, one.Secrets...)
	}
	return Compile(in)
}

func TestCompileSamplesGolden(t *testing.T) {
	for _, f := range []string{"chat-gpt4o.yaml", "batch-embeddings.yaml", "claude-sonnet.yaml"} {
		t.Run(f, func(t *testing.T) {
			tbl, problems := compileFiles(t, filepath.Join("..", "..", "config", "samples", f))
			if len(problems) > 0 {
				t.Fatalf("problems: %v", problems)
			}
			b, err := json.MarshalIndent(tbl, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			testutil.Golden(t, *update, strings.TrimSuffix(f, ".yaml")+".golden.json", append(b, '\n'))
			if bytes.Contains(b, []byte("placeholder")) {
				t.Error("the serialised table carries a provider key")
			}
			for name, s := range tbl.Credentials {
				if !strings.Contains(s.Reveal(), "placeholder") {
					t.Errorf("channel %s: key not resolved from its Secret", name)
				}
			}
		})
	}
}

func TestCompileIsOrderIndependent(t *testing.T) {
	in, err := LoadManifests(filepath.Join("..", "..", "config", "samples", "chat-gpt4o.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := Compile(in)
	rev := in
	rev.Channels = []v1alpha1.ProviderChannel{in.Channels[1], in.Channels[0]}
	rev.Policies = []v1alpha1.RoutingPolicy{in.Policies[1], in.Policies[0]}
	b, _ := Compile(rev)
	if a.Hash() != b.Hash() {
		t.Error("the same objects in another order compile to another table")
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := NewSecret("sk-live-123")
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, s, s, s)} {
		if strings.Contains(out, "sk-live") {
			t.Errorf("secret printed: %s", out)
		}
	}
	b, _ := json.Marshal(struct{ K Secret }{s})
	if strings.Contains(string(b), "sk-live") {
		t.Errorf("secret marshalled: %s", b)
	}
}

// channel is a valid openai ProviderChannel llm/name serving gpt-4o, changed by mod.
func channel(name string, mod func(*v1alpha1.ProviderChannelSpec)) v1alpha1.ProviderChannel {
	pc := v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "llm"}, Spec: v1alpha1.ProviderChannelSpec{
		Provider: v1alpha1.ProviderOpenAI, BaseURL: "https://api.example.com/v1",
		Models: []v1alpha1.ChannelModel{{Name: "gpt-4o"}},
	}}
	if mod != nil {
		mod(&pc.Spec)
	}
	return pc
}

func TestCompileProblems(t *testing.T) {
	policy := func(name string, models []string, channels ...string) v1alpha1.RoutingPolicy {
		rp := v1alpha1.RoutingPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "llm"}, Spec: v1alpha1.RoutingPolicySpec{Models: models}}
		for _, c := range channels {
			rp.Spec.Channels = append(rp.Spec.Channels, v1alpha1.ChannelRef{Name: c})
		}
		return rp
	}
	secret := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key", Namespace: "llm"}, Data: map[string][]byte{"apiKey": []byte("sk-1")}}
	// For spec.tls: a CA, a client certificate, and the key of another certificate.
	testCA := testutil.NewCA(t)
	testClientCrt, _ := testCA.Issue(t, "switchyard", true)
	_, testOtherKey := testCA.Issue(t, "other", true)

	tests := []struct {
		name       string
		in         Inputs
		wantReason string
		wantIn     string // the message names the object or the field
	}{
		{"missing channel", Inputs{Channels: []v1alpha1.ProviderChannel{channel("a", nil)}, Policies: []v1alpha1.RoutingPolicy{policy("p", []string{"gpt-4o"}, "a", "ghost")}},
			ReasonChannelNotFound, "llm/ghost"},
		{"missing secret", Inputs{Channels: []v1alpha1.ProviderChannel{channel("a", func(s *v1alpha1.ProviderChannelSpec) {
			s.CredentialsRef = &v1alpha1.SecretKeyRef{Name: "nope", Key: "apiKey"}
		})}}, ReasonSecretNotFound, "llm/nope"},
		{"missing secret key", Inputs{Secrets: []corev1.Secret{secret}, Channels: []v1alpha1.ProviderChannel{channel("a", func(s *v1alpha1.ProviderChannelSpec) {
			s.CredentialsRef = &v1alpha1.SecretKeyRef{Name: "key", Key: "token"}
		})}}, ReasonSecretKeyNotFound, `"token"`},
		{"model no channel serves", Inputs{Channels: []v1alpha1.ProviderChannel{channel("a", nil)}, Policies: []v1alpha1.RoutingPolicy{policy("p", []string{"claude-3"}, "a")}},
			ReasonModelNotServed, `"claude-3"`},
		{"two policies claim a model", Inputs{Channels: []v1alpha1.ProviderChannel{channel("a", nil)}, Policies: []v1alpha1.RoutingPolicy{policy("p1", []string{"gpt-4o"}, "a"), policy("p2", []string{"gpt-4o"}, "a")}},
			ReasonModelConflict, "llm/p1"},
		{"unknown provider", Inputs{Channels: []v1alpha1.ProviderChannel{channel("a", func(s *v1alpha1.ProviderChannelSpec) { s.Provider = "cohere" })}},
			ReasonInvalidSpec, `"cohere"`},
		{"output over context", Inputs{Channels: []v1alpha1.ProviderChannel{channel("a", func(s *v1alpha1.ProviderChannelSpec) {
			s.Provider = v1alpha1.ProviderAnthropic
			s.Models[0].Capabilities = &v1alpha1.ModelCapabilities{MaxOutputTokens: ptr[int32](300000)}
		})}}, ReasonInvalidSpec, "spec.models[0].capabilities.maxOutputTokens"},
		{"bad base URL", Inputs{Channels: []v1alpha1.ProviderChannel{channel("a", func(s *v1alpha1.ProviderChannelSpec) { s.BaseURL = "api.example.com" })}},
			ReasonInvalidSpec, "spec.baseURL"},
		{"residency leaves nothing", Inputs{Channels: []v1alpha1.ProviderChannel{channel("a", func(s *v1alpha1.ProviderChannelSpec) { s.Residency = "us" })},
			Policies: []v1alpha1.RoutingPolicy{func() v1alpha1.RoutingPolicy {
				p := policy("p", []string{"gpt-4o"}, "a")
				p.Spec.RequireResidency = []string{"kz"}
				return p
			}()}}, ReasonModelNotServed, "residency"},
		{"unknown fallback model", Inputs{Channels: []v1alpha1.ProviderChannel{channel("a", nil)}, Policies: []v1alpha1.RoutingPolicy{func() v1alpha1.RoutingPolicy {
			p := policy("p", []string{"gpt-4o"}, "a")
			p.Spec.FallbackModels = []string{"gpt-5"}
			return p
		}()}}, ReasonUnknownModel, `"gpt-5"`},
		{"the controller's own Secret, by label", Inputs{Secrets: []corev1.Secret{func() corev1.Secret {
			s := *secret.DeepCopy()
			s.Labels = map[string]string{InternalSecretLabel: "true"}
			return s
		}()}, Channels: []v1alpha1.ProviderChannel{channel("a", func(s *v1alpha1.ProviderChannelSpec) {
			s.CredentialsRef = &v1alpha1.SecretKeyRef{Name: "key", Key: "apiKey"}
		})}}, ReasonRefNotPermitted, "llm/key"},
		{"the controller's own Secret, by name", Inputs{Secrets: []corev1.Secret{secret}, ReservedSecrets: map[string]bool{"llm/key": true},
			Channels: []v1alpha1.ProviderChannel{channel("a", func(s *v1alpha1.ProviderChannelSpec) {
				s.CredentialsRef = &v1alpha1.SecretKeyRef{Name: "key", Key: "apiKey"}
			})}}, ReasonRefNotPermitted, "Switchyard's own credentials Secret"},
		{"fallback onto itself", Inputs{Channels: []v1alpha1.ProviderChannel{channel("a", nil)}, Policies: []v1alpha1.RoutingPolicy{func() v1alpha1.RoutingPolicy {
			p := policy("p", []string{"gpt-4o"}, "a")
			p.Spec.FallbackModels = []string{"gpt-4o"}
			return p
		}()}}, ReasonInvalidSpec, "routed by this policy itself"},
		{"the same channel declared twice", Inputs{Channels: []v1alpha1.ProviderChannel{channel("a", nil), channel("a", nil)}},
			ReasonDuplicateChannel, "llm/a"},
		{"tls on a plain http baseURL", Inputs{Channels: []v1alpha1.ProviderChannel{channel("a", func(s *v1alpha1.ProviderChannelSpec) {
			s.BaseURL = "http://127.0.0.1:8000/v1"
			s.TLS = &v1alpha1.ChannelTLS{CABundle: testCA.PEM}
		})}}, ReasonInvalidSpec, "spec.tls applies to an https:// baseURL only"},
		{"a CA bundle without a certificate", Inputs{Channels: []v1alpha1.ProviderChannel{channel("a", func(s *v1alpha1.ProviderChannelSpec) {
			s.TLS = &v1alpha1.ChannelTLS{CABundle: "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"}
		})}}, ReasonInvalidSpec, "spec.tls.caBundle"},
		{"a missing client certificate Secret", Inputs{Channels: []v1alpha1.ProviderChannel{channel("a", func(s *v1alpha1.ProviderChannelSpec) {
			s.TLS = &v1alpha1.ChannelTLS{ClientCertificateRef: &v1alpha1.SecretRef{Name: "mtls"}}
		})}}, ReasonSecretNotFound, "spec.tls.clientCertificateRef: Secret llm/mtls not found"},
		{"a client certificate Secret without tls.key", Inputs{Secrets: []corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "mtls", Namespace: "llm"},
			Data: map[string][]byte{"tls.crt": []byte(testClientCrt)}}},
			Channels: []v1alpha1.ProviderChannel{channel("a", func(s *v1alpha1.ProviderChannelSpec) {
				s.TLS = &v1alpha1.ChannelTLS{ClientCertificateRef: &v1alpha1.SecretRef{Name: "mtls"}}
			})}}, ReasonSecretKeyNotFound, "needs keys tls.crt and tls.key"},
		{"a client certificate with another's key", Inputs{Secrets: []corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "mtls", Namespace: "llm"},
			Data: map[string][]byte{"tls.crt": []byte(testClientCrt), "tls.key": []byte(testOtherKey)}}},
			Channels: []v1alpha1.ProviderChannel{channel("a", func(s *v1alpha1.ProviderChannelSpec) {
				s.TLS = &v1alpha1.ChannelTLS{ClientCertificateRef: &v1alpha1.SecretRef{Name: "mtls"}}
			})}}, ReasonInvalidSpec, "do not form a certificate and its key"},
		{"the controller's own Secret as a client certificate", Inputs{Secrets: []corev1.Secret{secret}, ReservedSecrets: map[string]bool{"llm/key": true},
			Channels: []v1alpha1.ProviderChannel{channel("a", func(s *v1alpha1.ProviderChannelSpec) {
				s.TLS = &v1alpha1.ChannelTLS{ClientCertificateRef: &v1alpha1.SecretRef{Name: "key"}}
			})}}, ReasonRefNotPermitted, "spec.tls.clientCertificateRef"},
		{"disabledReason without disabled", Inputs{Channels: []v1alpha1.ProviderChannel{channel("a", func(s *v1alpha1.ProviderChannelSpec) { s.DisabledReason = "x" })}},
			ReasonInvalidSpec, "disabledReason"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, problems := Compile(tt.in)
			if len(problems) == 0 {
				t.Fatal("no problem reported")
			}
			p := problems[0]
			if p.Reason != tt.wantReason || !strings.Contains(p.Message, tt.wantIn) {
				t.Errorf("got %s: %q; want reason %s mentioning %q", p.Reason, p.Message, tt.wantReason, tt.wantIn)
			}
			if p.Name == "" || p.Kind == "" {
				t.Errorf("problem does not name its object: %+v", p)
			}
		})
	}
}

func TestCompileResidencyAndOverrides(t *testing.T) {
	in := Inputs{
		Channels: []v1alpha1.ProviderChannel{
			{ObjectMeta: metav1.ObjectMeta{Name: "kz-1"}, Spec: v1alpha1.ProviderChannelSpec{Provider: "openai", BaseURL: "http://127.0.0.1:1/v1", Residency: "kz", Models: []v1alpha1.ChannelModel{{Name: "m"}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "us-1"}, Spec: v1alpha1.ProviderChannelSpec{Provider: "openai", BaseURL: "http://127.0.0.1:2/v1", Residency: "us", Models: []v1alpha1.ChannelModel{{Name: "m"}}}},
		},
		Policies: []v1alpha1.RoutingPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.RoutingPolicySpec{
			Models: []string{"m"}, RequireResidency: []string{"kz"},
			Channels: []v1alpha1.ChannelRef{{Name: "us-1"}, {Name: "kz-1", Weight: ptr(int32(7))}},
		}}},
		KeyOverrides: map[string]string{"us-1": "from-env"},
	}
	tbl, problems := Compile(in)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	got := tbl.Policies[0].Channels
	if len(got) != 1 || got[0].Channel != "kz-1" || got[0].Weight != 7 {
		t.Errorf("candidates = %+v, want only kz-1 with the policy's weight 7", got)
	}
	if tbl.Credentials["us-1"].Reveal() != "from-env" {
		t.Error("environment key override not applied")
	}
}

func TestWithOverridesReachesTheLastGoodTable(t *testing.T) {
	in, err := LoadManifests(filepath.Join("..", "..", "config", "samples", "chat-gpt4o.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	good, problems := Compile(in)
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	until := metav1.NewTime(metav1.Now().Add(3600e9).UTC().Truncate(1e9))
	for i := range in.Channels {
		if in.Channels[i].Name == "azure-eastus" {
			in.Channels[i].Spec.Disabled, in.Channels[i].Spec.DisabledReason, in.Channels[i].Spec.DisabledUntil = true, "INC-9", &until
		}
	}
	got := WithOverrides(good, in.Channels)
	ch, _ := got.Channel("azure-eastus")
	if !ch.Disabled || ch.DisabledReason != "INC-9" || ch.DisabledUntil == nil || !ch.DisabledUntil.Equal(until.Time) {
		t.Errorf("override not applied: %+v", ch)
	}
	if orig, _ := good.Channel("azure-eastus"); orig.Disabled {
		t.Error("WithOverrides changed the table it was given")
	}
	if got.Hash() == good.Hash() {
		t.Error("the override does not change the table's hash: the proxies would not reload")
	}
	if len(got.Credentials) != len(good.Credentials) {
		t.Error("credentials lost")
	}
}

// Channels are namespaced: two teams may each have a channel named "openai", and each policy routes
// to its own team's.
func TestTwoTeamsEachHaveAnOpenAIChannel(t *testing.T) {
	channel := func(ns, model string) v1alpha1.ProviderChannel {
		return v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "openai"}, Spec: v1alpha1.ProviderChannelSpec{
			Provider: v1alpha1.ProviderOpenAI, BaseURL: "https://" + ns + ".example/v1", Models: []v1alpha1.ChannelModel{{Name: model}},
			CredentialsRef: &v1alpha1.SecretKeyRef{Name: "key", Key: "apiKey"}}}
	}
	secret := func(ns, key string) corev1.Secret {
		return corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "key"}, Data: map[string][]byte{"apiKey": []byte(key)}}
	}
	policy := func(ns, model string) v1alpha1.RoutingPolicy {
		return v1alpha1.RoutingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"}, Spec: v1alpha1.RoutingPolicySpec{
			Models: []string{model}, Channels: []v1alpha1.ChannelRef{{Name: "openai"}}}}
	}
	tbl, problems := Compile(Inputs{
		Channels: []v1alpha1.ProviderChannel{channel("team-b", "m-b"), channel("team-a", "m-a")},
		Policies: []v1alpha1.RoutingPolicy{policy("team-a", "m-a"), policy("team-b", "m-b")},
		Secrets:  []corev1.Secret{secret("team-a", "sk-a"), secret("team-b", "sk-b")},
	})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if len(tbl.Channels) != 2 || tbl.Channels[0].ID() != "team-a/openai" || tbl.Channels[1].ID() != "team-b/openai" {
		t.Fatalf("channels: %+v", tbl.Channels)
	}
	for team, key := range map[string]string{"team-a": "sk-a", "team-b": "sk-b"} {
		if got := tbl.Credentials[team+"/openai"].Reveal(); got != key {
			t.Errorf("%s/openai has key %q, want %q", team, got, key)
		}
		p, ok := tbl.Policy(team, "chat")
		if !ok || len(p.Channels) != 1 || p.Channels[0].Channel != team+"/openai" {
			t.Errorf("%s/chat routes to %+v, want its own team's channel", team, p)
		}
	}
}

// TestCapabilitiesDefaults: unset capabilities take the provider's defaults, set ones win.
func TestCapabilitiesDefaults(t *testing.T) {
	anth := channel("claude", func(s *v1alpha1.ProviderChannelSpec) {
		s.Provider = v1alpha1.ProviderAnthropic
		s.Models = []v1alpha1.ChannelModel{
			{Name: "claude-sonnet"},
			{Name: "claude-haiku", Capabilities: &v1alpha1.ModelCapabilities{Vision: ptr(false), MaxOutputTokens: ptr[int32](64000)}},
		}
	})
	oai := channel("gpt", nil)
	table, problems := Compile(Inputs{Channels: []v1alpha1.ProviderChannel{anth, oai}})
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	claude, _ := table.Channel("llm/claude")
	gpt, _ := table.Channel("llm/gpt")
	for _, c := range []struct {
		ch    *Channel
		model string
		want  Capabilities
	}{
		{claude, "claude-sonnet", Capabilities{Prefill: true, ContextWindow: 200000, MaxOutputTokens: 4096, Vision: true, Tools: true}},
		{claude, "claude-haiku", Capabilities{Prefill: true, ContextWindow: 200000, MaxOutputTokens: 64000, Vision: false, Tools: true}},
		{gpt, "gpt-4o", Capabilities{Vision: true, Tools: true}},
	} {
		m, ok := c.ch.Model(c.model)
		if !ok {
			t.Fatalf("%s: no model %s", c.ch.Name, c.model)
		}
		if m.Capabilities != c.want {
			t.Errorf("%s/%s: capabilities %+v, want %+v", c.ch.Name, c.model, m.Capabilities, c.want)
		}
	}
}
