package health

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFullRecovery(t *testing.T) {
	set := chat()
	e := newEngine(t, set, kA, kB)
	probe := func(at time.Time, latency time.Duration) {
		e.Observe(kA, Observation{At: at, Outcome: OutcomeSuccess, Latency: latency, Probe: true})
	}
	due := func(at time.Time) bool {
		t.Helper()
		keys := e.ProbesDue(at, nil)
		return slices.Contains(keys, kA)
	}
	wantPhase := func(at time.Time, p Phase, traffic int) {
		t.Helper()
		st := status(t, e, at, kA)
		if st.Phase != p || st.TrafficPercent != traffic {
			t.Fatalf("at +%s: phase %s traffic %d%%, want %s %d%% (%+v)", at.Sub(t0), st.Phase, st.TrafficPercent, p, traffic, st)
		}
	}

	ejectedAt := eject(t, e, kA, t0)
	wantPhase(ejectedAt, PhaseEjected, 0)
	cool1 := ejectedAt.Add(set.Cooldown)
	if st := status(t, e, ejectedAt, kA); !st.CooldownUntil.Equal(cool1) {
		t.Fatalf("first cooldown until %s, want %s", st.CooldownUntil, cool1)
	}
	if due(cool1.Add(-time.Nanosecond)) {
		t.Fatal("probe due before the cooldown is over")
	}

	// Probes: due at once, then once per interval; the third one is slow and fails.
	if !due(cool1) {
		t.Fatal("no probe due when the cooldown ended")
	}
	wantPhase(cool1, PhaseProbing, 0)
	if due(cool1) || due(cool1.Add(9*time.Second)) {
		t.Fatal("a probe was handed out twice within the interval")
	}
	probe(cool1.Add(time.Second), time.Second)
	if !due(cool1.Add(10 * time.Second)) {
		t.Fatal("second probe not due after the interval")
	}
	probe(cool1.Add(11*time.Second), 2*time.Second)
	if !due(cool1.Add(20 * time.Second)) {
		t.Fatal("third probe not due")
	}
	slowAt := cool1.Add(31 * time.Second)
	probe(slowAt, set.ProbeMaxLatency+time.Second)
	wantPhase(slowAt, PhaseEjected, 0)
	cool2 := slowAt.Add(set.Cooldown) // a failed probe restarts the same cooldown, not a doubled one
	if st := status(t, e, slowAt, kA); !st.CooldownUntil.Equal(cool2) || st.Ejections != 1 {
		t.Fatalf("after a slow probe: cooldown until %s, ejections %d; want %s, 1", st.CooldownUntil, st.Ejections, cool2)
	}

	// Three good probes in a row start the ramp.
	rampAt := probeThrough(t, e, kA, cool2, set.ProbeInterval)
	if want := cool2.Add(2 * set.ProbeInterval); !rampAt.Equal(want) {
		t.Fatalf("ramp started at %s, want %s", rampAt, want)
	}

	// The ramp: real traffic (1 request/s, all fine) through every step.
	cands := []Candidate{{Channel: kA.Channel, Weight: 100}, {Channel: kB.Channel, Weight: 100}}
	now := rampAt
	for i, share := range set.RampSteps {
		stepStart := rampAt.Add(time.Duration(i) * set.RampHold)
		wantPhase(stepStart, PhaseRampingUp, share)
		routes := e.Select(stepStart, kA.Model, cands, StrategyWeighted, true, 0.99, nil)
		if r := routeOf(routes, kA.Channel); r == nil || r.Weight != float64(share) {
			t.Fatalf("step %d%%: routes %+v, want %s with weight %d", share, routes, kA.Channel, share)
		}
		for ; now.Before(stepStart.Add(set.RampHold)); now = now.Add(time.Second) {
			e.Observe(kA, success(now, time.Second))
			e.Observe(kB, success(now, time.Second))
		}
	}
	done := rampAt.Add(time.Duration(len(set.RampSteps)) * set.RampHold)
	wantPhase(done.Add(-time.Nanosecond), PhaseRampingUp, 100)
	wantPhase(done, PhaseHealthy, 100)

	evs := eventsOf(e, kA)
	want := []string{"ConsecutiveFailures", "CooldownElapsed", "ProbeFailed", "CooldownElapsed", "ProbesPassed",
		"RampStep", "RampStep", "RampStep", "RampCompleted"}
	if got := reasons(evs); !slices.Equal(got, want) {
		t.Fatalf("journal reasons %v, want %v", got, want)
	}
	wantAt := []time.Time{ejectedAt, cool1, slowAt, cool2, rampAt,
		rampAt.Add(set.RampHold), rampAt.Add(2 * set.RampHold), rampAt.Add(3 * set.RampHold), done}
	wantActor := []string{"rule", "rule", "probe", "rule", "probe", "rule", "rule", "rule", "rule"}
	for i, ev := range evs {
		if !ev.At.Equal(wantAt[i]) || ev.Actor != wantActor[i] {
			t.Errorf("event %d %s at +%s by %s, want +%s by %s", i, ev.Reason, ev.At.Sub(t0), ev.Actor, wantAt[i].Sub(t0), wantActor[i])
		}
	}
	newEjections := 0
	for _, ev := range evs {
		if ev.NewEjection() {
			newEjections++
		}
	}
	if st := status(t, e, done, kA); newEjections != 1 || st.Ejections != newEjections {
		t.Errorf("%d new ejections in the journal, the engine counts %d; want 1 (a failed probe is the same ejection)", newEjections, st.Ejections)
	}
	if !strings.Contains(evs[2].Message, "11s > 10s") {
		t.Errorf("slow probe message %q lacks the figures", evs[2].Message)
	}
}

