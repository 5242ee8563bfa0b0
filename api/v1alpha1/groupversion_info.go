// Package v1alpha1 contains the Switchyard API: ProviderChannel (one way to reach a model
// provider) and RoutingPolicy (which channels serve which public model names, and the health rules
// that move traffic between them). Spec is what people write; status is what the system observed.
//
// +kubebuilder:object:generate=true
// +groupName=switchyard.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the Switchyard API.
	GroupVersion = schema.GroupVersion{Group: "switchyard.io", Version: "v1alpha1"}

	// SchemeBuilder registers the Switchyard types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the Switchyard types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
