package routing

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/provider/bedrock"
)

func cloudChannel(spec v1alpha1.ProviderChannelSpec) v1alpha1.ProviderChannel {
	if spec.Models == nil {
		spec.Models = []v1alpha1.ChannelModel{{Name: "claude-sonnet", UpstreamModel: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}}
	}
	return v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Name: "claude", Namespace: "llm"}, Spec: spec}
}

func serviceAccountJSON(t *testing.T, tokenURI string) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	b, _ := json.Marshal(map[string]string{"type": "service_account", "client_email": "sy@p.iam.gserviceaccount.com",
		"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "token_uri": tokenURI})
	return string(b)
}

// TestCompileCloudChannels: bedrock and vertex compile with region (and project), without a
// baseURL, their credentials read from the Secret in the adapter's form, and Claude's default
// capabilities.
func TestCompileCloudChannels(t *testing.T) {
	sa := serviceAccountJSON(t, "https://oauth2.example/token")
	in := Inputs{
		Channels: []v1alpha1.ProviderChannel{
			cloudChannel(v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderBedrock, Region: "us-east-1",
				CredentialsRef: &v1alpha1.SecretKeyRef{Name: "aws"}}),
			func() v1alpha1.ProviderChannel {
				c := cloudChannel(v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderVertex, Region: "us-east5", Project: "my-project",
					BaseURL: "https://psc.example/v1/", CredentialsRef: &v1alpha1.SecretKeyRef{Name: "gcp"},
					Models: []v1alpha1.ChannelModel{{Name: "claude-sonnet", UpstreamModel: "claude-sonnet-4-5@20250929"}}})
				c.Name = "claude-vertex"
				return c
			}(),
			func() v1alpha1.ProviderChannel {
				c := cloudChannel(v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderBedrock, Region: "eu-west-1"})
				c.Name = "claude-irsa" // no credentialsRef: the pod's identity
				return c
			}(),
		},
		Secrets: []corev1.Secret{
			{ObjectMeta: metav1.ObjectMeta{Name: "aws", Namespace: "llm"}, StringData: map[string]string{"accessKeyId": "AKIDTEST", "secretAccessKey": "leaky-secret"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "gcp", Namespace: "llm"}, StringData: map[string]string{"serviceAccountJSON": sa}},
		},
	}
	tbl, problems := Compile(in)
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	b, _ := json.Marshal(tbl)
	if strings.Contains(string(b), "leaky-secret") || strings.Contains(string(b), "PRIVATE KEY") {
		t.Fatalf("the serialised table carries credentials: %s", b)
	}
	bc, _ := tbl.Channel("llm/claude")
	if bc.Region != "us-east-1" || bc.BaseURL != "" || !bc.HasCredentials {
		t.Errorf("bedrock channel: %+v", bc)
	}
	if c, err := bedrock.ParseCredentials(tbl.Credentials["llm/claude"].Reveal()); err != nil || c.SecretAccessKey != "leaky-secret" {
		t.Errorf("bedrock credentials: %v", err)
	}
	if caps := bc.Models[0].Capabilities; caps != DefaultCapabilities(v1alpha1.ProviderAnthropic) || !caps.Prefill || caps.MaxOutputTokens != 4096 {
		t.Errorf("bedrock capabilities: %+v", caps)
	}
	vc, _ := tbl.Channel("llm/claude-vertex")
	if vc.Region != "us-east5" || vc.Project != "my-project" || vc.BaseURL != "https://psc.example/v1" || tbl.Credentials["llm/claude-vertex"].Reveal() != sa {
		t.Errorf("vertex channel: %+v", vc)
	}
	if caps := vc.Models[0].Capabilities; caps != DefaultCapabilities(v1alpha1.ProviderAnthropic) {
		t.Errorf("vertex capabilities: %+v", caps)
	}
	if ic, _ := tbl.Channel("llm/claude-irsa"); ic.HasCredentials {
		t.Errorf("a bedrock channel without credentialsRef has credentials: %+v", ic)
	}
}