func TestRampRiseDoublesCooldown(t *testing.T) {
	for _, tc := range []struct {
		name       string
		at15       func(e *Engine, now time.Time) // traffic during the 15% step
		wantReason string
	}{
		{
			name: "one failure early in the step",
			at15: func(e *Engine, now time.Time) {
				e.Observe(kA, success(now, time.Second))
				e.Observe(kA, failure(now.Add(time.Second), OutcomeServerError))
			},
			wantReason: "RampErrorRise",
		},
		{
			name: "p95 above twice the baseline",
			at15: func(e *Engine, now time.Time) {
				for i := range 20 {
					e.Observe(kA, success(now.Add(time.Duration(i)*time.Second), 5*time.Second))
				}
			},
			wantReason: "RampLatencyRise",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := chat()
			e := newEngine(t, set, kA)
			// A baseline of about 1s first, so the latency rule has something to compare with.
			for i := range 120 {
				e.Observe(kA, success(t0.Add(time.Duration(i)*time.Second), time.Second))
			}
			rampAt := toRamp(t, e, kA, t0.Add(3*time.Minute))
			step15 := rampAt.Add(set.RampHold)
			if st := status(t, e, step15, kA); st.TrafficPercent != 15 {
				t.Fatalf("traffic %d%% at the second step, want 15", st.TrafficPercent)
			}
			tc.at15(e, step15.Add(time.Second))
			ev, ok := lastTo(eventsOf(e, kA), PhaseEjected)
			if !ok || ev.Reason != tc.wantReason {
				t.Fatalf("last ejection %+v, want reason %s", ev, tc.wantReason)
			}
			st := status(t, e, ev.At, kA)
			if got := st.CooldownUntil.Sub(ev.At); got != 2*set.Cooldown {
				t.Errorf("cooldown after a ramp rise %s, want %s", got, 2*set.Cooldown)
			}
			if st.Ejections != 2 {
				t.Errorf("ejections %d, want 2", st.Ejections)
			}
		})
	}
}

