package health

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestRateLimited(t *testing.T) {
	set := chat()
	e := newEngine(t, set, kA)
	cands := []Candidate{{Channel: kA.Channel, Weight: 100}}
	routable := func(at time.Time) (float64, bool) {
		r := e.Select(at, kA.Model, cands, StrategyPriority, false, 0, nil)
		if len(r) == 0 {
			return 0, false
		}
		return r[0].Weight, true
	}

	// Background traffic, then a storm of 429s for 3 s, each asking for 5 s.
	for i := range 30 {
		e.Observe(kA, success(t0.Add(time.Duration(i)*time.Second), time.Second))
	}
	stormStart := t0.Add(30 * time.Second)
	var last time.Time
	for i := range 300 {
		last = stormStart.Add(time.Duration(i) * 10 * time.Millisecond)
		e.Observe(kA, Observation{At: last, Outcome: OutcomeRateLimited, RetryAfter: 5 * time.Second, Latency: 50 * time.Millisecond})
	}
	until := last.Add(5 * time.Second)

	st := status(t, e, last, kA)
	if st.Phase != PhaseRateLimited || st.TrafficPercent != 0 || !st.RetryAfterUntil.Equal(until) {
		t.Fatalf("during the storm: %+v, want RateLimited, 0%%, Retry-After until %s", st, until)
	}
	if _, ok := routable(until.Add(-time.Nanosecond)); ok {
		t.Error("routable before Retry-After passed")
	}
	// Three bursts (one per second of storm): 100 -> 50 -> 25 -> 12.5.
	w, ok := routable(until)
	if !ok || w != 12.5 {
		t.Errorf("at Retry-After: routable %v weight %v, want true 12.5", ok, w)
	}
	// The share climbs back at 100 points per Window: from 12.5 to 100 takes 52.5 s.
	if w, _ := routable(until.Add(30 * time.Second)); w != 62.5 {
		t.Errorf("30s after Retry-After: weight %v, want 62.5", w)
	}
	healed := until.Add(52500 * time.Millisecond)
	if st := status(t, e, healed.Add(-time.Millisecond), kA); st.Phase != PhaseRateLimited {
		t.Errorf("just before healing: %s, want RateLimited", st.Phase)
	}
	if st := status(t, e, healed, kA); st.Phase != PhaseHealthy || st.TrafficPercent != 100 {
		t.Errorf("healed: %+v, want Healthy 100%%", st)
	}

	evs := eventsOf(e, kA)
	if got := reasons(evs); strings.Join(got, ",") != "RateLimited,RateLimitRecovered" {
		t.Fatalf("journal %v, want RateLimited,RateLimitRecovered", got)
	}
	if !evs[0].At.Equal(stormStart) || !evs[1].At.Equal(healed) {
		t.Errorf("events at %s and %s, want %s and %s", evs[0].At, evs[1].At, stormStart, healed)
	}
	if st := status(t, e, healed, kA); st.Ejections != 0 || st.WindowFailures != 0 {
		t.Errorf("429s counted against the channel: %+v", st)
	}
}

func TestRateLimitedNeverEjects(t *testing.T) {
	e := newEngine(t, chat(), kA)
	// Ten minutes of nothing but 429s, with and without Retry-After.
	for i := range 6000 {
		ra := time.Duration(0)
		if i%3 == 0 {
			ra = 2 * time.Second
		}
		e.Observe(kA, Observation{At: t0.Add(time.Duration(i) * 100 * time.Millisecond), Outcome: OutcomeRateLimited, RetryAfter: ra})
	}
	for _, ev := range eventsOf(e, kA) {
		if ev.To == PhaseEjected || ev.To == PhaseDegraded {
			t.Fatalf("429s alone gave %s: %s", ev.To, ev.Message)
		}
	}
	if st := status(t, e, t0.Add(10*time.Minute), kA); st.Phase != PhaseRateLimited || st.Score != 100 {
		t.Errorf("after a 429 storm: %+v, want RateLimited with score 100", st)
	}
}

