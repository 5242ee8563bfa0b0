package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Scenario selects the profile that supplies every unset detection and recovery setting.
//
// +kubebuilder:validation:Enum=chat;batch
type Scenario string

const (
	// ScenarioChat: interactive traffic; fast detection, short cooldowns.
	ScenarioChat Scenario = "chat"
	// ScenarioBatch: background traffic; longer windows, more evidence before acting.
	ScenarioBatch Scenario = "batch"
)

// StreamRecovery says what becomes of a stream that breaks after text was sent.
// +kubebuilder:validation:Enum=Continue;Error
type StreamRecovery string

const (
	// StreamRecoveryContinue finishes the broken answer on a prefill-capable channel.
	StreamRecoveryContinue StreamRecovery = "Continue"
	// StreamRecoveryError ends the broken stream with an in-band error event.
	StreamRecoveryError StreamRecovery = "Error"
)

// Strategy orders the routable channels of a model.
//
// +kubebuilder:validation:Enum=HealthScore;Weighted;Priority
type Strategy string

const (
	// StrategyHealthScore tries the best-scoring channel first.
	StrategyHealthScore Strategy = "HealthScore"
	// StrategyWeighted spreads traffic by weighted random choice.
	StrategyWeighted Strategy = "Weighted"
	// StrategyPriority tries channels in list order.
	StrategyPriority Strategy = "Priority"
)

