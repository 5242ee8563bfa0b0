package routing

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
)

func baseURLChannel(provider v1alpha1.Provider, baseURL string) Inputs {
	return Inputs{Channels: []v1alpha1.ProviderChannel{{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "llm"},
		Spec: v1alpha1.ProviderChannelSpec{
			Provider: provider, BaseURL: baseURL,
			Models: []v1alpha1.ChannelModel{{Name: "gpt-4o"}},
		},
	}}}
}

// A baseURL with credentials, a query or fragment, or no host is refused with a message that names
// the field and shows the URL as scheme://host/path: never the userinfo, never the query (which can
// carry a key too, as in ?key=...). The refused channel stays out of the published table.
func TestCompileRefusesBadBaseURLs(t *testing.T) {
	tests := []struct {
		name     string
		provider v1alpha1.Provider
		baseURL  string
		want     []string // substrings of the message
		secrets  []string // never in the message or the table
	}{
		{"user and password", v1alpha1.ProviderOpenAI, "https://leaky-user:leaky-pass@api.example.com/v1",
			[]string{"spec.baseURL", "must not carry credentials", `("https://api.example.com/v1")`, "spec.credentialsRef"}, []string{"leaky-user", "leaky-pass", "@"}},
		{"user only", v1alpha1.ProviderOpenAI, "https://leaky-token@api.example.com/v1",
			[]string{"spec.baseURL", "must not carry credentials", `("https://api.example.com/v1")`}, []string{"leaky-token", "@"}},
		{"empty userinfo", v1alpha1.ProviderOpenAI, "https://@api.example.com/v1",
			[]string{"spec.baseURL", "must not carry credentials"}, []string{"@"}},
		{"user and password, plain http", v1alpha1.ProviderOpenAI, "http://leaky-user:leaky-pass@127.0.0.1:8000/v1",
			[]string{"spec.baseURL", "must not carry credentials", `("http://127.0.0.1:8000/v1")`}, []string{"leaky-user", "leaky-pass"}},
		// Values that do not parse are quoted redacted too: the old message printed them raw.
		{"password with a bad escape", v1alpha1.ProviderOpenAI, "https://leaky-user:leaky%zzpass@api.example.com/v1",
			[]string{"spec.baseURL", "must not carry credentials", `("https://api.example.com/v1")`}, []string{"leaky-user", "leaky", "%zz"}},
		{"password with a slash", v1alpha1.ProviderOpenAI, "https://leaky-user:leaky/pass@api.example.com/v1",
			[]string{"spec.baseURL", "must not carry credentials", `("https://api.example.com/v1")`}, []string{"leaky-user", "leaky", "pass"}},
		{"password with a question mark", v1alpha1.ProviderOpenAI, "https://leaky-user:leaky?pass@api.example.com/v1",
			[]string{"spec.baseURL", "must not carry credentials", `("https://api.example.com/v1")`}, []string{"leaky-user", "leaky", "pass"}},
		{"password with a hash", v1alpha1.ProviderOpenAI, "https://leaky-user:leaky#pass@api.example.com/v1",
			[]string{"spec.baseURL", "must not carry credentials", `("https://api.example.com/v1")`}, []string{"leaky-user", "leaky", "pass"}},
		{"credentials without a scheme", v1alpha1.ProviderOpenAI, "leaky-user:leaky-pass@api.example.com/v1",
			[]string{"spec.baseURL", "is not an http:// or https:// URL"}, []string{"leaky-user", "leaky-pass"}},
		{"azure api-version query", v1alpha1.ProviderAzureOpenAI, "https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21",
			[]string{"spec.baseURL", "must not carry a query string or fragment", `("https://x.openai.azure.com/openai/deployments/d")`, "takes no api-version", "/openai/v1"}, []string{"?", "2024-10-21"}},
		{"api-version query on an openai channel", v1alpha1.ProviderOpenAI, "https://gw.example.com/v1?api-version=2024-10-21",
			[]string{"spec.baseURL", "must not carry a query string", "api-version"}, []string{"?", "2024-10-21"}},
		{"key in the query", v1alpha1.ProviderOpenAI, "https://generativelanguage.googleapis.com/v1beta/openai?key=leaky-key",
			[]string{"spec.baseURL", "must not carry a query string or fragment", `("https://generativelanguage.googleapis.com/v1beta/openai")`}, []string{"leaky-key", "?"}},
		{"empty query", v1alpha1.ProviderOpenAI, "https://api.example.com/v1?",
			[]string{"spec.baseURL", "must not carry a query string or fragment"}, []string{"?\""}},
		{"fragment", v1alpha1.ProviderOpenAI, "https://api.example.com/v1#leaky-frag",
			[]string{"spec.baseURL", "must not carry a query string or fragment", `("https://api.example.com/v1")`}, []string{"leaky-frag", "#"}},
		{"empty fragment", v1alpha1.ProviderOpenAI, "https://api.example.com/v1#",
			[]string{"spec.baseURL", "must not carry a query string or fragment"}, []string{"#"}},
		{"no host", v1alpha1.ProviderOpenAI, "https://",
			[]string{"spec.baseURL", `"https://" has no host`}, nil},
		{"no host, a path", v1alpha1.ProviderOpenAI, "https:///v1",
			[]string{"spec.baseURL", `"https:///v1" has no host`}, nil},
		{"a port but no host", v1alpha1.ProviderOpenAI, "http://:8080/v1",
			[]string{"spec.baseURL", "has no host"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl, problems := Compile(baseURLChannel(tt.provider, tt.baseURL))
			if len(problems) != 1 {
				t.Fatalf("got %d problems, want 1: %v", len(problems), problems)
			}
			p := problems[0]
			if p.Reason != ReasonInvalidSpec || p.Kind != "ProviderChannel" || p.Name != "a" {
				t.Errorf("problem %+v, want ProviderChannel a %s", p, ReasonInvalidSpec)
			}
			t.Logf("%s", p)
			for _, w := range tt.want {
				if !strings.Contains(p.Message, w) {
					t.Errorf("message does not contain %q: %s", w, p.Message)
				}
			}
			b, err := json.Marshal(tbl)
			if err != nil {
				t.Fatal(err)
			}
			if len(tbl.Channels) != 0 {
				t.Errorf("the refused channel is in the table: %s", b)
			}
			for _, s := range tt.secrets {
				if strings.Contains(p.String(), s) {
					t.Errorf("message contains %q: %s", s, p)
				}
				if strings.Contains(string(b), s) && s != "?" && s != "#" && s != "@" {
					t.Errorf("table contains %q: %s", s, b)
				}
			}
		})
	}
}

