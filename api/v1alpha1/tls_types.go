package v1alpha1

// ChannelTLS is how the proxy's TLS client talks to a channel's https baseURL: which
// certificate authorities it trusts and which client certificate it presents. Without it the
// system roots are trusted and no client certificate is sent.
// +kubebuilder:validation:MinProperties=1
type ChannelTLS struct {
	// caBundle is one or more PEM-encoded CA certificates. When set, only these sign the
	// provider's serving certificate for this channel, not the system roots: a private model
	// server, or a corporate egress proxy that inspects TLS with its own CA.
	// +optional
	// +kubebuilder:validation:MaxLength=262144
	// +kubebuilder:validation:XValidation:rule="self.contains('-----BEGIN CERTIFICATE-----')",message="caBundle must hold PEM certificates (-----BEGIN CERTIFICATE-----)"
	CABundle string `json:"caBundle,omitempty"`

	// clientCertificateRef names a Secret of type kubernetes.io/tls in the channel's namespace
	// (keys tls.crt and tls.key): the certificate the proxy presents to the provider (mutual TLS).
	// +optional
	ClientCertificateRef *SecretRef `json:"clientCertificateRef,omitempty"`
}

// SecretRef names a Secret in the object's namespace.
type SecretRef struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}