func TestLatencyOnlyDegradation(t *testing.T) {
	// With the default 70/30 split latency alone can cost at most 30 points (score >= 70), so it
	// can never degrade a channel; a policy that cares about latency gives it more weight.
	set := chat()
	set.ErrorWeightPercent = 20
	e := newEngine(t, set, kA)
	cands := []Candidate{{Channel: kA.Channel, Weight: 100}}

	// 2 requests/s; latencies spread over [0.5m, 1.45m] for a mean m; one 5xx in 50 (flat 2%).
	// m is 2 s for 10 minutes, climbs to 6 s over the next minute, then stays.
	climb := t0.Add(10 * time.Minute)
	mean := func(at time.Time) float64 {
		d := at.Sub(climb).Seconds()
		return 2 + 4*min(1, max(0, d/60))
	}
	var (
		degradedAt, lowFrom time.Time
		sawReduced          bool
		baseline            time.Duration
	)
	i := 0
	for at := t0; at.Before(t0.Add(20 * time.Minute)); at = at.Add(500 * time.Millisecond) {
		o := success(at, time.Duration(mean(at)*(0.5+0.05*float64(i%20))*float64(time.Second)))
		if i%50 == 49 {
			o = failure(at, OutcomeServerError)
		}
		e.Observe(kA, o)
		i++
		st := status(t, e, at, kA)
		if at.Equal(climb) {
			baseline = st.Baseline
		}
		if st.Phase == PhaseEjected {
			break
		}
		if st.Phase == PhaseDegraded && degradedAt.IsZero() {
			degradedAt = at
			if at.Before(climb) {
				t.Fatalf("degraded before latency climbed: %+v", st)
			}
		}
		if st.Phase == PhaseDegraded && !sawReduced {
			r := e.Select(at, kA.Model, cands, StrategyWeighted, false, 0.5, nil)
			if len(r) != 1 || math.Abs(r[0].Weight-float64(st.Score)) > 1e-9 || r[0].Phase != PhaseDegraded {
				t.Errorf("degraded routes %+v, want weight 100*%d/100", r, st.Score)
			}
			sawReduced = true
		}
		if st.Score < set.EjectBelow {
			if lowFrom.IsZero() {
				lowFrom = at
			}
		} else {
			lowFrom = time.Time{}
		}
	}

	if baseline < 2*time.Second || baseline > 3500*time.Millisecond {
		t.Errorf("healthy baseline %s, want about the healthy p95 (~2.9s)", baseline)
	}
	if degradedAt.IsZero() || !sawReduced {
		t.Fatal("never Degraded")
	}
	ev, ok := firstTo(eventsOf(e, kA), PhaseEjected)
	if !ok {
		t.Fatalf("never ejected; status %+v", status(t, e, t0.Add(20*time.Minute), kA))
	}
	if ev.Reason != "HealthScoreLow" || !strings.Contains(ev.Message, "for 3m0s") {
		t.Errorf("ejected by %s: %s, want HealthScoreLow for 3m0s", ev.Reason, ev.Message)
	}
	// Ejected EjectAfter after the score went under EjectBelow (sampled every 0.5 s; the score is
	// re-evaluated at every 1 s bucket boundary).
	if lowFrom.IsZero() || ev.At.Sub(lowFrom) < set.EjectAfter-time.Second || ev.At.Sub(lowFrom) > set.EjectAfter+time.Second {
		t.Errorf("ejected at +%s, score below %d since +%s", ev.At.Sub(t0), set.EjectBelow, lowFrom.Sub(t0))
	}
	st := status(t, e, ev.At, kA)
	if ratio := float64(st.P95) / float64(baseline); ratio < 2.5 || ratio > 3.5 {
		t.Errorf("p95 %s vs healthy baseline %s: ratio %.2f, want about 3", st.P95, baseline, ratio)
	}
	t.Logf("degraded at +%s, ejected at +%s: %s", degradedAt.Sub(t0), ev.At.Sub(t0), ev.Message)
}

