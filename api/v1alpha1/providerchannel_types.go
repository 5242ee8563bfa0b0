package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Provider names the wire protocol and authentication a channel speaks.
//
// +kubebuilder:validation:Enum=openai;azure-openai;anthropic;bedrock;vertex
type Provider string

const (
	// ProviderOpenAI is any OpenAI-compatible API, authenticated with "Authorization: Bearer".
	ProviderOpenAI Provider = "openai"
	// ProviderAzureOpenAI is Azure OpenAI's OpenAI-compatible v1 API, authenticated with "api-key".
	ProviderAzureOpenAI Provider = "azure-openai"
	// ProviderAnthropic is Anthropic's Messages API, authenticated with "x-api-key".
	ProviderAnthropic Provider = "anthropic"
	// ProviderBedrock is Claude on Amazon Bedrock Runtime (InvokeModel), signed with SigV4.
	ProviderBedrock Provider = "bedrock"
	// ProviderVertex is Claude on Google Vertex AI (rawPredict), with OAuth bearer tokens.
	ProviderVertex Provider = "vertex"
)

// ProviderChannelSpec is one independent way to reach a model provider.
//
// +kubebuilder:validation:XValidation:rule="!has(self.disabledUntil) || (has(self.disabled) && self.disabled)",message="disabledUntil is only allowed with disabled: true",fieldPath=".disabledUntil"
// +kubebuilder:validation:XValidation:rule="!has(self.disabledReason) || (has(self.disabled) && self.disabled)",message="disabledReason is only allowed with disabled: true",fieldPath=".disabledReason"
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || !has(self.baseURL) || self.baseURL.startsWith('https://')",message="tls applies to an https:// baseURL only",fieldPath=".tls"
// +kubebuilder:validation:XValidation:rule="self.provider in ['bedrock', 'vertex'] || has(self.baseURL)",message="baseURL is required for this provider (only bedrock and vertex derive it from region)",fieldPath=".baseURL"
// +kubebuilder:validation:XValidation:rule="!(self.provider in ['bedrock', 'vertex']) || has(self.region)",message="region is required for bedrock (the AWS region) and vertex (the location, e.g. us-east5)",fieldPath=".region"
// +kubebuilder:validation:XValidation:rule="self.provider in ['bedrock', 'vertex'] || !has(self.region)",message="region is only used by bedrock and vertex (failureDomain.region describes where a channel runs)",fieldPath=".region"
// +kubebuilder:validation:XValidation:rule="self.provider != 'vertex' || has(self.project)",message="project is required for vertex (the Google Cloud project id)",fieldPath=".project"
// +kubebuilder:validation:XValidation:rule="self.provider == 'vertex' || !has(self.project)",message="project is only used by vertex",fieldPath=".project"
// +kubebuilder:validation:XValidation:rule="!has(self.credentialsRef) || self.provider in ['bedrock', 'vertex'] || has(self.credentialsRef.key)",message="credentialsRef.key is required for this provider: the Secret key that holds the API key",fieldPath=".credentialsRef.key"
// +kubebuilder:validation:XValidation:rule="!has(self.credentialsRef) || self.provider != 'bedrock' || !has(self.credentialsRef.key)",message="credentialsRef.key is not used by bedrock: the Secret's keys accessKeyId, secretAccessKey and sessionToken (optional) are read",fieldPath=".credentialsRef.key"
type ProviderChannelSpec struct {
	// provider is the API the channel speaks: openai (any OpenAI-compatible API), azure-openai,
	// anthropic (the Messages API; OpenAI chat completions are translated to it), bedrock
	// (Claude on Amazon Bedrock) or vertex (Claude on Google Vertex AI).
	// +required
	Provider Provider `json:"provider"`

	// region is the AWS region of a bedrock channel (us-east-1) or the location of a vertex
	// channel (us-east5, europe-west1, global); required for both, not used by other providers.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]*[a-z0-9]$`
	Region string `json:"region,omitempty"`

	// project is the Google Cloud project id of a vertex channel; required for vertex only.
	// +optional
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:Pattern=`^([a-z][a-z0-9.-]*[a-z0-9]:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$`
	Project string `json:"project,omitempty"`

	// The baseURL rules answer FieldValueForbidden: an Invalid error quotes the value, and a
	// rejected baseURL may carry a password, which must not reach kubectl output or a GitOps log.

	// baseURL is the provider's API root; requests go to baseURL + the path after /v1
	// (for example https://api.openai.com/v1 + /chat/completions). It names a host and carries no
	// credentials, query or fragment: the key goes in the Secret of credentialsRef. Required but
	// for bedrock and vertex, whose endpoint is derived from region (and set here only to use
	// another, such as a VPC endpoint).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="baseURL must be an http:// or https:// URL",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[^/?#]*//[^/?#]*@')",message="baseURL must not carry credentials (user:password@): put the key in a Secret and reference it with credentialsRef",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!self.contains('?') && !self.contains('#')",message="baseURL must not carry a query string or fragment: requests go to baseURL + the API path",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || url(self).getHostname() != ''",message="baseURL must name a host",reason=FieldValueForbidden
	BaseURL string `json:"baseURL,omitempty"`

	// credentialsRef names the Secret key (same namespace) holding the provider API key.
	// Optional: local model servers need none. bedrock reads the Secret's keys accessKeyId,
	// secretAccessKey and sessionToken (optional) and takes no key; vertex reads the service
	// account JSON from key (default serviceAccountJSON). Without credentialsRef, bedrock and
	// vertex use the pod's workload identity (IRSA / the AWS default chain; GKE workload identity
	// / Application Default Credentials).
	// +optional
	CredentialsRef *SecretKeyRef `json:"credentialsRef,omitempty"`

	// models are the models this channel serves; at least one, names unique.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	Models []ChannelModel `json:"models"`

	// weight is the channel's base share among the routable channels of a model (1-1000).
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Weight int32 `json:"weight,omitempty"`

	// timeouts bound each attempt on this channel. Unset fields take 30s / 20s / 10s / 10s.
	// +optional
	Timeouts *ChannelTimeouts `json:"timeouts,omitempty"`

	// failureDomain describes what this channel shares with others; a fallback is preferred
	// from a domain that differs in any of these.
	// +optional
	FailureDomain *FailureDomain `json:"failureDomain,omitempty"`

	// residency is an optional data-residency tag, matched by RoutingPolicy.spec.requireResidency.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Residency string `json:"residency,omitempty"`

	// disabled takes the channel out of rotation at once, whatever its health (on-call override).
	// +optional
	Disabled bool `json:"disabled,omitempty"`

	// disabledUntil ends the override by itself at this time; requires disabled: true. When it
	// passes, the controller clears disabled, disabledUntil and disabledReason, so that a later
	// `disabled: true` starts a new override instead of meeting the old, expired date.
	// +optional
	DisabledUntil *metav1.Time `json:"disabledUntil,omitempty"`

	// disabledReason is shown in status and the journal; requires disabled: true.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	DisabledReason string `json:"disabledReason,omitempty"`

	// faultInjection rehearses an outage on a share of this channel's attempts; off when absent.
	// +optional
	FaultInjection *FaultInjection `json:"faultInjection,omitempty"`

	// tls sets the CA bundle the channel's https baseURL is verified with and the client
	// certificate presented to it; absent: the system roots, no client certificate.
	// +optional
	TLS *ChannelTLS `json:"tls,omitempty"`
}

