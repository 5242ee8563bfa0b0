package v1alpha1

import "time"

// Duration is a positive duration such as "30s", "5m" or "1h30m" (units h, m, s, ms).
// The same grammar as the Gateway API's Duration, so it reads the same in every manifest.
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:Pattern=`^([0-9]{1,5}(h|m|s|ms)){1,4}$`
// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be a positive duration"
type Duration string

// Get parses the duration. The API server has already checked the grammar; a value that does
// not parse (an object that bypassed validation, such as a standalone manifest) yields an error.
func (d Duration) Get() (time.Duration, error) {
	return time.ParseDuration(string(d))
}

// Phase is the health phase of a channel×model as the gateway sees it.
//
// +kubebuilder:validation:Enum=Healthy;Degraded;RateLimited;Ejected;Probing;RampingUp;Disabled;Unknown
type Phase string

// The phases, from the health engine's state machine (see DESIGN.md). Unknown means no proxy
// replica has reported on the channel yet.
const (
	PhaseHealthy     Phase = "Healthy"
	PhaseDegraded    Phase = "Degraded"
	PhaseRateLimited Phase = "RateLimited"
	PhaseEjected     Phase = "Ejected"
	PhaseProbing     Phase = "Probing"
	PhaseRampingUp   Phase = "RampingUp"
	PhaseDisabled    Phase = "Disabled"
	PhaseUnknown     Phase = "Unknown"
)

// Condition types used by both kinds.
const (
	// ConditionAccepted: the object is valid and compiles on its own (its references resolve).
	ConditionAccepted = "Accepted"
	// ConditionProgrammed: every proxy replica that reports serves a config that includes this
	// generation of the object.
	ConditionProgrammed = "Programmed"
	// ConditionReady: Accepted and Programmed; the summary GitOps health checks read.
	ConditionReady = "Ready"
	// ConditionAvailable: at least one model is routable (ProviderChannel) or every model has a
	// routable channel (RoutingPolicy).
	ConditionAvailable = "Available"
	// ConditionDegraded: some channel of the policy is not Healthy.
	ConditionDegraded = "Degraded"
)
