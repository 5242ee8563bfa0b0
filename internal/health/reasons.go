package health

import "strings"

// The reasons of the journal's events (Event.Reason), one per rule or action that moves a key.
// A shadow of a DryRun policy journals the same reasons with DryRunPrefix before them.
const (
	// Ejections: the rule that took a key out of rotation.
	ReasonErrorRateExceeded   = "ErrorRateExceeded"
	ReasonTimeoutRateExceeded = "TimeoutRateExceeded"
	ReasonLatencyP95Exceeded  = "LatencyP95Exceeded"
	ReasonConsecutiveFailures = "ConsecutiveFailures"
	ReasonHealthScoreLow      = "HealthScoreLow"
	ReasonRampErrorRise       = "RampErrorRise"
	ReasonRampLatencyRise     = "RampLatencyRise"
	// ReasonProbeFailed: a probe of an ejected key failed; its cooldown restarts, and it is
	// the same ejection (see NewEjection).
	ReasonProbeFailed = "ProbeFailed"

	// The way back: cooldown over, probes passed, the ramp's steps and its end.
	ReasonCooldownElapsed = "CooldownElapsed"
	ReasonProbesPassed    = "ProbesPassed"
	ReasonRampStep        = "RampStep"
	ReasonRampCompleted   = "RampCompleted"

	// The health score's soft phase, and 429s.
	ReasonHealthScoreDegraded  = "HealthScoreDegraded"
	ReasonHealthScoreRecovered = "HealthScoreRecovered"
	ReasonRateLimited          = "RateLimited"
	ReasonRateLimitRecovered   = "RateLimitRecovered"

	// An operator's override set or lifted.
	ReasonDisabled = "Disabled"
	ReasonEnabled  = "Enabled"
)

// NewEjection reports whether a transition takes a key out of rotation anew: to Ejected from
// anything but Probing. A failed probe (here or, adopted, from the fleet) continues the ejection
// already running, and the engine counts it so; a dry run's would-be ejection is no ejection.
// The proxy's ejection metric, replay, simulate and the demo all count ejections by it.
func NewEjection(from, to Phase, reason string) bool {
	return to == PhaseEjected && from != PhaseProbing && reason != ReasonProbeFailed &&
		!strings.HasPrefix(reason, DryRunPrefix)
}

// NewEjection reports whether ev takes its key out of rotation anew (NewEjection).
func (ev Event) NewEjection() bool { return NewEjection(ev.From, ev.To, ev.Reason) }
