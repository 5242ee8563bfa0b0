package crdvalidation

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOnCallMayOnlyTouchTheOverride applies the persona roles and the on-call admission policy
// (config/rbac) and plays them as their users would, with kubectl: on-call takes a channel out of
// rotation and back, and is refused anything else, naming what it may do; a team editor may change
// the spec; on-call may not create or delete. (envtest runs no controller-manager, so the roles'
// aggregation into the built-in view/edit is not exercised here; their labels are checked instead.)
func TestOnCallMayOnlyTouchTheOverride(t *testing.T) {
	ns := newNamespace(t)
	for _, f := range []string{"personas.yaml", "oncall_policy.yaml"} {
		if _, stderr, err := env.Kubectl(nil, "apply", "-f", filepath.Join(env.Root, "config", "rbac", f)); err != nil {
			t.Fatalf("apply %s: %v\n%s", f, err, stderr)
		}
	}
	for _, b := range []struct{ user, role string }{{"alice-oncall", "switchyard-oncall"}, {"bob-team", "switchyard-edit"}} {
		if _, stderr, err := env.Kubectl(nil, "create", "rolebinding", b.user, "-n", ns, "--clusterrole="+b.role, "--user="+b.user); err != nil {
			t.Fatalf("rolebinding: %v\n%s", err, stderr)
		}
	}
	if _, stderr, err := env.Kubectl(strings.NewReader(fmt.Sprintf("apiVersion: switchyard.io/v1alpha1\nkind: ProviderChannel\nmetadata: {name: openai, namespace: %s}\nspec:\n%s", ns, indent(validChannel))), "apply", "-f", "-"); err != nil {
		t.Fatalf("create channel: %v\n%s", err, stderr)
	}
	patch := func(user, body string) (string, error) {
		_, stderr, err := env.Kubectl(nil, "patch", "providerchannel", "openai", "-n", ns, "--type=merge", "-p", body, "--as="+user)
		return stderr, err
	}

	// The policy takes effect once the API server has compiled it: wait for the first refusal.
	deadline := time.Now().Add(20 * time.Second)
	var stderr string
	var err error
	for {
		stderr, err = patch("alice-oncall", `{"spec":{"baseURL":"https://evil.example/v1"}}`)
		if err != nil || time.Now().After(deadline) {
			break
		}
		// Admitted before the policy was live: put it back and try again.
		if s, e := patch("bob-team", `{"spec":{"baseURL":"https://api.example.com/v1"}}`); e != nil {
			t.Fatalf("restore: %v\n%s", e, s)
		}
		time.Sleep(200 * time.Millisecond) // waiting for the API server to load the policy
	}
	if err == nil {
		t.Fatal("on-call changed the baseURL")
	}
	for _, w := range []string{"only spec.disabled, spec.disabledUntil and spec.disabledReason may be changed by alice-oncall", "switchyard-edit"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("the refusal does not say %q:\n%s", w, stderr)
		}
	}

	for _, c := range []struct {
		user, body string
		allowed    bool
	}{
		{"alice-oncall", `{"spec":{"disabled":true,"disabledReason":"INC-1234","disabledUntil":"2030-01-01T00:00:00Z"}}`, true},
		{"alice-oncall", `{"spec":{"disabled":false,"disabledReason":null,"disabledUntil":null}}`, true},
		{"alice-oncall", `{"spec":{"weight":1000}}`, false},
		{"alice-oncall", `{"spec":{"disabled":true,"models":[{"name":"gpt-4o"},{"name":"o1-pro"}]}}`, false},
		{"alice-oncall", `{"metadata":{"labels":{"team":"search"}}}`, false}, // a channelSelector matches labels
		{"bob-team", `{"spec":{"weight":200,"disabled":true}}`, true},
	} {
		stderr, err := patch(c.user, c.body)
		if (err == nil) != c.allowed {
			t.Errorf("%s patch %s: allowed=%v, want %v\n%s", c.user, c.body, err == nil, c.allowed, stderr)
		}
	}
	for _, c := range []struct{ verb, want string }{{"create", "no"}, {"delete", "no"}, {"patch", "yes"}} {
		out, _, _ := env.Kubectl(nil, "auth", "can-i", c.verb, "providerchannels.switchyard.io", "-n", ns, "--as=alice-oncall")
		if strings.TrimSpace(out) != c.want {
			t.Errorf("on-call can-i %s: %s, want %s", c.verb, strings.TrimSpace(out), c.want)
		}
	}
	out, _, _ := env.Kubectl(nil, "get", "clusterrole", "switchyard-view", "switchyard-edit", "-o", "jsonpath={range .items[*]}{.metadata.name}={.metadata.labels}{\"\\n\"}{end}")
	for _, w := range []string{`switchyard-view={"app.kubernetes.io/name":"switchyard","rbac.authorization.k8s.io/aggregate-to-admin":"true","rbac.authorization.k8s.io/aggregate-to-edit":"true","rbac.authorization.k8s.io/aggregate-to-view":"true"}`,
		`switchyard-edit={"app.kubernetes.io/name":"switchyard","rbac.authorization.k8s.io/aggregate-to-admin":"true","rbac.authorization.k8s.io/aggregate-to-edit":"true"}`} {
		if !strings.Contains(out, w) {
			t.Errorf("aggregation labels: want %s in\n%s", w, out)
		}
	}
}
