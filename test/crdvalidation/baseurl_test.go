package crdvalidation

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func channelWithBaseURL(provider, baseURL string) string {
	return fmt.Sprintf("provider: %s\nbaseURL: %q\nmodels: [{name: gpt-4o}]", provider, baseURL)
}

// The baseURLs the proxy can use are admitted: scheme://host[:port]/path.
func TestBaseURLAccepted(t *testing.T) {
	ns := newNamespace(t)
	for i, c := range []struct{ provider, baseURL string }{
		{"openai", "https://api.openai.com/v1"},
		{"openai", "https://api.openai.com/v1/"},
		{"openai", "http://127.0.0.1:9101/v1"},
		{"openai", "http://[::1]:8000/v1"},
		{"openai", "http://embeddings.ml-serving.svc.cluster.local:8000/v1"},
		{"azure-openai", "https://x.openai.azure.com/openai/deployments/d"},
		{"azure-openai", "https://example-resource.openai.azure.com/openai/v1"},
	} {
		if err := env.Client.Create(context.Background(), object(t, "ProviderChannel", fmt.Sprintf("ok-%d", i), ns, channelWithBaseURL(c.provider, c.baseURL))); err != nil {
			t.Errorf("%s rejected: %v", c.baseURL, err)
		}
	}
}

// The API server refuses the baseURLs the compiler refuses (credentials, a query or fragment, no
// host), naming the field. The rules answer Forbidden, which never quotes the value (Invalid does):
// a rejected baseURL may carry a password.
func TestBaseURLRejected(t *testing.T) {
	ns := newNamespace(t)
	const creds, query, host = "must not carry credentials", "must not carry a query string or fragment", "must name a host"
	for i, c := range []struct {
		name, provider, baseURL string
		want                    string
		secret                  string // never in the error
	}{
		{"user and password", "openai", "https://leaky-user:leaky-pass@api.example.com/v1", creds, "leaky-pass"},
		{"user only", "openai", "https://leaky-token@api.example.com/v1", creds, "leaky-token"},
		{"user and password, plain http", "openai", "http://leaky-user:leaky-pass@127.0.0.1:8000/v1", creds, "leaky-pass"},
		{"empty userinfo", "openai", "https://@api.example.com/v1", creds, ""},
		{"azure api-version", "azure-openai", "https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21", query, "2024-10-21"},
		{"key in the query", "openai", "https://generativelanguage.googleapis.com/v1beta/openai?key=leaky-key", query, "leaky-key"},
		{"empty query", "openai", "https://api.example.com/v1?", query, ""},
		{"fragment", "openai", "https://api.example.com/v1#leaky-frag", query, "leaky-frag"},
		{"no host", "openai", "https://", host, ""},
		{"no host, a path", "openai", "https:///v1", host, ""},
		{"a port but no host", "openai", "http://:8080/v1", host, ""},
		// Several rules fail at once: none of them may quote the value either.
		{"credentials, not http", "openai", "ftp://leaky-user:leaky-pass@files.example.com/v1", creds, "leaky-pass"},
		{"credentials, no host", "openai", "https://leaky-user:leaky-pass@", creds, "leaky-pass"},
		{"credentials and a query", "openai", "https://leaky-user:leaky-pass@api.example.com/v1?k=v", query, "leaky-pass"},
		{"credentials that are no URL", "openai", "https://leaky-user:leaky pass/x@api.example.com/v1", "http:// or https://", "leaky pass"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), object(t, "ProviderChannel", fmt.Sprintf("bad-%d", i), ns, channelWithBaseURL(c.provider, c.baseURL)))
			if err == nil {
				t.Fatalf("%s accepted, want %q", c.baseURL, c.want)
			}
			t.Logf("%v", err)
			for _, w := range []string{"spec.baseURL: Forbidden", c.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "Invalid value") || c.secret != "" && strings.Contains(err.Error(), c.secret) {
				t.Errorf("error quotes %q:\n%v", c.secret, err)
			}
		})
	}
}
