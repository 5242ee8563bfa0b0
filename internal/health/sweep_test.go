package health

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestSweepsSkipKeysAtRest: the periodic sweeps (Tick, ProbesDue, Updates) visit only the keys
// time can change and the ones touched since the last Updates, and that changes nothing. Two
// engines get the same traffic (failures that eject, probes, the ramp, 429s with Retry-After,
// panic routing, an override with an expiry, probes that are lost until the window has drained,
// answers to keys at rest stamped before the last Tick, models that go quiet): one is swept as
// before, every key visited by every sweep (sweepAll), the other only by the sweeps as they are.
// Their journals, probes and statuses must be the same, and Updates must have reported every
// change of status.
func TestSweepsSkipKeysAtRest(t *testing.T) {
	set := chat()
	set.Cooldown, set.MaxCooldown, set.RampHold, set.EjectAfter = 30*time.Second, 2*time.Minute, 20*time.Second, 30*time.Second
	var keys []Key
	for c := range 6 {
		for m := range 4 {
			keys = append(keys, Key{Channel: fmt.Sprintf("ch-%d", c), Model: fmt.Sprintf("m-%d", m)})
		}
	}
	targets := func(until time.Time, disabled ...Key) []Target {
		var out []Target
		for _, k := range keys {
			tg := Target{Key: k, Settings: set}
			if slices.Contains(disabled, k) {
				tg.Disabled, tg.DisabledUntil, tg.DisabledReason = true, until, "drill"
			}
			out = append(out, tg)
		}
		return out
	}
	full, lazy := NewEngine(4096), NewEngine(4096)
	full.sweepAll = true
	full.Configure(t0, targets(time.Time{}))
	lazy.Configure(t0, targets(time.Time{}))
	seen := map[Key]Status{}
	for _, st := range lazy.Updates(t0, nil) {
		seen[st.Key] = st
	}
	if len(seen) != len(keys) {
		t.Fatalf("the first Updates reported %d keys, want all %d", len(seen), len(keys))
	}
	cands := func(model string) []Candidate {
		var out []Candidate
		for c := range 6 {
			out = append(out, Candidate{Channel: fmt.Sprintf("ch-%d", c), Weight: 100})
		}
		return out
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var dueFull, dueLazy, routesFull, routesLazy []Key
	var dstFull, dstLazy []Route
	var pending []Key // probes answered at the next tick
	tick := 250 * time.Millisecond
	quiet := 0                      // statuses Updates reported of the models without traffic, from minute 17 on
	for i := 1; i <= 40*60*4; i++ { // 40 minutes of ticks
		now := t0.Add(time.Duration(i) * tick)
		sec := i / 4
		// Traffic: m-0 all along, m-1 for the first 15 minutes, m-2 in one burst. ch-1 fails on
		// m-0 from minute 2 to 6 and from minute 20 to 21 (ejections, a relapse in the ramp); ch-3
		// from minute 25 to 26, and its probes are lost until minute 30; ch-2 answers 429 with
		// Retry-After now and then.
		for range 3 {
			model := "m-0"
			switch r := rng.IntN(10); {
			case r < 3 && sec < 15*60:
				model = "m-1"
			case r < 4 && sec >= 8*60 && sec < 8*60+20:
				model = "m-2"
			}
			rnd := rng.Float64()
			dstFull = full.Select(now, model, cands(model), StrategyWeighted, true, rnd, dstFull)
			dstLazy = lazy.Select(now, model, cands(model), StrategyWeighted, true, rnd, dstLazy)
			routesFull, routesLazy = appendRoutes(routesFull[:0], model, dstFull), appendRoutes(routesLazy[:0], model, dstLazy)
			if !slices.Equal(routesFull, routesLazy) {
				t.Fatalf("%s: Select %v, with every key swept %v", now, routesLazy, routesFull)
			}
			if len(routesLazy) == 0 {
				continue
			}
			k := routesLazy[0]
			o := Observation{At: now, Outcome: OutcomeSuccess, Latency: time.Duration(200+rng.IntN(800)) * time.Millisecond}
			if rng.IntN(4) == 0 {
				o.At = now.Add(-100 * time.Millisecond) // an attempt that ended before this tick's Tick
			}
			switch {
			case k.Channel == "ch-1" && k.Model == "m-0" && (sec >= 120 && sec < 360 || sec >= 1200 && sec < 1260),
				k.Channel == "ch-3" && k.Model == "m-0" && sec >= 1500 && sec < 1560:
				o.Outcome = []Outcome{OutcomeServerError, OutcomeTimeout}[rng.IntN(2)]
			case k.Channel == "ch-2" && rng.IntN(150) == 0:
				o.Outcome, o.RetryAfter = OutcomeRateLimited, time.Duration(rng.IntN(3))*time.Second
			case rng.IntN(100) == 0:
				o.Outcome = OutcomeConnectionError
			}
			full.Observe(k, o)
			lazy.Observe(k, o)
		}
		// m-3 is never routed to; now and then an answer for it comes in stamped just before the
		// previous Tick (a key at rest the sweeps skipped: it counts at that Tick's time).
		if i%400 == 1 {
			o := Observation{At: now.Add(-tick - 50*time.Millisecond), Outcome: OutcomeSuccess, Latency: time.Second}
			full.Observe(Key{Channel: "ch-5", Model: "m-3"}, o)
			lazy.Observe(Key{Channel: "ch-5", Model: "m-3"}, o)
		}
		for _, k := range pending {
			if k.Channel == "ch-3" && sec < 1800 {
				continue // lost: handed out again after ProbeMaxLatency
			}
			o := Observation{At: now, Outcome: OutcomeSuccess, Latency: 300 * time.Millisecond, Probe: true}
			if k.Channel == "ch-1" && sec < 400 {
				o.Outcome = OutcomeServerError // still broken: the cooldown restarts
			}
			full.Observe(k, o)
			lazy.Observe(k, o)
		}
		// An operator disables ch-4 for two minutes at minute 10, by a reload: on m-0, which
		// has traffic, and on m-3, which has none (only the sweeps see its override expire).
		if i == 600*4 {
			off := []Key{{Channel: "ch-4", Model: "m-0"}, {Channel: "ch-4", Model: "m-3"}}
			full.Configure(now, targets(now.Add(2*time.Minute), off...))
			lazy.Configure(now, targets(now.Add(2*time.Minute), off...))
		}
		full.Tick(now)
		all := full.Status(now) // every key advanced at every tick, as the sweeps did before
		lazy.Tick(now)
		dueFull, dueLazy = full.ProbesDue(now, dueFull[:0]), lazy.ProbesDue(now, dueLazy[:0])
		if !slices.Equal(dueFull, dueLazy) {
			t.Fatalf("%s: ProbesDue %v, with every key swept %v", now, dueLazy, dueFull)
		}
		pending = append(pending[:0], dueLazy...)
		for _, st := range lazy.Updates(now, nil) {
			seen[st.Key] = st
			if sec >= 17*60 && (st.Model == "m-1" || st.Model == "m-2") {
				quiet++
			}
		}
		for _, want := range all {
			if got := seen[want.Key]; got != want {
				t.Fatalf("%s: %v: last reported status\n%+v\nwant\n%+v", now, want.Key, got, want)
			}
		}
	}
	evFull, evLazy := full.Events(0), lazy.Events(0)
	if !slices.Equal(evFull, evLazy) {
		t.Fatalf("journals differ:\n%s\nwith every key swept:\n%s", journal(evLazy), journal(evFull))
	}
	// The run must have gone through what it is meant to cover.
	for _, r := range []string{"ConsecutiveFailures", "ProbeFailed", "ProbesPassed", "RampStep", "RampCompleted", "RateLimited", "RateLimitRecovered", "Disabled", "Enabled"} {
		if !slices.ContainsFunc(evLazy, func(ev Event) bool { return ev.Reason == r }) {
			t.Errorf("no %s in the journal:\n%s", r, journal(evLazy))
		}
	}
	if quiet > 0 {
		t.Errorf("Updates reported %d statuses of keys without traffic: they are at rest", quiet)
	}
}

func appendRoutes(dst []Key, model string, routes []Route) []Key {
	for _, r := range routes {
		dst = append(dst, Key{Channel: r.Channel, Model: model})
	}
	return dst
}

func journal(evs []Event) string {
	s := ""
	for _, ev := range evs {
		s += fmt.Sprintf("%d %s %s/%s %s -> %s %s: %s\n", ev.Seq, ev.At.Format("15:04:05.000"), ev.Channel, ev.Model, ev.From, ev.To, ev.Reason, ev.Message)
	}
	return s
}

// TestUpdatesReportsWhatChanged: after Configure every key; then nothing while nothing happens;
// an observed key until its window has drained and it is at rest again; a key time can change
// (Ejected, waiting out its cooldown) at every call.
func TestUpdatesReportsWhatChanged(t *testing.T) {
	e := newEngine(t, chat(), kA, kB, kC)
	keysOf := func(sts []Status) []Key {
		var out []Key
		for _, st := range sts {
			out = append(out, st.Key)
		}
		return out
	}
	if got := keysOf(e.Updates(t0, nil)); !slices.Equal(got, []Key{kB, kA, kC}) { // channel order
		t.Fatalf("after Configure: %v, want every key in channel order", got)
	}
	if got := e.Updates(t0.Add(time.Second), nil); len(got) != 0 {
		t.Fatalf("nothing happened: %v", keysOf(got))
	}
	e.Observe(kA, success(t0.Add(2*time.Second), time.Second))
	for _, at := range []time.Duration{2 * time.Second, 30 * time.Second, 61 * time.Second} {
		e.Tick(t0.Add(at))
		if got := keysOf(e.Updates(t0.Add(at), nil)); !slices.Equal(got, []Key{kA}) {
			t.Fatalf("at +%s, with kA's window not yet empty: %v, want [kA]", at, got)
		}
	}
	e.Tick(t0.Add(65 * time.Second)) // the window has drained: kA is at rest
	e.Updates(t0.Add(65*time.Second), nil)
	if got := e.Updates(t0.Add(66*time.Second), nil); len(got) != 0 {
		t.Fatalf("kA at rest again: %v", keysOf(got))
	}
	// A Select that ends panic routing reports the key it had chosen, also when that key is at
	// rest by then: kA is rate limited (Retry-After) on a model of its own, panic routing picks it,
	// then the limit heals and its window drains before the next Select.
	solo := Key{Channel: "solo", Model: "m-solo"}
	e.Configure(t0.Add(66*time.Second), []Target{{Key: kA, Settings: chat()}, {Key: kB, Settings: chat()}, {Key: kC, Settings: chat()}, {Key: solo, Settings: chat()}})
	e.Updates(t0.Add(66*time.Second), nil)
	e.Observe(solo, Observation{At: t0.Add(67 * time.Second), Outcome: OutcomeRateLimited, RetryAfter: 5 * time.Second})
	if r := e.Select(t0.Add(68*time.Second), solo.Model, []Candidate{{Channel: solo.Channel, Weight: 1}}, StrategyPriority, true, 0, nil); len(r) != 1 || !r[0].Panic {
		t.Fatalf("routes %+v, want solo by panic routing", r)
	}
	healed := t0.Add(5 * time.Minute)
	e.Tick(healed)
	if got := e.Updates(healed, nil); len(got) != 1 || got[0].Key != solo || !got[0].Panic || got[0].Phase != PhaseHealthy {
		t.Fatalf("solo healed, still flagged by the last Select: %+v", got)
	}
	if got := e.Updates(healed, nil); len(got) != 0 {
		t.Fatalf("solo at rest: %+v", got)
	}
	if r := e.Select(healed, solo.Model, []Candidate{{Channel: solo.Channel, Weight: 1}}, StrategyPriority, true, 0, nil); len(r) != 1 || r[0].Panic {
		t.Fatalf("routes %+v, want solo routable", r)
	}
	if got := e.Updates(healed, nil); len(got) != 1 || got[0].Key != solo || got[0].Panic {
		t.Fatalf("after a Select without panic routing: %+v, want solo with Panic false", got)
	}

	ejected := eject(t, e, kC, healed)
	e.Updates(ejected, nil)
	for i := range 3 {
		at := ejected.Add(time.Duration(90+i) * time.Second)
		e.Tick(at)
		got := e.Updates(at, nil)
		if len(got) != 1 || got[0].Key != kC || got[0].Phase != PhaseEjected {
			t.Fatalf("kC cooling down, at +%ds: %+v", 90+i, got)
		}
	}
}
