package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LocalSecretRef names a Secret in the object's namespace.
type LocalSecretRef struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ClientLimits bound what one GatewayClient may spend. An unset limit is no limit. With several
// proxy replicas each replica enforces its share (the limit divided by the ready replicas).
type ClientLimits struct {
	// requestsPerMinute bounds the client's requests over any 60-second window.
	// +optional
	// +kubebuilder:validation:Minimum=1
	RequestsPerMinute *int64 `json:"requestsPerMinute,omitempty"`

	// tokensPerMinute bounds the client's tokens (prompt + completion, as the providers report
	// them) over any 60-second window. A request is admitted while the client is under it; its
	// tokens count when the answer reports them.
	// +optional
	// +kubebuilder:validation:Minimum=1
	TokensPerMinute *int64 `json:"tokensPerMinute,omitempty"`

	// tokensPerDay bounds the client's tokens per UTC calendar day.
	// +optional
	// +kubebuilder:validation:Minimum=1
	TokensPerDay *int64 `json:"tokensPerDay,omitempty"`

	// maxInFlight bounds the client's requests being served at once (streams included); beyond
	// it, 429 concurrency_limit_exceeded. Whatever it is, a client over its fair share of the
	// proxy's own --max-in-flight and body budget gets 429 capacity_exceeded while those are
	// contended, so one team cannot take every slot.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxInFlight *int32 `json:"maxInFlight,omitempty"`
}

// GatewayClientSpec is one calling application or team.
//
// +kubebuilder:validation:XValidation:rule="!has(self.limits) || !has(self.limits.tokensPerMinute) || !has(self.limits.tokensPerDay) || self.limits.tokensPerMinute <= self.limits.tokensPerDay",message="limits.tokensPerMinute must not exceed limits.tokensPerDay",fieldPath=".limits.tokensPerMinute"
type GatewayClientSpec struct {
	// keysSecretRef names the Secret (same namespace) whose every data value is an accepted key.
	// Rotate by adding a key, moving the callers, then removing the old one: no restart. Only the
	// SHA-256 of each key reaches the proxies.
	// +required
	KeysSecretRef LocalSecretRef `json:"keysSecretRef"`

	// models are the public model names the client may use, as globs ("gpt-4o*", "claude-*",
	// "*"); empty: none.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[^\s\[\]\\]+$`
	Models []string `json:"models,omitempty"`

	// limits bound the client's requests and tokens; unset: unlimited.
	// +optional
	Limits *ClientLimits `json:"limits,omitempty"`

	// expiresAt is when the client's keys stop working (403 from then on).
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// disabled refuses every request of the client (403) at once, whatever its keys.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
}

// GatewayClientStatus is what the controller and the proxy replicas observed.
type GatewayClientStatus struct {
	// observedGeneration is the generation the conditions were computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Accepted, Programmed, Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// keys is the number of keys in the Secret that the proxies accept.
	// +optional
	Keys int32 `json:"keys,omitempty"`

	// requestsToday counts the client's requests this UTC day, summed over the proxy replicas
	// that report (a replica's count starts again when it restarts).
	// +optional
	RequestsToday int64 `json:"requestsToday,omitempty"`

	// tokensToday counts the client's tokens this UTC day, summed over the replicas that report.
	// +optional
	TokensToday int64 `json:"tokensToday,omitempty"`

	// lastUsed is the latest request of the client any replica reports.
	// +optional
	LastUsed *metav1.Time `json:"lastUsed,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gwc,categories=switchyard
// +kubebuilder:printcolumn:name="Models",type=string,JSONPath=`.spec.models`
// +kubebuilder:printcolumn:name="RPM",type=integer,JSONPath=`.spec.limits.requestsPerMinute`
// +kubebuilder:printcolumn:name="TPM",type=integer,JSONPath=`.spec.limits.tokensPerMinute`
// +kubebuilder:printcolumn:name="Tokens Today",type=integer,JSONPath=`.status.tokensToday`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.spec.expiresAt`,description="When the client's keys stop working (RFC 3339)"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// GatewayClient is one calling application or team: the keys it calls the gateway with, the
// models it may use and the limits it is held to.
type GatewayClient struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec GatewayClientSpec `json:"spec"`

	// +optional
	Status GatewayClientStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// GatewayClientList is a list of GatewayClients.
type GatewayClientList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GatewayClient `json:"items"`
}

func init() {
	SchemeBuilder.Register(&GatewayClient{}, &GatewayClientList{})
}
