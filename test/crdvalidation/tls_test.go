package crdvalidation

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/testutil"
)

// spec.tls: the API server admits a CA bundle and a client certificate reference on an https
// channel, and refuses, naming the field, what the proxy could not use.
func TestChannelTLS(t *testing.T) {
	ns := newNamespace(t)
	ca := testutil.NewCA(t)
	pem := "|\n    " + strings.ReplaceAll(strings.TrimSpace(ca.PEM), "\n", "\n    ")
	const https, plain = `baseURL: "https://models.internal.example:8443/v1"`, `baseURL: "http://127.0.0.1:8000/v1"`
	spec := func(base, tls string) string {
		return fmt.Sprintf("provider: openai\n%s\nmodels: [{name: gpt-4o}]\ntls:\n%s", base, tls)
	}
	for i, tls := range []string{
		"  caBundle: " + pem,
		"  clientCertificateRef: {name: mtls}",
		"  caBundle: " + pem + "\n  clientCertificateRef: {name: mtls}",
	} {
		if err := env.Client.Create(context.Background(), object(t, "ProviderChannel", fmt.Sprintf("ok-%d", i), ns, spec(https, tls))); err != nil {
			t.Errorf("rejected:\n%s\n%v", tls, err)
		}
	}
	for i, c := range []struct{ name, base, tls, want string }{
		{"plain http", plain, "  caBundle: " + pem, "spec.tls: Invalid value"},
		{"not PEM", https, "  caBundle: not a certificate", "spec.tls.caBundle"},
		{"empty", https, "  {}", "spec.tls"},
		{"a reference without a name", https, "  clientCertificateRef: {}", "spec.tls.clientCertificateRef.name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), object(t, "ProviderChannel", fmt.Sprintf("bad-%d", i), ns, spec(c.base, c.tls)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to name %q", err, c.want)
			}
		})
	}
}
