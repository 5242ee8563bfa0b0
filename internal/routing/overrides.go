package routing

import (
	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
)

// WithOverrides returns a copy of t with the on-call override (spec.disabled, disabledUntil,
// disabledReason) of every channel taken from the current objects. The controller serves the last
// good table while some object has a problem; the override must still get through, or one broken
// manifest elsewhere would keep an on-call engineer from taking a failing provider out.
func WithOverrides(t *Table, channels []v1alpha1.ProviderChannel) *Table {
	out := *t
	out.Channels = make([]Channel, len(t.Channels))
	copy(out.Channels, t.Channels)
	for i := range out.Channels {
		ch := &out.Channels[i]
		for j := range channels {
			pc := &channels[j]
			if pc.Name != ch.Name || pc.Namespace != ch.Namespace {
				continue
			}
			ch.Disabled = pc.Spec.Disabled
			ch.DisabledReason, ch.DisabledUntil = "", nil
			if pc.Spec.Disabled {
				ch.DisabledReason = pc.Spec.DisabledReason
				ch.DisabledUntil = timePtr(pc.Spec.DisabledUntil)
			}
		}
	}
	return &out
}