// SecretKeyRef selects one key of a Secret in the channel's namespace.
type SecretKeyRef struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key within the Secret's data; required but for bedrock (fixed keys) and vertex (default
	// serviceAccountJSON).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// ChannelModel is one model a channel serves.
type ChannelModel struct {
	// name is the model name clients ask for.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`

	// upstreamModel is the name sent upstream; defaults to name.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	UpstreamModel string `json:"upstreamModel,omitempty"`

	// capabilities describe what the model can do on this channel; every unset field takes the
	// provider's default (docs/providers.md). Routing sends a request that needs vision or tools
	// only to channels whose model has them.
	// +optional
	Capabilities *ModelCapabilities `json:"capabilities,omitempty"`
}

// ModelCapabilities is what a model can do on a channel.
//
// +kubebuilder:validation:XValidation:rule="!has(self.maxOutputTokens) || !has(self.contextWindow) || self.maxOutputTokens <= self.contextWindow",message="maxOutputTokens must not exceed contextWindow",fieldPath=".maxOutputTokens"
type ModelCapabilities struct {
	// prefill: the model continues a trailing assistant message (anthropic: true; others: false).
	// +optional
	Prefill *bool `json:"prefill,omitempty"`

	// contextWindow is the model's context size in tokens. A request whose prompt certainly
	// exceeds it goes to the policy's contextOverflowModels before it is sent (anthropic: 200000;
	// others: unknown, no check).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000000
	ContextWindow *int32 `json:"contextWindow,omitempty"`

	// maxOutputTokens is the most tokens the model writes in one answer; it is also the
	// max_tokens sent to a provider that requires one (anthropic) when the client gives none
	// (anthropic: 4096, which every Claude model accepts; others: unknown).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000000
	MaxOutputTokens *int32 `json:"maxOutputTokens,omitempty"`

	// vision: the model accepts images (default true).
	// +optional
	Vision *bool `json:"vision,omitempty"`

	// tools: the model accepts tool definitions and calls tools (default true).
	// +optional
	Tools *bool `json:"tools,omitempty"`
}