func TestCompileAcceptsPlainBaseURLs(t *testing.T) {
	for _, c := range []struct {
		provider v1alpha1.Provider
		baseURL  string
	}{
		{v1alpha1.ProviderOpenAI, "https://api.openai.com/v1"},
		{v1alpha1.ProviderOpenAI, "https://api.openai.com/v1/"},
		{v1alpha1.ProviderOpenAI, "http://127.0.0.1:9101/v1"},
		{v1alpha1.ProviderOpenAI, "http://[::1]:8000/v1"},
		{v1alpha1.ProviderOpenAI, "http://embeddings.ml-serving.svc.cluster.local:8000/v1"},
		{v1alpha1.ProviderAzureOpenAI, "https://x.openai.azure.com/openai/deployments/d"},
		{v1alpha1.ProviderAzureOpenAI, "https://example-resource.openai.azure.com/openai/v1"},
	} {
		tbl, problems := Compile(baseURLChannel(c.provider, c.baseURL))
		if len(problems) > 0 {
			t.Errorf("%s: %v", c.baseURL, problems)
			continue
		}
		if ch, ok := tbl.Channel("llm/a"); !ok || ch.BaseURL != strings.TrimRight(c.baseURL, "/") {
			t.Errorf("%s: compiled to %q", c.baseURL, ch.BaseURL)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.example.com/v1":                   "https://api.example.com/v1",
		"https://u:p@api.example.com/v1":               "https://api.example.com/v1",
		"https://u:p@api.example.com/v1?k=v#f":         "https://api.example.com/v1",
		"https://u:p/q@api.example.com/v1":             "https://api.example.com/v1",
		"https://u:p?q@api.example.com/v1":             "https://api.example.com/v1",
		"https://api.example.com/v1?key=sk-1@x":        "https://x", // less precise, never the key
		"u:p@api.example.com/v1":                       "api.example.com/v1",
		"u:p://x@api.example.com/v1":                   "api.example.com/v1",
		"api example":                                  "api example",
		"https://":                                     "https://",
		"ftp://u:p@files.example.com/pub?x=1":          "ftp://files.example.com/pub",
		"HTTPS://U:P@API.EXAMPLE.COM/V1":               "HTTPS://API.EXAMPLE.COM/V1",
		"https://u:p@[::1]:8000/v1":                    "https://[::1]:8000/v1",
		"http://leaky-user:leaky-pass@127.0.0.1:1/v1#": "http://127.0.0.1:1/v1",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
