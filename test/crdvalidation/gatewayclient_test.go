package crdvalidation

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

const validClient = `
keysSecretRef: {name: team-keys}
models: ["gpt-4o*", "claude-sonnet-*"]
`

func TestGatewayClientValidation(t *testing.T) {
	ns := newNamespace(t)
	for i, spec := range []string{
		validClient,
		validClient + "limits: {requestsPerMinute: 600, tokensPerMinute: 200000, tokensPerDay: 20000000, maxInFlight: 50}\nexpiresAt: \"2027-06-30T00:00:00Z\"\ndisabled: false",
		"keysSecretRef: {name: k}", // no models: allowed, and allows none
	} {
		if err := env.Client.Create(context.Background(), object(t, "GatewayClient", fmt.Sprintf("ok-%d", i), ns, spec)); err != nil {
			t.Errorf("valid GatewayClient %d rejected: %v", i, err)
		}
	}
	for i, c := range []struct {
		name, spec string
		want       []string
	}{
		{"no keysSecretRef", "models: [\"*\"]", []string{"spec.keysSecretRef", "Required"}},
		{"empty secret name", "keysSecretRef: {name: \"\"}", []string{"spec.keysSecretRef.name", "at least 1"}},
		{"rpm zero", validClient + "limits: {requestsPerMinute: 0}", []string{"spec.limits.requestsPerMinute", "greater than or equal to 1"}},
		{"negative tpm", validClient + "limits: {tokensPerMinute: -5}", []string{"spec.limits.tokensPerMinute", "greater than or equal to 1"}},
		{"maxInFlight zero", validClient + "limits: {maxInFlight: 0}", []string{"spec.limits.maxInFlight", "greater than or equal to 1"}},
		{"tpm over tpd", validClient + "limits: {tokensPerMinute: 1000, tokensPerDay: 10}", []string{"spec.limits.tokensPerMinute", "must not exceed limits.tokensPerDay"}},
		{"model glob with a class", "keysSecretRef: {name: k}\nmodels: [\"gpt-[45]\"]", []string{"spec.models[0]", "should match"}},
		{"empty model", "keysSecretRef: {name: k}\nmodels: [\"\"]", []string{"spec.models[0]"}},
		{"duplicate model", "keysSecretRef: {name: k}\nmodels: [a, a]", []string{"spec.models[1]", "Duplicate value"}},
		{"expiresAt not a time", validClient + "expiresAt: tomorrow", []string{"spec.expiresAt"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := env.Client.Create(context.Background(), object(t, "GatewayClient", fmt.Sprintf("bad-%d", i), ns, c.spec))
			if err == nil {
				t.Fatalf("accepted, want rejection naming %q", c.want[0])
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}
