package bedrock_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/provider/bedrock"
)

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		spec v1alpha1.ProviderChannelSpec
		want string // "" valid
	}{
		{v1alpha1.ProviderChannelSpec{Region: "us-east-1"}, ""},
		{v1alpha1.ProviderChannelSpec{Region: "us-east-1", BaseURL: "https://vpce.example"}, ""},
		{v1alpha1.ProviderChannelSpec{}, "spec.region: required"},
		{v1alpha1.ProviderChannelSpec{Region: "evil.example/"}, "spec.region"},
		{v1alpha1.ProviderChannelSpec{Region: "us-east-1", Project: "p"}, "spec.project"},
		{v1alpha1.ProviderChannelSpec{Region: "us-east-1", CredentialsRef: &v1alpha1.SecretKeyRef{Name: "s", Key: "k"}}, "spec.credentialsRef.key"},
		{v1alpha1.ProviderChannelSpec{Region: "us-east-1", BaseURL: "https://u:p@x.example"}, "spec.baseURL"},
	} {
		err := bedrock.Validate(&c.spec)
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
		}
	}
}

func TestSecretValue(t *testing.T) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "aws"}, Data: map[string][]byte{"accessKeyId": []byte("AKID"), "secretAccessKey": []byte("shh\n")}}
	v, err := bedrock.SecretValue(s)
	if err != nil {
		t.Fatal(err)
	}
	c, err := bedrock.ParseCredentials(v)
	if err != nil || c.AccessKeyID != "AKID" || c.SecretAccessKey != "shh" || c.SessionToken != "" {
		t.Fatalf("%v %v", c, err)
	}
	if strings.Contains(c.String(), "shh") {
		t.Fatalf("String shows the secret: %s", c)
	}
	delete(s.Data, "secretAccessKey")
	if _, err := bedrock.SecretValue(s); err == nil || !strings.Contains(err.Error(), `no key "secretAccessKey"`) {
		t.Fatalf("%v", err)
	}
	if _, err := bedrock.ParseCredentials("not json shh"); err == nil || strings.Contains(err.Error(), "shh") {
		t.Fatalf("%v", err)
	}
}
