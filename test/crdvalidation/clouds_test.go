package crdvalidation

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// Claude on the clouds: bedrock needs a region, vertex a region (its location) and a project;
// both derive their endpoint from them, so baseURL is optional for them alone.
func TestCloudChannelsAccepted(t *testing.T) {
	ns := newNamespace(t)
	for i, spec := range []string{
		"provider: bedrock\nregion: us-east-1\nmodels: [{name: claude-sonnet-4-5, upstreamModel: 'us.anthropic.claude-sonnet-4-5-20250929-v1:0'}]",
		"provider: bedrock\nregion: us-gov-west-1\ncredentialsRef: {name: aws-creds}\nmodels: [{name: claude}]",
		"provider: bedrock\nregion: eu-central-1\nbaseURL: https://vpce-0abc.bedrock-runtime.eu-central-1.vpce.example\nmodels: [{name: claude}]",
		"provider: vertex\nregion: us-east5\nproject: my-gcp-project\nmodels: [{name: claude-sonnet-4-5, upstreamModel: claude-sonnet-4-5@20250929}]",
		"provider: vertex\nregion: global\nproject: example.com:legacy-project\ncredentialsRef: {name: gcp-sa}\nmodels: [{name: claude}]",
		"provider: vertex\nregion: europe-west1\nproject: my-gcp-project\ncredentialsRef: {name: gcp-sa, key: sa.json}\nbaseURL: http://127.0.0.1:9000/v1\nmodels: [{name: claude}]",
	} {
		if err := env.Client.Create(context.Background(), object(t, "ProviderChannel", fmt.Sprintf("ok-%d", i), ns, spec)); err != nil {
			t.Errorf("valid channel %d rejected: %v\n%s", i, err, spec)
		}
	}
}

func TestCloudChannelsRejected(t *testing.T) {
	ns := newNamespace(t)
	const models = "\nmodels: [{name: claude}]"
	for i, c := range []struct {
		name, spec string
		want       []string
	}{
		{"bedrock without region", "provider: bedrock" + models, []string{"spec.region", "region is required for bedrock"}},
		{"vertex without region", "provider: vertex\nproject: my-gcp-project" + models, []string{"spec.region", "region is required for bedrock"}},
		{"vertex without project", "provider: vertex\nregion: us-east5" + models, []string{"spec.project", "project is required for vertex"}},
		{"project on bedrock", "provider: bedrock\nregion: us-east-1\nproject: my-gcp-project" + models, []string{"spec.project", "project is only used by vertex"}},
		{"region on openai", "provider: openai\nbaseURL: https://api.example.com/v1\nregion: us-east-1" + models, []string{"spec.region", "only used by bedrock and vertex"}},
		{"openai without baseURL", "provider: openai" + models, []string{"spec.baseURL", "baseURL is required for this provider"}},
		{"key on bedrock", "provider: bedrock\nregion: us-east-1\ncredentialsRef: {name: aws, key: accessKeyId}" + models, []string{"spec.credentialsRef.key", "not used by bedrock"}},
		{"region with a host in it", "provider: bedrock\nregion: evil.example/x" + models, []string{"spec.region", "should match"}},
		{"region upper-case", "provider: vertex\nregion: US-EAST5\nproject: my-gcp-project" + models, []string{"spec.region", "should match"}},
		{"project with a slash", "provider: vertex\nregion: us-east5\nproject: my-project/../x" + models, []string{"spec.project", "should match"}},
		{"project too short", "provider: vertex\nregion: us-east5\nproject: abc" + models, []string{"spec.project", "should match"}},
		{"bedrock baseURL with credentials", "provider: bedrock\nregion: us-east-1\nbaseURL: https://u:leaky-pass@bedrock.example" + models, []string{"spec.baseURL: Forbidden", "must not carry credentials"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), object(t, "ProviderChannel", fmt.Sprintf("bad-%d", i), ns, c.spec))
			if err == nil {
				t.Fatalf("accepted, want %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "leaky-pass") {
				t.Errorf("error quotes the password:\n%v", err)
			}
		})
	}
}