// ChannelTimeouts bound each attempt on a channel.
//
// +kubebuilder:validation:XValidation:rule="!has(self.fallbackRequest) || !has(self.request) || duration(self.fallbackRequest) <= duration(self.request)",message="fallbackRequest must not exceed request",fieldPath=".fallbackRequest"
type ChannelTimeouts struct {
	// request bounds the whole attempt when this channel is the first choice (default 30s).
	// +optional
	Request *Duration `json:"request,omitempty"`

	// fallbackRequest bounds the whole attempt when the channel is tried as a fallback, further
	// bounded by the request's remaining deadline (default 20s, never more than request).
	// +optional
	FallbackRequest *Duration `json:"fallbackRequest,omitempty"`

	// firstByte bounds the wait for response headers and, for streams, the first event (default 10s).
	// +optional
	FirstByte *Duration `json:"firstByte,omitempty"`

	// streamIdle is the longest silence allowed between stream events (default 10s).
	// +optional
	StreamIdle *Duration `json:"streamIdle,omitempty"`
}

// FailureDomain is what a channel shares with others: two channels in different domains are
// unlikely to fail together.
type FailureDomain struct {
	// region of the provider endpoint, e.g. eu-west-1.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Region string `json:"region,omitempty"`

	// account or billing entity the channel uses.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Account string `json:"account,omitempty"`

	// egress path (NAT, proxy) the channel's traffic leaves through.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Egress string `json:"egress,omitempty"`
}

// FaultInjection injects faults into a share of a channel's attempts, for drills.
//
// +kubebuilder:validation:XValidation:rule="has(self.abortStatus) || has(self.delay) || (has(self.hang) && self.hang)",message="faultInjection needs at least one of abortStatus, delay or hang"
type FaultInjection struct {
	// percent is the share of this channel's attempts that get the fault (default 100).
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Percent *int32 `json:"percent,omitempty"`

	// abortStatus answers this HTTP status without calling upstream (e.g. 500, 503, 429).
	// +optional
	// +kubebuilder:validation:Minimum=400
	// +kubebuilder:validation:Maximum=599
	AbortStatus *int32 `json:"abortStatus,omitempty"`

	// delay adds this latency before forwarding (alone, or before abortStatus).
	// +optional
	Delay *Duration `json:"delay,omitempty"`

	// hang never answers: the attempt runs into its timeout.
	// +optional
	Hang bool `json:"hang,omitempty"`

	// onlyMarked limits the fault to requests carrying the header "X-Switchyard-Drill: true".
	// +optional
	OnlyMarked bool `json:"onlyMarked,omitempty"`

	// until ends the drill by itself at this time.
	// +optional
	Until *metav1.Time `json:"until,omitempty"`
}

