package crdvalidation

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPIIDefaults: an empty spec.pii block is masking off, with restore on for when it is turned
// on; the mode goes back to the client as the string "Off", not YAML's false.
func TestPIIDefaults(t *testing.T) {
	ns := newNamespace(t)
	if err := env.Client.Create(context.Background(), object(t, "RoutingPolicy", "pii-defaults", ns, validPolicy+"pii: {}")); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("switchyard.io/v1alpha1")
	u.SetKind("RoutingPolicy")
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "pii-defaults"}, u); err != nil {
		t.Fatal(err)
	}
	mode, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "pii", "mode")
	restore, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "pii", "restore")
	if mode != "Off" || restore != true {
		t.Errorf("spec.pii defaults: mode %#v, restore %#v; want \"Off\", true", mode, restore)
	}
}