func TestCooldownCapAndDecay(t *testing.T) {
	set := chat()
	e := newEngine(t, set, kA)
	now := t0
	var got []time.Duration
	// Ejected again right after every full recovery: 5m, 10m, 20m, then capped at 30m.
	for range 5 {
		ejectedAt := eject(t, e, kA, now)
		st := status(t, e, ejectedAt, kA)
		got = append(got, st.CooldownUntil.Sub(ejectedAt))
		rampAt := probeThrough(t, e, kA, st.CooldownUntil, set.ProbeInterval)
		now = rampAt.Add(time.Duration(len(set.RampSteps)) * set.RampHold)
	}
	want := []time.Duration{5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 30 * time.Minute, 30 * time.Minute}
	if !slices.Equal(got, want) {
		t.Fatalf("cooldowns %v, want %v", got, want)
	}
	// 30 min of service forgets one doubling per MaxCooldown: after 61 min, two of five levels.
	now = now.Add(2*set.MaxCooldown + time.Minute)
	ejectedAt := eject(t, e, kA, now)
	if got := status(t, e, ejectedAt, kA).CooldownUntil.Sub(ejectedAt); got != 30*time.Minute {
		t.Errorf("after 61 min of service: cooldown %s, want 30m (level 5-2=3, capped)", got)
	}
	rampAt := probeThrough(t, e, kA, ejectedAt.Add(30*time.Minute), set.ProbeInterval)
	now = rampAt.Add(time.Duration(len(set.RampSteps))*set.RampHold + 4*set.MaxCooldown)
	ejectedAt = eject(t, e, kA, now)
	if got := status(t, e, ejectedAt, kA).CooldownUntil.Sub(ejectedAt); got != 5*time.Minute {
		t.Errorf("after 2h of service: cooldown %s, want 5m", got)
	}
}

func TestProbesDue(t *testing.T) {
	set := chat()
	e := newEngine(t, set, kA, kB)
	ejA := eject(t, e, kA, t0)
	ejB := eject(t, e, kB, t0)
	start := ejA.Add(set.Cooldown)
	if !ejA.Equal(ejB) {
		t.Fatal("test setup: ejections differ")
	}
	keys := e.ProbesDue(start, nil)
	if !slices.Equal(keys, []Key{kB, kA}) { // channel order: azure-eastus, openai-direct
		t.Fatalf("ProbesDue = %v, want both, sorted", keys)
	}
	// A probe whose answer never comes blocks the key for ProbeMaxLatency, then it is due again.
	if keys := e.ProbesDue(start.Add(set.ProbeMaxLatency-time.Nanosecond), nil); len(keys) != 0 {
		t.Errorf("re-issued a probe still in flight: %v", keys)
	}
	if keys := e.ProbesDue(start.Add(set.ProbeMaxLatency), nil); len(keys) != 2 {
		t.Errorf("lost probes not re-issued after ProbeMaxLatency: %v", keys)
	}
	// A 429 answer is neutral: no success, no failure, next probe after the interval.
	at := start.Add(set.ProbeMaxLatency + time.Second)
	e.Observe(kA, Observation{At: at, Outcome: OutcomeRateLimited, Probe: true})
	if st := status(t, e, at, kA); st.Phase != PhaseProbing {
		t.Errorf("429 on a probe: phase %s, want Probing", st.Phase)
	}
	// Non-probe traffic during Probing (panic routing) decides nothing.
	for i := range 10 {
		e.Observe(kA, success(at.Add(time.Duration(i)*time.Millisecond), time.Second))
	}
	if st := status(t, e, at, kA); st.Phase != PhaseProbing {
		t.Errorf("panic traffic during Probing moved the key to %s", st.Phase)
	}
}

func lastTo(evs []Event, p Phase) (Event, bool) {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].To == p {
			return evs[i], true
		}
	}
	return Event{}, false
}

func routeOf(routes []Route, channel string) *Route {
	for i := range routes {
		if routes[i].Channel == channel {
			return &routes[i]
		}
	}
	return nil
}