// ProviderChannelStatus is the channel's live health, aggregated from the proxy replicas.
type ProviderChannelStatus struct {
	// observedGeneration is the spec generation the controller last compiled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is the worst phase among the channel's models.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// healthScore is the lowest health score (0-100) among the channel's models.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	HealthScore *int32 `json:"healthScore,omitempty"`

	// trafficPercent is the lowest traffic share (0-100) among the channel's models.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	TrafficPercent *int32 `json:"trafficPercent,omitempty"`

	// replicas is the REPLICAS column while the proxy replicas disagree on the channel's
	// phase: those that see it, of all that report, e.g. "37/200"; empty while they agree.
	// +optional
	Replicas string `json:"replicas,omitempty"`

	// disabled is the on-call override in effect now: spec.disabled, unless its disabledUntil has
	// passed. This is what the DISABLED column shows.
	// +optional
	Disabled bool `json:"disabled"`

	// models is the per-model breakdown.
	// +optional
	// +listType=map
	// +listMapKey=name
	Models []ModelStatus `json:"models,omitempty"`

	// conditions: Ready (valid, credentials resolved, compiled into the proxy config) and
	// Available (at least one model routable on this channel).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ModelStatus is the live health of one model on a channel.
type ModelStatus struct {
	// name of the model (as clients ask for it).
	// +required
	Name string `json:"name"`

	// phase is the fleet's phase: the verdict the fleet store holds when there is one, else the
	// phase most of the traffic sees (each replica's view weighted by its traffic).
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// healthScore is the score (0-100) weighted by each proxy replica's traffic.
	// +optional
	HealthScore int32 `json:"healthScore"`

	// trafficPercent is the traffic share weighted by each proxy replica's traffic, rounded down:
	// 5/15/50/100 while ramping, 0 while ejected or disabled everywhere, 99 when one replica of
	// 200 ejected it.
	// +optional
	TrafficPercent int32 `json:"trafficPercent"`

	// windowRequests is the number of requests in the detection window, summed over replicas.
	// +optional
	WindowRequests int64 `json:"windowRequests,omitempty"`

	// errorRatePercent is the failure share in the detection window, over all replicas.
	// +optional
	ErrorRatePercent int32 `json:"errorRatePercent,omitempty"`

	// p95LatencyMillis is the highest window p95 latency across replicas, in milliseconds.
	// +optional
	P95LatencyMillis int64 `json:"p95LatencyMillis,omitempty"`

	// ejections counts ejections since the proxy replicas started, summed over replicas.
	// +optional
	Ejections int64 `json:"ejections,omitempty"`

	// replicas counts the proxy replicas reporting each phase, e.g. {"Healthy": 37,
	// "Ejected": 163}, while they disagree; absent while they agree.
	// +optional
	Replicas map[string]int32 `json:"replicas,omitempty"`

	// panic is true while a replica routes to this channel only because every channel of the
	// model is out (panic routing).
	// +optional
	Panic bool `json:"panic,omitempty"`

	// lastTransitionTime is when the phase last changed.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`

	// reason is the rule or actor of the last transition (CamelCase).
	// +optional
	Reason string `json:"reason,omitempty"`

	// message carries the observed figures of the last transition.
	// +optional
	Message string `json:"message,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pch,categories=switchyard
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Replicas",type=string,JSONPath=`.status.replicas`,description="Replicas in the shown phase / all, while they disagree"
// +kubebuilder:printcolumn:name="Score",type=integer,JSONPath=`.status.healthScore`
// +kubebuilder:printcolumn:name="Traffic",type=integer,JSONPath=`.status.trafficPercent`
// +kubebuilder:printcolumn:name="Disabled",type=boolean,JSONPath=`.status.disabled`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,priority=1,description="The rule or actor of the last phase transition"
// +kubebuilder:printcolumn:name="Last Transition",type=date,JSONPath=`.status.lastTransitionTime`,priority=1,description="When the phase last changed"
// +kubebuilder:printcolumn:name="Panic",type=boolean,JSONPath=`.status.panic`,priority=1,description="A replica routes here only because every channel of the model is out"

// ProviderChannel is one independent way to reach a model provider (an account, a region, a
// reseller). Its status shows the channel's live health as the proxy replicas see it.
type ProviderChannel struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ProviderChannelSpec `json:"spec"`

	// +optional
	Status ProviderChannelStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ProviderChannelList is a list of ProviderChannels.
type ProviderChannelList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderChannel `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ProviderChannel{}, &ProviderChannelList{})
}
