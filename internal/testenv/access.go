package testenv

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// CheckLeastPrivilege asks the API server (kubectl auth can-i) what the proxy's and the
// controller's service accounts may do, and fails on any right too many or too few. Both install
// paths (kustomize and Helm) promise the same rights, so they share this one list. routing is the
// routing ConfigMap's name in ns; channels and policies live in "llm".
func (e *Env) CheckLeastPrivilege(t testing.TB, ns, proxySA, controllerSA, routing string) {
	t.Helper()
	proxy := "system:serviceaccount:" + ns + ":" + proxySA
	controller := "system:serviceaccount:" + ns + ":" + controllerSA
	creds := routing + "-credentials"
	for _, tc := range []struct {
		as   string
		args []string
		want bool
	}{
		{proxy, []string{"get", "configmaps/" + routing, "-n", ns}, true},
		{proxy, []string{"watch", "configmaps/" + routing, "-n", ns}, true},
		{proxy, []string{"get", "secrets/" + creds, "-n", ns}, true},
		{proxy, []string{"list", "secrets/" + creds, "-n", ns}, true},
		{proxy, []string{"get", "configmaps/other", "-n", ns}, false},
		{proxy, []string{"get", "secrets/other", "-n", ns}, false},
		{proxy, []string{"list", "secrets", "-n", ns}, false},
		{proxy, []string{"update", "configmaps/" + routing, "-n", ns}, false},
		{proxy, []string{"get", "providerchannels.switchyard.io", "-n", "llm"}, false},

		{controller, []string{"list", "providerchannels.switchyard.io", "-n", "llm"}, true},
		{controller, []string{"patch", "providerchannels.switchyard.io/x", "--subresource=status", "-n", "llm"}, true},
		{controller, []string{"update", "providerchannels.switchyard.io/x", "-n", "llm"}, false},
		{controller, []string{"patch", "providerchannels.switchyard.io/x", "-n", "llm"}, true}, // clears an expired override
		{controller, []string{"patch", "routingpolicies.switchyard.io/x", "-n", "llm"}, false},
		{controller, []string{"watch", "secrets", "-n", "llm"}, true},
		{controller, []string{"create", "secrets", "-n", "llm"}, false},
		{controller, []string{"patch", "secrets/" + creds, "-n", ns}, true},
		{controller, []string{"patch", "configmaps/" + routing, "-n", ns}, true},
		{controller, []string{"create", "configmaps", "-n", "llm"}, false},
		{controller, []string{"create", "events.events.k8s.io", "-n", "llm"}, true},
		{controller, []string{"list", "endpointslices.discovery.k8s.io", "-n", ns}, true},
		{controller, []string{"update", "leases.coordination.k8s.io/x", "-n", ns}, true},
		{controller, []string{"delete", "pods", "-n", ns}, false},
	} {
		args := append([]string{"auth", "can-i", "--as=" + tc.as}, tc.args...)
		out, _, _ := e.Kubectl(nil, args...) // can-i exits 1 for "no"
		if got := strings.TrimSpace(out) == "yes"; got != tc.want {
			t.Errorf("%s can %s: %v, want %v", tc.as, strings.Join(tc.args, " "), got, tc.want)
		}
	}
}

// Main is a TestMain for a suite that shares one control plane: it starts it into *env, runs the
// tests, stops it and exits with the tests' code.
func Main(m *testing.M, suite string, env **Env) {
	var err error
	if *env, err = Start(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", suite, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := (*env).Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: stopping the control plane: %v\n", suite, err)
	}
	os.Exit(code)
}