func TestDisabled(t *testing.T) {
	set := chat()
	until := t0.Add(15 * time.Minute)
	cands := []Candidate{{Channel: kA.Channel, Weight: 100}}
	target := Target{Key: kA, Settings: set, Disabled: true, DisabledUntil: until, DisabledReason: "INC-1234 provider incident"}

	t.Run("expires into probes and the ramp", func(t *testing.T) {
		e := newEngine(t, set, kA)
		e.Configure(t0, []Target{target})
		ev, ok := firstTo(eventsOf(e, kA), PhaseDisabled)
		if !ok || ev.Actor != "operator" || ev.Reason != "Disabled" ||
			!strings.Contains(ev.Message, "INC-1234 provider incident") || !strings.Contains(ev.Message, "2026-11-30T10:15:00Z") {
			t.Fatalf("disable event %+v", ev)
		}
		// Wins over everything: failures, successes and panic routing change nothing.
		for i := range 100 {
			e.Observe(kA, failure(t0.Add(time.Duration(i)*time.Second), OutcomeTimeout))
		}
		if st := status(t, e, t0.Add(2*time.Minute), kA); st.Phase != PhaseDisabled || st.TrafficPercent != 0 {
			t.Fatalf("disabled key: %+v", st)
		}
		if r := e.Select(t0.Add(2*time.Minute), kA.Model, cands, StrategyHealthScore, true, 0, nil); len(r) != 0 {
			t.Fatalf("disabled key returned in panic: %+v", r)
		}
		e.Tick(until.Add(-time.Nanosecond))
		if st := status(t, e, until.Add(-time.Nanosecond), kA); st.Phase != PhaseDisabled {
			t.Fatalf("override ended early: %s", st.Phase)
		}
		// The override ends by itself; an identical reload afterwards does not re-disable.
		e.Configure(until.Add(time.Second), []Target{target})
		ev, ok = firstTo(eventsOf(e, kA), PhaseProbing)
		if !ok || !ev.At.Equal(until) || ev.Actor != "operator" || ev.Reason != "Enabled" {
			t.Fatalf("expiry event %+v, want Disabled->Probing at %s by operator", ev, until)
		}
		rampAt := probeThrough(t, e, kA, until.Add(time.Second), set.ProbeInterval)
		if st := status(t, e, rampAt, kA); st.Phase != PhaseRampingUp || st.TrafficPercent != set.RampSteps[0] {
			t.Errorf("after the probes: %+v, want RampingUp at %d%%", st, set.RampSteps[0])
		}
	})

	t.Run("lifted by a reload", func(t *testing.T) {
		e := newEngine(t, set, kA)
		e.Configure(t0, []Target{{Key: kA, Settings: set, Disabled: true}})
		lift := t0.Add(time.Hour)
		e.Configure(lift, []Target{{Key: kA, Settings: set}})
		evs := eventsOf(e, kA)
		if got := reasons(evs); strings.Join(got, ",") != "Disabled,Enabled" || evs[1].To != PhaseProbing || !evs[1].At.Equal(lift) {
			t.Fatalf("journal %+v, want Disabled then Enabled -> Probing at %s", evs, lift)
		}
		if r := e.Select(lift, kA.Model, cands, StrategyHealthScore, false, 0, nil); len(r) != 0 {
			t.Errorf("lifted key routable before probes and ramp: %+v", r)
		}
	})
}

func TestPanicRouting(t *testing.T) {
	set := chat()
	cands := []Candidate{{Channel: kA.Channel, Weight: 100}, {Channel: kB.Channel, Weight: 300}, {Channel: kC.Channel, Weight: 50}}
	now := t0.Add(time.Minute)
	for _, tc := range []struct {
		name      string
		ejected   []Key
		disabled  []Key
		panicOn   bool
		wantRoute string // "" for none
		wantPanic bool
	}{
		{"one routable: no panic", []Key{kA, kB}, nil, true, kC.Channel, false},
		{"all out, panic on: least bad", []Key{kA, kB, kC}, nil, true, kB.Channel, true},
		{"all out, panic off: nothing", []Key{kA, kB, kC}, nil, false, "", false},
		{"disabled never returned", []Key{kA, kC}, []Key{kB}, true, kA.Channel, true},
		{"all disabled: nothing even in panic", nil, []Key{kA, kB, kC}, true, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, set, kA, kB, kC)
			var targets []Target
			for _, k := range []Key{kA, kB, kC} {
				targets = append(targets, Target{Key: k, Settings: set, Disabled: contains(tc.disabled, k)})
			}
			e.Configure(t0, targets)
			for _, k := range tc.ejected {
				eject(t, e, k, t0)
			}
			// Among the ejected, kB failed least (best score) and kC most (worst).
			extra := map[Key]int{kA: 1, kC: 10}
			for _, k := range tc.ejected {
				for i := range extra[k] {
					e.Observe(k, failure(t0.Add(5*time.Second+time.Duration(i)*time.Millisecond), OutcomeTimeout))
				}
			}
			routes := e.Select(now, kA.Model, cands, StrategyHealthScore, tc.panicOn, 0.3, nil)
			if tc.wantRoute == "" {
				if len(routes) != 0 {
					t.Fatalf("routes %+v, want none", routes)
				}
				return
			}
			if len(routes) != 1 || routes[0].Channel != tc.wantRoute || routes[0].Panic != tc.wantPanic {
				t.Fatalf("routes %+v, want only %s with Panic=%v", routes, tc.wantRoute, tc.wantPanic)
			}
			if st := status(t, e, now, Key{tc.wantRoute, kA.Model}); st.Panic != tc.wantPanic {
				t.Errorf("status Panic = %v, want %v", st.Panic, tc.wantPanic)
			}
		})
	}
}

func contains(ks []Key, k Key) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}
