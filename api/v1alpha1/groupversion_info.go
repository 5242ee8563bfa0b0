// Package v1alpha1 contains the Switchyard API: ProviderChannel (one way to reach a model
// provider) and RoutingPolicy (which channels serve which public model names, and the health rules
// that move traffic between them). Spec is what people write; status is what the system observed.
//
// +kubebuilder:object:generate=true
// +groupName=switchyard.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the Switchyard API.
	GroupVersion = schema.GroupVersion{Group: "switchyard.io", Version: "v1alpha1"}

	// SchemeBuilder registers the Switchyard types with a runtime.Scheme.
	SchemeBuilder = &schemeBuilder{}

	// AddToScheme adds the Switchyard types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// schemeBuilder is apimachinery's runtime.SchemeBuilder with the Register of controller-runtime's
// deprecated scheme.Builder, so that the API package depends on apimachinery alone.
type schemeBuilder struct{ runtime.SchemeBuilder }

// Register adds objs to the scheme of the Switchyard GroupVersion.
func (b *schemeBuilder) Register(objs ...runtime.Object) {
	b.SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, objs...)
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
}
