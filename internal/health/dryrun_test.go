package health

import (
	"strings"
	"testing"
	"time"
)

// feedErrorRate sends n observations to k, one every 100ms from start, failing 3 in 10 but
// never 5 in a row: only the error-rate rule can trip. It returns the time of the last one.
func feedErrorRate(e *Engine, k Key, start time.Time, n int) time.Time {
	var at time.Time
	for i := range n {
		at = start.Add(time.Duration(i) * 100 * time.Millisecond)
		if i%10 == 2 || i%10 == 5 || i%10 == 8 {
			e.Observe(k, failure(at, OutcomeServerError))
		} else {
			e.Observe(k, success(at, 200*time.Millisecond))
		}
	}
	return at
}

// TestDryRunShadow: a DryRun key's shadow ejects on the same outcomes and at the same moment as
// an Enforce key's machine, journals it with the DryRun prefix and a "would eject" message, and
// walks on through cooldown, live traffic as its probes and the ramp back to Healthy, while the
// key itself stays Healthy, routable and unprobed.
func TestDryRunShadow(t *testing.T) {
	set := chat()
	dry := NewEngine(0)
	dry.Configure(t0, []Target{{Key: kA, Settings: set, DryRun: true}, {Key: kB, Settings: set}})
	enforce := newEngine(t, set, kA)

	last := feedErrorRate(dry, kA, t0, 60)
	feedErrorRate(enforce, kA, t0, 60)

	real, ok := firstTo(eventsOf(enforce, kA), PhaseEjected)
	if !ok {
		t.Fatalf("the Enforce engine did not eject: %v", reasons(eventsOf(enforce, kA)))
	}
	evs := eventsOf(dry, kA)
	would, ok := firstTo(evs, PhaseEjected)
	if !ok {
		t.Fatalf("the shadow did not eject: %v", reasons(evs))
	}
	if would.Reason != DryRunPrefix+real.Reason || !would.At.Equal(real.At) {
		t.Errorf("shadow: %s at %s; Enforce: %s at %s", would.Reason, would.At, real.Reason, real.At)
	}
	if want := "would eject openai-direct × gpt-4o: " + real.Message; would.Message != want {
		t.Errorf("message %q, want %q", would.Message, want)
	}
	for _, ev := range evs {
		if !strings.HasPrefix(ev.Reason, DryRunPrefix) {
			t.Errorf("a DryRun key journaled %s without the prefix", ev.Reason)
		}
	}

	st := status(t, dry, last, kA)
	if st.Phase != PhaseHealthy || st.TrafficPercent != 100 || !st.DryRun || st.DryRunPhase != PhaseEjected ||
		st.DryRunReason != would.Reason || st.DryRunWindowFailures == 0 {
		t.Errorf("status: %+v", st)
	}
	if routes := dry.Select(last, "gpt-4o", []Candidate{{Channel: kA.Channel, Weight: 100}}, StrategyPriority, false, 0.5, nil); len(routes) != 1 || routes[0].Panic {
		t.Errorf("Select of a DryRun key: %+v, want it routable", routes)
	}
	if st := status(t, dry, last, kB); st.DryRun || st.Phase != PhaseHealthy {
		t.Errorf("the Enforce key next to it: %+v", st)
	}

	// Cooldown, then the live attempts count as the probes the shadow cannot send, then the ramp.
	now := last.Add(set.Cooldown)
	dry.Tick(now)
	if due := dry.ProbesDue(now, nil); len(due) != 0 {
		t.Errorf("ProbesDue handed out %v for a dry run", due)
	}
	if st := status(t, dry, now, kA); st.DryRunPhase != PhaseProbing {
		t.Fatalf("after the cooldown the shadow is %s, want Probing", st.DryRunPhase)
	}
	for i := range set.ProbeSuccessesRequired {
		dry.Observe(kA, success(now.Add(time.Duration(i)*time.Second), 200*time.Millisecond))
	}
	now = now.Add(time.Duration(set.ProbeSuccessesRequired) * time.Second)
	if st := status(t, dry, now, kA); st.DryRunPhase != PhaseRampingUp {
		t.Fatalf("after %d live successes the shadow is %s, want RampingUp", set.ProbeSuccessesRequired, st.DryRunPhase)
	}
	for range len(set.RampSteps) + 1 {
		now = now.Add(set.RampHold)
		dry.Tick(now)
	}
	if st := status(t, dry, now, kA); st.DryRunPhase != PhaseHealthy || st.Phase != PhaseHealthy {
		t.Errorf("after the ramp: %+v", st)
	}
	want := "DryRunHealthScoreDegraded DryRunErrorRateExceeded DryRunCooldownElapsed DryRunProbesPassed DryRunRampStep DryRunRampStep DryRunRampStep DryRunRampCompleted"
	if got := strings.Join(reasons(eventsOf(dry, kA)), " "); got != want {
		t.Errorf("journal\n %s, want\n %s", got, want)
	}
}

// TestDryRunToEnforce: switching a policy back to Enforce drops the shadow: the key's own
// machine decides from then on, and its journal carries no prefix.
func TestDryRunToEnforce(t *testing.T) {
	set := chat()
	e := NewEngine(0)
	e.Configure(t0, []Target{{Key: kA, Settings: set, DryRun: true}})
	for i := range 5 {
		e.Observe(kA, failure(t0.Add(time.Duration(i)*time.Second), OutcomeTimeout))
	}
	at := t0.Add(5 * time.Second)
	if st := status(t, e, at, kA); st.Phase != PhaseHealthy || st.DryRunPhase != PhaseEjected {
		t.Fatalf("dry run: %+v", st)
	}
	e.Configure(at, []Target{{Key: kA, Settings: set}})
	if st := status(t, e, at, kA); st.DryRun || st.Phase != PhaseHealthy {
		t.Fatalf("after Enforce: %+v", st)
	}
	ejectedAt := eject(t, e, kA, at.Add(time.Second))
	ev, _ := firstTo(eventsOf(e, kA)[1:], PhaseEjected)
	if ev.Reason != "ConsecutiveFailures" || !ev.At.Equal(ejectedAt) {
		t.Errorf("Enforce ejection: %+v", ev)
	}
}
