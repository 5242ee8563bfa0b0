package health

import "testing"

func TestNewEjection(t *testing.T) {
	for _, c := range []struct {
		from, to Phase
		reason   string
		want     bool
	}{
		{PhaseHealthy, PhaseEjected, ReasonConsecutiveFailures, true},
		{PhaseDegraded, PhaseEjected, ReasonHealthScoreLow, true},
		{PhaseRampingUp, PhaseEjected, ReasonRampErrorRise, true},
		{PhaseRateLimited, PhaseEjected, ReasonErrorRateExceeded, true},
		// A failed probe restarts the cooldown of the ejection already running.
		{PhaseProbing, PhaseEjected, ReasonProbeFailed, false},
		// A fleet verdict adopted while probing continues it too (the engine counts no ejection).
		{PhaseProbing, PhaseEjected, ReasonErrorRateExceeded, false},
		// A dry run's would-be ejection is no ejection.
		{PhaseHealthy, PhaseEjected, DryRunPrefix + ReasonErrorRateExceeded, false},
		{PhaseEjected, PhaseProbing, ReasonCooldownElapsed, false},
		{PhaseHealthy, PhaseDisabled, ReasonDisabled, false},
	} {
		ev := Event{From: c.from, To: c.to, Reason: c.reason}
		if got := ev.NewEjection(); got != c.want {
			t.Errorf("%s -> %s (%s): %v, want %v", c.from, c.to, c.reason, got, c.want)
		}
	}
}
