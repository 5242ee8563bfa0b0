package crdvalidation

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRolloutValidation: spec.rollout's mode is an enum, percent is 1-100, and DryRun takes no
// share (a dry run steers no request); the API server names the field.
func TestRolloutValidation(t *testing.T) {
	ns := newNamespace(t)
	for i, spec := range []string{
		"rollout: {mode: DryRun}",
		"rollout: {mode: DryRun, percent: 100}",
		"rollout: {mode: Enforce, percent: 10}",
		"rollout: {percent: 1}",
	} {
		if err := env.Client.Create(context.Background(), object(t, "RoutingPolicy", fmt.Sprintf("rollout-ok-%d", i), ns, validPolicy+spec)); err != nil {
			t.Errorf("%s refused: %v", spec, err)
		}
	}
	for i, c := range []struct{ spec, field, want string }{
		{"rollout: {mode: Shadow}", "spec.rollout.mode", `Unsupported value: "Shadow"`},
		{"rollout: {percent: 0}", "spec.rollout.percent", "greater than or equal to 1"},
		{"rollout: {percent: 101}", "spec.rollout.percent", "less than or equal to 100"},
		{"rollout: {mode: DryRun, percent: 10}", "spec.rollout.percent", "percent must be 100 with mode DryRun"},
	} {
		err := env.Client.Create(context.Background(), object(t, "RoutingPolicy", fmt.Sprintf("rollout-bad-%d", i), ns, validPolicy+c.spec))
		if err == nil {
			t.Errorf("%s accepted, want a rejection naming %s", c.spec, c.field)
			continue
		}
		for _, w := range []string{c.field, c.want} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error does not contain %q:\n%v", c.spec, w, err)
			}
		}
	}
}

// TestRolloutDefaults: an empty rollout block is Enforce at 100%, the behaviour without one.
func TestRolloutDefaults(t *testing.T) {
	ns := newNamespace(t)
	if err := env.Client.Create(context.Background(), object(t, "RoutingPolicy", "rollout-defaults", ns, validPolicy+"rollout: {}")); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("switchyard.io/v1alpha1")
	u.SetKind("RoutingPolicy")
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "rollout-defaults"}, u); err != nil {
		t.Fatal(err)
	}
	mode, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "rollout", "mode")
	percent, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "rollout", "percent")
	if mode != "Enforce" || percent != int64(100) {
		t.Errorf("spec.rollout defaults: mode %#v, percent %#v; want \"Enforce\", 100", mode, percent)
	}
}