// TestCompileCloudProblems: each problem of a bedrock or vertex channel names its field, and the
// channel stays out of the table.
func TestCompileCloudProblems(t *testing.T) {
	sa := serviceAccountJSON(t, "https://oauth2.example/token")
	aws := map[string]string{"accessKeyId": "AKIDTEST", "secretAccessKey": "leaky-secret"}
	for _, c := range []struct {
		name   string
		spec   v1alpha1.ProviderChannelSpec
		secret map[string]string
		reason string
		want   string
	}{
		{"bedrock without region", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderBedrock}, nil, ReasonInvalidSpec, "spec.region: required"},
		{"bedrock bad region", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderBedrock, Region: "evil.example/"}, nil, ReasonInvalidSpec, "spec.region"},
		{"bedrock with project", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderBedrock, Region: "us-east-1", Project: "my-project"}, nil, ReasonInvalidSpec, "spec.project"},
		{"bedrock with credentialsRef.key", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderBedrock, Region: "us-east-1",
			CredentialsRef: &v1alpha1.SecretKeyRef{Name: "creds", Key: "k"}}, aws, ReasonInvalidSpec, "spec.credentialsRef.key"},
		{"bedrock baseURL with credentials", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderBedrock, Region: "us-east-1",
			BaseURL: "https://leaky-user:leaky-pass@vpce.example"}, nil, ReasonInvalidSpec, "spec.baseURL"},
		{"bedrock Secret without secretAccessKey", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderBedrock, Region: "us-east-1",
			CredentialsRef: &v1alpha1.SecretKeyRef{Name: "creds"}}, map[string]string{"accessKeyId": "AKIDTEST"}, ReasonSecretKeyNotFound, `spec.credentialsRef: Secret creds has no key "secretAccessKey"`},
		{"bedrock Secret missing", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderBedrock, Region: "us-east-1",
			CredentialsRef: &v1alpha1.SecretKeyRef{Name: "nope"}}, aws, ReasonSecretNotFound, "spec.credentialsRef: Secret llm/nope not found"},
		{"vertex without project", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderVertex, Region: "us-east5"}, nil, ReasonInvalidSpec, "spec.project: required"},
		{"vertex without region", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderVertex, Project: "my-project"}, nil, ReasonInvalidSpec, "spec.region: required"},
		{"vertex bad project", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderVertex, Region: "us-east5", Project: "A/B"}, nil, ReasonInvalidSpec, "spec.project"},
		{"vertex baseURL with a query", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderVertex, Region: "us-east5", Project: "my-project",
			BaseURL: "https://psc.example/v1?key=leaky-key"}, nil, ReasonInvalidSpec, "spec.baseURL"},
		{"vertex Secret without the key", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderVertex, Region: "us-east5", Project: "my-project",
			CredentialsRef: &v1alpha1.SecretKeyRef{Name: "creds"}}, map[string]string{"other": sa}, ReasonSecretKeyNotFound, `spec.credentialsRef: Secret llm/creds has no key "serviceAccountJSON"`},
		{"vertex Secret under another key", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderVertex, Region: "us-east5", Project: "my-project",
			CredentialsRef: &v1alpha1.SecretKeyRef{Name: "creds", Key: "sa.json"}}, map[string]string{"serviceAccountJSON": sa}, ReasonSecretKeyNotFound, `has no key "sa.json"`},
		{"vertex Secret not a service account", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderVertex, Region: "us-east5", Project: "my-project",
			CredentialsRef: &v1alpha1.SecretKeyRef{Name: "creds"}}, map[string]string{"serviceAccountJSON": `{"type":"authorized_user","refresh_token":"leaky-secret"}`}, ReasonInvalidSpec, "spec.credentialsRef: Secret creds key \"serviceAccountJSON\" is a \"authorized_user\" credential"},
		{"vertex Secret not JSON", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderVertex, Region: "us-east5", Project: "my-project",
			CredentialsRef: &v1alpha1.SecretKeyRef{Name: "creds"}}, map[string]string{"serviceAccountJSON": "leaky-secret"}, ReasonInvalidSpec, "is not JSON"},
		{"openai without baseURL", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderOpenAI}, nil, ReasonInvalidSpec, "spec.baseURL: required"},
		{"anthropic with region", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderAnthropic, BaseURL: "https://api.example/v1", Region: "us-east-1"}, nil, ReasonInvalidSpec, "spec.region: only used by bedrock and vertex"},
		{"openai with project", v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderOpenAI, BaseURL: "https://api.example/v1", Project: "my-project"}, nil, ReasonInvalidSpec, "spec.project: only used by vertex"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := Inputs{Channels: []v1alpha1.ProviderChannel{cloudChannel(c.spec)}}
			if c.secret != nil {
				in.Secrets = []corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "llm"}, StringData: c.secret}}
			}
			tbl, problems := Compile(in)
			if len(problems) != 1 || problems[0].Reason != c.reason || !strings.Contains(problems[0].Message, c.want) {
				t.Fatalf("problems %v, want one %s naming %q", problems, c.reason, c.want)
			}
			for _, leak := range []string{"leaky-secret", "leaky-pass", "leaky-key", "PRIVATE KEY"} {
				if strings.Contains(problems[0].Message, leak) {
					t.Errorf("the message quotes %q: %s", leak, problems[0].Message)
				}
			}
			if len(tbl.Channels) != 0 {
				t.Errorf("the channel was compiled: %+v", tbl.Channels)
			}
		})
	}
}

// TestCompileCloudKeyOverride: a key override (standalone SWITCHYARD_KEY_*) of a bedrock or vertex
// channel must be credentials in the adapter's form, and the message never quotes it.
func TestCompileCloudKeyOverride(t *testing.T) {
	for _, c := range []struct {
		spec     v1alpha1.ProviderChannelSpec
		override string
		ok       bool
	}{
		{v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderBedrock, Region: "us-east-1"}, `{"accessKeyId":"AKID","secretAccessKey":"leaky-secret"}`, true},
		{v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderBedrock, Region: "us-east-1"}, "leaky-secret", false},
		{v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderVertex, Region: "us-east5", Project: "my-project"}, serviceAccountJSON(t, "https://oauth2.example/token"), true},
		{v1alpha1.ProviderChannelSpec{Provider: v1alpha1.ProviderVertex, Region: "us-east5", Project: "my-project"}, "leaky-secret", false},
	} {
		in := Inputs{Channels: []v1alpha1.ProviderChannel{cloudChannel(c.spec)}, KeyOverrides: map[string]string{"llm/claude": c.override}}
		tbl, problems := Compile(in)
		if c.ok != (len(problems) == 0) || !c.ok && (!strings.Contains(problems[0].Message, "credentials override") || strings.Contains(problems[0].Message, "leaky-secret")) {
			t.Errorf("%s override %.20q: problems %v", c.spec.Provider, c.override, problems)
		}
		if c.ok && tbl.Credentials["llm/claude"].Reveal() != c.override {
			t.Errorf("%s: the override is not the channel's credentials", c.spec.Provider)
		}
	}
}