// RoutingPolicySpec says which channels serve which public model names and how health moves
// traffic between them. Unset settings come from the scenario profile (see DESIGN.md).
//
// +kubebuilder:validation:XValidation:rule="has(self.channels) != has(self.channelSelector)",message="exactly one of channels or channelSelector is required"
// +kubebuilder:validation:XValidation:rule="!has(self.detection) || !has(self.detection.recentErrorWindow) || duration(self.detection.recentErrorWindow) <= (has(self.detection.window) ? duration(self.detection.window) : duration(self.scenario == 'batch' ? '5m' : '60s'))",message="recentErrorWindow must not exceed the window in effect (detection.window, or the scenario's: chat 60s, batch 5m)",fieldPath=".detection.recentErrorWindow"
// +kubebuilder:validation:XValidation:rule="!has(self.recovery) || !has(self.recovery.maxCooldown) || has(self.recovery.cooldown) || duration(self.recovery.maxCooldown) >= duration(self.scenario == 'batch' ? '10m' : '5m')",message="maxCooldown must be at least the cooldown in effect (recovery.cooldown, or the scenario's: chat 5m, batch 10m)",fieldPath=".recovery.maxCooldown"
// +kubebuilder:validation:XValidation:rule="!has(self.fallbackModels) || !self.fallbackModels.exists(m, m in self.models)",message="fallbackModels must not name a model this policy routes",fieldPath=".fallbackModels"
// +kubebuilder:validation:XValidation:rule="!has(self.contextOverflowModels) || !self.contextOverflowModels.exists(m, m in self.models)",message="contextOverflowModels must not name a model this policy routes",fieldPath=".contextOverflowModels"
// +kubebuilder:validation:XValidation:rule="!has(self.maxContinuations) || self.maxContinuations == 0 || !has(self.streamRecovery) || self.streamRecovery != 'Error'",message="maxContinuations has no effect with streamRecovery Error; set it to 0 or remove it",fieldPath=".maxContinuations"
type RoutingPolicySpec struct {
	// models are the public model names this policy routes (one policy per model).
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Models []string `json:"models"`

	// channels are the candidate ProviderChannels in this namespace (or use channelSelector).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Channels []ChannelRef `json:"channels,omitempty"`

	// channelSelector selects the candidate ProviderChannels in this namespace by label.
	// +optional
	ChannelSelector *metav1.LabelSelector `json:"channelSelector,omitempty"`

	// scenario supplies every default below: chat or batch.
	// +optional
	// +kubebuilder:default=chat
	Scenario Scenario `json:"scenario,omitempty"`

	// strategy orders the routable channels: HealthScore (best score first), Weighted (weighted
	// random) or Priority (list order).
	// +optional
	// +kubebuilder:default=HealthScore
	Strategy Strategy `json:"strategy,omitempty"`

	// detection decides when a channel is failing.
	// +optional
	Detection *Detection `json:"detection,omitempty"`

	// healthScore shapes the 0-100 score and the Degraded phase.
	// +optional
	HealthScore *HealthScoreSpec `json:"healthScore,omitempty"`

	// recovery brings an ejected channel back: cooldown, probes, staged ramp.
	// +optional
	Recovery *Recovery `json:"recovery,omitempty"`

	// retry bounds attempts per client request.
	// +optional
	Retry *Retry `json:"retry,omitempty"`

	// rateLimit handles 429 answers.
	// +optional
	RateLimit *RateLimit `json:"rateLimit,omitempty"`

	// fallbackModels are tried in order when no channel of the model can answer.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	FallbackModels []string `json:"fallbackModels,omitempty"`

	// contextOverflowModels are tried when the upstream says context_length_exceeded.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ContextOverflowModels []string `json:"contextOverflowModels,omitempty"`

	// acceptFallbackFrom are the namespaces whose policies may fall back onto this policy's models
	// ("*": any namespace). Without it, fallbackModels and contextOverflowModels never cross a
	// namespace: another team's fallback would otherwise run on this team's channels, keys and quota.
	// Consent is given to the namespace of the policy that routed the client's request, on every hop.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule="self == '*' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="each item must be a namespace name (a DNS-1123 label) or \"*\""
	AcceptFallbackFrom []string `json:"acceptFallbackFrom,omitempty"`

	// requireResidency limits candidates to channels whose residency is listed, even in panic routing.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	RequireResidency []string `json:"requireResidency,omitempty"`

	// panicRouting: when every channel of a model is out, still send to the least-bad one (default true).
	// +optional
	// +kubebuilder:default=true
	PanicRouting *bool `json:"panicRouting,omitempty"`

	// streamRecovery: what a stream that breaks after text reached the client becomes. Continue
	// finishes the answer on a channel whose model continues a trailing assistant message
	// (capabilities.prefill), or splices a deterministic regeneration, and ends with an in-band
	// error only when neither can be done; Error ends it with the in-band error at once.
	// Default (chat and batch): Continue.
	// +optional
	StreamRecovery StreamRecovery `json:"streamRecovery,omitempty"`

	// maxContinuations bounds the continuation and regeneration attempts of one client request
	// (default 2; 0 with streamRecovery Continue means none is tried).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	MaxContinuations *int32 `json:"maxContinuations,omitempty"`

	// pii masks or refuses personal data in prompts before they leave for a provider (default off).
	// +optional
	PII *PII `json:"pii,omitempty"`

	// rollout brings this policy in gradually: DryRun journals what it would decide while traffic
	// follows the listed channels, percent gives its failover and ejection to a share of requests.
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`
}

// RolloutMode says whether a policy's health decisions steer traffic.
//
// +kubebuilder:validation:Enum=Enforce;DryRun
type RolloutMode string

const (
	// RolloutEnforce: the policy's decisions route traffic (the default).
	RolloutEnforce RolloutMode = "Enforce"
	// RolloutDryRun: decisions are computed on live outcomes and journaled (Events with a DryRun
	// reason prefix, status.dryRun, switchyard_channel_dryrun_phase); requests follow the listed
	// channels in order, failing over to the next one on a failed attempt, as a plain proxy would.
	RolloutDryRun RolloutMode = "DryRun"
)

// Rollout is how much of the traffic a policy steers.
//
// DryRun with percent below 100 is refused: a dry run steers no request at all, so a share would
// mean nothing, and reading it as "dry-run on 10%" would be wrong (the shadow rules see every
// outcome of the channels).
//
// +kubebuilder:validation:XValidation:rule="!has(self.mode) || self.mode != 'DryRun' || !has(self.percent) || self.percent == 100",message="percent must be 100 with mode DryRun: a dry run steers no request, so a share has no meaning",fieldPath=".percent"
type Rollout struct {
	// mode: Enforce (decisions route traffic) or DryRun (decisions are journaled only).
	// +optional
	// +kubebuilder:default=Enforce
	Mode RolloutMode `json:"mode,omitempty"`

	// percent is the share of requests (by a hash of the request id, or of the client's
	// X-Switchyard-Cohort header for sticky sessions) that get this policy's failover and
	// ejection; the rest go to the listed channels in order, as without a gateway.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Percent *int32 `json:"percent,omitempty"`
}

// PIIMode says what the proxy does with personal data found in a prompt.
//
// +kubebuilder:validation:Enum=Off;Mask;Block
type PIIMode string

const (
	// PIIOff sends prompts as they are.
	PIIOff PIIMode = "Off"
	// PIIMask replaces each value found with a placeholder ([EMAIL_1]) before the prompt goes
	// upstream, and (with restore) puts the originals back into the answer.
	PIIMask PIIMode = "Mask"
	// PIIBlock refuses a request in which anything is found (400, code pii_detected), before
	// any upstream attempt.
	PIIBlock PIIMode = "Block"
)

// PIIDetector names a builtin detector.
//
// +kubebuilder:validation:Enum=email;phone;card;iban;kz-iin;ru-inn;ru-snils;ipv4
type PIIDetector string

// PII configures personal-data masking on the prompts of a policy's models. The text of messages,
// tool calls and tool results is scanned (see README "PII masking" for the fields); everything
// else in a request goes upstream unchanged.
type PII struct {
	// mode: Off (default), Mask or Block. Write it quoted in YAML ("Off"): unquoted, YAML 1.1
	// reads Off as false.
	// +optional
	// +kubebuilder:default="Off"
	Mode PIIMode `json:"mode,omitempty"`

	// detectors are the builtin detectors to run; empty: all of them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	Detectors []PIIDetector `json:"detectors,omitempty"`

	// restore puts the original values back into the answer, streamed or not (Mask only; default true).
	// +optional
	// +kubebuilder:default=true
	Restore *bool `json:"restore,omitempty"`

	// customDetectors are detectors of the policy's own, each a regular expression (RE2 syntax).
	// A Switchyard addition to the contract's pii block.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	CustomDetectors []PIICustomDetector `json:"customDetectors,omitempty"`
}

// PIICustomDetector is a detector defined by a regular expression.
//
// +kubebuilder:validation:XValidation:rule="!(self.name in ['email', 'phone', 'card', 'iban', 'kz-iin', 'ru-inn', 'ru-snils', 'ipv4'])",message="name must not be a builtin detector's",fieldPath=".name"
type PIICustomDetector struct {
	// name of the detector, in metrics, the access log and its placeholders ([EMPLOYEE_ID_1] for
	// employee-id): lower-case letters, digits and '-', starting with a letter.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// pattern is an RE2 regular expression (Go's regexp syntax); every match is masked. An
	// invalid one makes the policy Accepted=False, reason InvalidSpec.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Pattern string `json:"pattern"`
}

// ChannelRef names a candidate ProviderChannel.
type ChannelRef struct {
	// name of the ProviderChannel in the policy's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// weight overrides the channel's own weight for this policy (1-1000).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Weight *int32 `json:"weight,omitempty"`
}

// Detection decides when a channel is failing. Every rule ejects on its own.
type Detection struct {
	// window is the sliding window for rates and p95 (chat 60s, batch 5m).
	// +optional
	Window *Duration `json:"window,omitempty"`

	// minRequests: no rate-based verdict below this many requests in the window (chat 20, batch 50).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	MinRequests *int32 `json:"minRequests,omitempty"`

	// errorRatePercent ejects at or above this failure share (timeouts, 5xx, connection errors,
	// cut streams) (chat 25, batch 12).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	ErrorRatePercent *int32 `json:"errorRatePercent,omitempty"`

	// consecutiveFailures ejects after this many failures in a row, whatever the volume (chat 5).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	ConsecutiveFailures *int32 `json:"consecutiveFailures,omitempty"`

	// timeoutRatePercent ejects when timeouts alone reach this share (with minRequests); 0 turns
	// the rule off. chat 0: its timeouts count in errorRatePercent and consecutiveFailures, so a
	// network blip of 4 timeouts in 40 requests passes while a channel that hangs is still ejected.
	// batch 8, below its errorRatePercent, because timeouts clog a batch queue.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	TimeoutRatePercent *int32 `json:"timeoutRatePercent,omitempty"`

	// latencyP95 ejects when the window's p95 latency exceeds this (with minRequests) (chat 20s).
	// +optional
	LatencyP95 *Duration `json:"latencyP95,omitempty"`

	// recentErrorWindow is the fast error signal folded into the health score (chat 30s).
	// +optional
	RecentErrorWindow *Duration `json:"recentErrorWindow,omitempty"`
}

// HealthScoreSpec shapes the 0-100 health score.
//
// +kubebuilder:validation:XValidation:rule="!has(self.ejectBelow) || !has(self.degradedBelow) || self.ejectBelow <= self.degradedBelow",message="ejectBelow must not exceed degradedBelow",fieldPath=".ejectBelow"
type HealthScoreSpec struct {
	// errorWeightPercent is the error rate's share of the score; latency weighs the rest (default 70).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	ErrorWeightPercent *int32 `json:"errorWeightPercent,omitempty"`

	// degradedBelow: below this score the channel's weight is reduced in proportion (default 50).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	DegradedBelow *int32 `json:"degradedBelow,omitempty"`

	// ejectBelow: a score below this for ejectAfter ejects the channel (default 30).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	EjectBelow *int32 `json:"ejectBelow,omitempty"`

	// ejectAfter is how long the score must stay below ejectBelow (chat 3m).
	// +optional
	EjectAfter *Duration `json:"ejectAfter,omitempty"`
}

// Recovery brings an ejected channel back without flapping.
//
// +kubebuilder:validation:XValidation:rule="!has(self.maxCooldown) || !has(self.cooldown) || duration(self.maxCooldown) >= duration(self.cooldown)",message="maxCooldown must be at least cooldown",fieldPath=".maxCooldown"
type Recovery struct {
	// cooldown after the first ejection; doubles on each repeat (chat 5m).
	// +optional
	Cooldown *Duration `json:"cooldown,omitempty"`

	// maxCooldown caps the doubling (chat 30m).
	// +optional
	MaxCooldown *Duration `json:"maxCooldown,omitempty"`

	// probe checks the channel with real-looking requests after the cooldown.
	// +optional
	Probe *Probe `json:"probe,omitempty"`

	// rampSteps are the traffic shares of the staged ramp, strictly increasing and ending at 100.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=100
	// +kubebuilder:validation:XValidation:rule="self.isSorted() && self.all(x, self.indexOf(x) == self.lastIndexOf(x))",message="rampSteps must be strictly increasing"
	// +kubebuilder:validation:XValidation:rule="self[size(self) - 1] == 100",message="rampSteps must end at 100"
	RampSteps []int32 `json:"rampSteps,omitempty"`

	// rampHold is the time at each ramp step; any error or latency rise returns to cooldown (chat 3m).
	// +optional
	RampHold *Duration `json:"rampHold,omitempty"`
}

// Probe configures recovery probes.
type Probe struct {
	// interval between probes (chat 10s).
	// +optional
	Interval *Duration `json:"interval,omitempty"`

	// successesRequired in a row before the ramp starts (default 3).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	SuccessesRequired *int32 `json:"successesRequired,omitempty"`

	// maxLatency: a slower success is a failed probe (chat 10s).
	// +optional
	MaxLatency *Duration `json:"maxLatency,omitempty"`
}

// Retry bounds attempts per client request.
type Retry struct {
	// maxAttempts per client request, across channels and fallback models (default 3).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	MaxAttempts *int32 `json:"maxAttempts,omitempty"`

	// budgetPercent is the share of recent requests that may be retries (storm guard; default 20).
	// A failover away from a channel the health engine has ejected meanwhile, to a routable one,
	// does not count: once a channel is ejected new requests go elsewhere anyway.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	BudgetPercent *int32 `json:"budgetPercent,omitempty"`

	// backoff between attempts on the same channel (jittered).
	// +optional
	Backoff *Backoff `json:"backoff,omitempty"`
}

// Backoff is a jittered exponential back-off.
//
// +kubebuilder:validation:XValidation:rule="!has(self.base) || !has(self.max) || duration(self.max) >= duration(self.base)",message="max must be at least base",fieldPath=".max"
type Backoff struct {
	// base delay (default 100ms).
	// +optional
	Base *Duration `json:"base,omitempty"`

	// max delay (default 2s).
	// +optional
	Max *Duration `json:"max,omitempty"`
}

// RateLimit handles 429 answers.
type RateLimit struct {
	// maxRetryAfterWait: a 429 whose Retry-After is at most this is waited out on the same
	// channel; a longer one fails over (chat 3s).
	// +optional
	MaxRetryAfterWait *Duration `json:"maxRetryAfterWait,omitempty"`

	// shareReductionPercent cuts the channel's traffic share on each 429 burst; restored gradually (default 50).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	ShareReductionPercent *int32 `json:"shareReductionPercent,omitempty"`
}

// RoutingPolicyStatus is the live view of the policy's channels.
type RoutingPolicyStatus struct {
	// observedGeneration is the spec generation the controller last compiled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// channels has one row per channel × model this policy routes.
	// +optional
	// +listType=atomic
	Channels []PolicyChannelStatus `json:"channels,omitempty"`

	// dryRun has one row per channel × model with the phase a DryRun policy would have set.
	// +optional
	// +listType=atomic
	DryRun []PolicyDryRunStatus `json:"dryRun,omitempty"`

	// rollout compares the policy cohort with the listed cohort while percent is below 100.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// conditions: Ready (valid, every referenced channel exists and serves the models),
	// Available (every model has a routable channel), Degraded (some channel is not Healthy).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PolicyChannelStatus is one channel × model row of a policy's status.
type PolicyChannelStatus struct {
	// channel is the ProviderChannel name.
	// +required
	Channel string `json:"channel"`

	// model is the public model name.
	// +required
	Model string `json:"model"`

	// phase is the dominant phase across proxy replicas.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// healthScore is the lowest score across proxy replicas.
	// +optional
	HealthScore int32 `json:"healthScore"`

	// trafficPercent is the lowest traffic share across proxy replicas.
	// +optional
	TrafficPercent int32 `json:"trafficPercent"`
}

// PolicyDryRunStatus is one channel × model row of a DryRun policy's would-be decisions.
type PolicyDryRunStatus struct {
	// channel is the ProviderChannel name.
	// +required
	Channel string `json:"channel"`

	// model is the public model name.
	// +required
	Model string `json:"model"`

	// phase is the phase the policy would have put the channel in (dominant across replicas);
	// routing ignores it.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// reason is the rule of the would-be decision that led there (on the replica that decided last).
	// +optional
	Reason string `json:"reason,omitempty"`
}

// CohortStatus is one cohort's live figures, summed over the proxy replicas since they started.
type CohortStatus struct {
	// requests answered or failed for this cohort.
	// +optional
	Requests int64 `json:"requests"`

	// successRate is the share of requests answered, in percent with one decimal (e.g. "99.5").
	// +optional
	SuccessRate string `json:"successRate,omitempty"`

	// meanLatency is the mean time to answer a request, successful or not (e.g. "850ms").
	// +optional
	MeanLatency string `json:"meanLatency,omitempty"`
}

// RolloutStatus compares the two cohorts of a partial rollout side by side.
type RolloutStatus struct {
	// percent is the share of requests routed by the policy.
	// +optional
	Percent int32 `json:"percent"`

	// policy: the requests routed with the policy's failover and ejection.
	// +optional
	Policy CohortStatus `json:"policy"`

	// listed: the requests that followed the listed channels in order.
	// +optional
	Listed CohortStatus `json:"listed"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rp,categories=switchyard
// +kubebuilder:printcolumn:name="Scenario",type=string,JSONPath=`.spec.scenario`
// +kubebuilder:printcolumn:name="Models",type=string,JSONPath=`.spec.models`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].reason`,priority=1,description="Why the policy is or is not available (PanicRouting while panic routing serves a model)"
// +kubebuilder:printcolumn:name="Last Transition",type=date,JSONPath=`.status.conditions[?(@.type=="Available")].lastTransitionTime`,priority=1,description="When Available last changed"

// RoutingPolicy routes public model names to ProviderChannels and sets the health rules that move
// traffic between them.
type RoutingPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec RoutingPolicySpec `json:"spec"`

	// +optional
	Status RoutingPolicyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// RoutingPolicyList is a list of RoutingPolicies.
type RoutingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RoutingPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RoutingPolicy{}, &RoutingPolicyList{})
}
