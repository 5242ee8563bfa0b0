package helm

import (
	"strings"
	"testing"
)

// TestInstallUpgradeUninstall drives helm itself against the test control plane: install, upgrade
// with changed values, uninstall. The CRDs that testenv installed are adopted by the release (as
// when moving from `kubectl apply -k config/default` to the chart), so the test also shows that
// the CRDs are upgraded with the release and that crds.keep leaves them behind on uninstall.
func TestInstallUpgradeUninstall(t *testing.T) {
	const ns, release = "switchyard-install", "sy"
	ensureNamespaces(t, ns)
	crds := []string{"crd/providerchannels.switchyard.io", "crd/routingpolicies.switchyard.io", "crd/gatewayclients.switchyard.io"}
	// Helm adopts existing objects that carry its ownership metadata.
	kubectl(t, "", append([]string{"annotate", "--overwrite"}, append(crds,
		"meta.helm.sh/release-name="+release, "meta.helm.sh/release-namespace="+ns)...)...)
	kubectl(t, "", append([]string{"label", "--overwrite"}, append(crds, "app.kubernetes.io/managed-by=Helm")...)...)

	if out, err := runHelm("install", release, chartDir(), "--namespace", ns); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := kubectl(t, "", "get", "deployment/sy-switchyard-proxy", "-n", ns, "-o", "jsonpath={.spec.replicas}"); got != "2" {
		t.Errorf("proxy replicas after install: %s, want 2", got)
	}
	for _, crd := range crds {
		if got := kubectl(t, "", "get", crd, "-o", `jsonpath={.metadata.labels.app\.kubernetes\.io/instance}`); got != release {
			t.Errorf("%s not taken over by the release: instance label %q", crd, got)
		}
	}

	if out, err := runHelm("upgrade", release, chartDir(), "--namespace", ns, "--reuse-values",
		"--set", "proxy.replicas=3", "--set", "commonLabels.upgraded=yes"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := kubectl(t, "", "get", "deployment/sy-switchyard-proxy", "-n", ns, "-o", "jsonpath={.spec.replicas}"); got != "3" {
		t.Errorf("proxy replicas after upgrade: %s, want 3", got)
	}
	for _, crd := range crds {
		if got := kubectl(t, "", "get", crd, "-o", "jsonpath={.metadata.labels.upgraded}"); got != "yes" {
			t.Errorf("%s not updated by helm upgrade (label upgraded=%q)", crd, got)
		}
	}
	status, err := runHelm("status", release, "--namespace", ns)
	if err != nil || !strings.Contains(status, "STATUS: deployed") || !strings.Contains(status, "REVISION: 2") {
		t.Errorf("helm status: %v\n%s", err, status)
	}

	out, err := runHelm("uninstall", release, "--namespace", ns)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "resource-policy") && !strings.Contains(out, "kept") {
		t.Logf("helm uninstall output:\n%s", out)
	}
	for _, crd := range crds {
		if _, _, err := env.Kubectl(nil, "get", crd); err != nil {
			t.Errorf("%s deleted by helm uninstall; crds.keep should keep it", crd)
		}
	}
	if o, _, err := env.Kubectl(nil, "get", "deployment/sy-switchyard-proxy", "-n", ns, "--ignore-not-found", "-o", "name"); err != nil || strings.TrimSpace(o) != "" {
		t.Errorf("proxy Deployment still there after uninstall: %q %v", o, err)
	}
}
