package controller

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
)

// ConditionOverrideApplied says, while spec.disabled is true, whether the operator override is in
// effect: True (Disabled) while it is; False with DisabledUntilInPast when spec.disabledUntil had
// passed before it ever was (admission cannot read the clock, so `kubectl patch` accepts such a
// time and only the controller can say so); False with OverrideEnded when disabledUntil has come,
// until the controller has cleared the three fields. Absent while spec.disabled is false.
const ConditionOverrideApplied = "OverrideApplied"

// Reasons of the override's condition and Events (and ReasonDisabled).
const (
	ReasonDisabledUntilInPast = "DisabledUntilInPast"
	ReasonOverrideEnded       = "OverrideEnded"
)

// overrideState is the operator override of a channel (spec.disabled, disabledUntil) as the
// controller acts on it.
type overrideState uint8

const (
	// overrideOff: spec.disabled is false.
	overrideOff overrideState = iota
	// overrideOn: in effect; no disabledUntil, or one still ahead.
	overrideOn
	// overrideEnded: disabledUntil came while the override was in effect at this generation. An
	// Event (OverrideEnded) says so and the controller clears the fields, so that the next
	// `kubectl patch … {"spec":{"disabled":true}}` is a change rather than a no-op.
	overrideEnded
	// overrideInPast: disabledUntil had passed before the override was in effect at this
	// generation (it was written in the past). Not in effect; a Warning Event and the condition
	// name the time, and the fields stay as the operator wrote them.
	overrideInPast
)

func (s overrideState) String() string {
	switch s {
	case overrideOff:
		return "Off"
	case overrideOn:
		return "On"
	case overrideEnded:
		return "Ended"
	case overrideInPast:
		return "InPast"
	}
	return "Unknown"
}

// overrideAt is the override of spec at now. conds are the conditions last written and
// generation the object's: whether a passed disabledUntil ended an override or never let it
// start is what the status says about this generation (an override in effect, or ended, at it),
// so the answer holds across restarts and failed writes.
func overrideAt(now time.Time, spec *v1alpha1.ProviderChannelSpec, generation int64, conds []metav1.Condition) overrideState {
	switch {
	case !spec.Disabled:
		return overrideOff
	case spec.DisabledUntil == nil || now.Before(spec.DisabledUntil.Time):
		return overrideOn
	case wasInEffect(conds, generation):
		return overrideEnded
	}
	return overrideInPast
}

// wasInEffect reports whether the conditions written at generation say the override was in effect
// (or had just ended) then.
func wasInEffect(conds []metav1.Condition, generation int64) bool {
	if c := meta.FindStatusCondition(conds, ConditionOverrideApplied); c != nil && c.ObservedGeneration == generation {
		return c.Reason == ReasonDisabled || c.Reason == ReasonOverrideEnded
	}
	// A status written before OverrideApplied existed: Available said Disabled.
	c := meta.FindStatusCondition(conds, v1alpha1.ConditionAvailable)
	return c != nil && c.ObservedGeneration == generation && c.Reason == ReasonDisabled
}

// overrideCondition is ConditionOverrideApplied for a state; ok is false when it is absent (off).
// Its message never holds the current time, so that an unchanged override writes no status.
func overrideCondition(spec *v1alpha1.ProviderChannelSpec, st overrideState, by string) (c metav1.Condition, ok bool) {
	c = metav1.Condition{Type: ConditionOverrideApplied}
	switch st {
	case overrideOn:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonDisabled, disabledMessage(spec, by)
	case overrideEnded:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonOverrideEnded, overrideEndedNote(spec)
	case overrideInPast:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonDisabledUntilInPast, inPastNote(spec)
	default:
		return c, false
	}
	return c, true
}

func overrideEndedNote(spec *v1alpha1.ProviderChannelSpec) string {
	return fmt.Sprintf("override ended at disabledUntil %s; the controller clears spec.disabled, disabledUntil and disabledReason", untilText(spec))
}

func inPastNote(spec *v1alpha1.ProviderChannelSpec) string {
	return fmt.Sprintf("spec.disabled is not in effect: spec.disabledUntil %s had passed before the override took effect, so the channel stays in rotation; "+
		"the spec is left as written: set a time ahead (disabledUntil: \"$(date -u -d '+30 min' +%%FT%%TZ)\") or remove disabledUntil", untilText(spec))
}

func untilText(spec *v1alpha1.ProviderChannelSpec) string {
	if spec.DisabledUntil == nil {
		return ""
	}
	return spec.DisabledUntil.UTC().Format(time.RFC3339)
}
