package failover

import (
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
)

// inFlight is one hung (or failing) request of a budget scenario: its plan, after its first
// attempt was handed out.
type inFlight struct {
	p  Plan
	ch string
}

// startOnA starts n requests for gpt-4o at t0 with the real engine eng; each must be handed its
// first attempt on channel a.
func startOnA(t *testing.T, w *world, eng *health.Engine, n int) []*inFlight {
	t.Helper()
	reqs := make([]*inFlight, n)
	for i := range reqs {
		r := &inFlight{}
		r.p.Start(w, eng, fixedRand(0.5), t0, "gpt-4o")
		st := r.p.Next(t0)
		if st.Action != ActionTry || st.Channel.Name != "a" {
			t.Fatalf("request %d: first step %v %v, want a try on a", i, st.Action, st.Channel)
		}
		r.ch = st.Channel.Name
		reqs[i] = r
	}
	return reqs
}

// engineFor configures a real engine with the chat defaults for gpt-4o on a, b and c (the
// fallback models stay unconfigured: nothing routes them).
func engineFor(w *world) *health.Engine {
	eng := health.NewEngine(0)
	var targets []health.Target
	for _, c := range w.models["gpt-4o"].Candidates {
		targets = append(targets, health.Target{Key: health.Key{Channel: c.Channel, Model: "gpt-4o"}, Settings: w.models["gpt-4o"].Policy.Settings})
	}
	eng.Configure(t0, targets)
	return eng
}

// failAll ends each request's attempt on a at `at` with outcome o, reporting it to the engine
// first and then to the plan, as the drivers do; between two failures, successes (other
// requests' answers on a) are reported to the engine. It returns how many retries the plans
// handed out, how many the budget refused, and how many of the retries went by panic routing.
func failAll(t *testing.T, eng *health.Engine, reqs []*inFlight, at time.Time, o health.Outcome, successesBetween int) (allowed, refused, panicked int) {
	t.Helper()
	a := health.Key{Channel: "a", Model: "gpt-4o"}
	for _, r := range reqs {
		eng.Observe(a, health.Observation{At: at, Outcome: o})
		for range successesBetween {
			eng.Observe(a, health.Observation{At: at, Outcome: health.OutcomeSuccess, Latency: 300 * time.Millisecond})
		}
		r.p.Observe(Result{Outcome: o, Detail: o.String()})
		switch st := r.p.Next(at); {
		case st.Action == ActionTry:
			allowed++
			if st.Panic {
				panicked++
			}
		case st.BudgetExhausted:
			refused++
		default:
			t.Fatalf("after a failure on a: %+v, want a retry or a refusal by the budget", st)
		}
	}
	return allowed, refused, panicked
}

// The demo's outage: a provider hangs, every request in flight on it times out at once, and
// the engine ejects it after the first ConsecutiveFailures of them. The retries that follow the
// ejection go to a routable channel and are failover, not amplification: all of them are
// allowed, and they leave the budget to the storms it is for.
func TestBudgetLetsTheRequestsInFlightLeaveAnEjectedChannel(t *testing.T) {
	w := newWorld(nil)
	eng := engineFor(w)
	const n = 100
	reqs := startOnA(t, w, eng, n)
	// The timeouts arrive 30 s later (the request timeout): the requests counted at t0 have
	// left the budget's window, so its limit is the floor (30).
	at := t0.Add(30 * time.Second)
	allowed, refused, panicked := failAll(t, eng, reqs, at, health.OutcomeTimeout, 0)
	if st, _ := eng.StatusOf(at, health.Key{Channel: "a", Model: "gpt-4o"}); st.Phase != health.PhaseEjected {
		t.Fatalf("a is %s after %d timeouts, want Ejected (the scenario's premise)", st.Phase, n)
	}
	if allowed != n || refused != 0 || panicked != 0 {
		t.Errorf("%d retries allowed, %d refused, %d by panic routing; want all %d allowed to a routable channel", allowed, refused, panicked, n)
	}
	// Only the retries before the ejection drew on the budget: the first four (the fifth
	// consecutive timeout ejects a before its plan asks), and the floor less those is left.
	left := 0
	for w.models["gpt-4o"].Budget.AllowRetry(at, 20) {
		left++
	}
	if want := BudgetFloorPerSecond*BudgetBuckets - (health.DefaultSettings("chat").ConsecutiveFailures - 1); left != want {
		t.Errorf("%d retries left in the budget, want %d (only the retries before the ejection charged)", left, want)
	}
}

// A storm while the failing channel is still in rotation (failing, but below every trip rule)
// is what the budget is for: beyond the floor the retries are refused.
func TestBudgetStillRefusesAStormWhileTheChannelIsInRotation(t *testing.T) {
	w := newWorld(nil)
	eng := engineFor(w)
	const n = 100
	reqs := startOnA(t, w, eng, n)
	at := t0.Add(30 * time.Second)
	// Nine answers between two failures: a 10% error rate, no streak, no ejection.
	allowed, refused, _ := failAll(t, eng, reqs, at, health.OutcomeServerError, 9)
	if st, _ := eng.StatusOf(at, health.Key{Channel: "a", Model: "gpt-4o"}); st.Phase.OutOfRotation() {
		t.Fatalf("a is %s, want it still in rotation (the scenario's premise)", st.Phase)
	}
	if floor := BudgetFloorPerSecond * BudgetBuckets; allowed != floor || refused != n-floor {
		t.Errorf("%d retries allowed, %d refused; want the floor of %d allowed and %d refused", allowed, refused, floor, n-floor)
	}
}

// When every channel is failing the retries go to panic routing, and panic routing's retries
// are load on channels that fail: charged as always, even away from an ejected channel.
func TestBudgetChargesRetriesWhenNothingIsRoutable(t *testing.T) {
	w := newWorld(nil)
	eng := engineFor(w)
	for _, c := range []string{"b", "c"} {
		for range 5 {
			eng.Observe(health.Key{Channel: c, Model: "gpt-4o"}, health.Observation{At: t0, Outcome: health.OutcomeTimeout})
		}
	}
	const n = 100
	reqs := startOnA(t, w, eng, n)
	at := t0.Add(30 * time.Second)
	allowed, refused, panicked := failAll(t, eng, reqs, at, health.OutcomeTimeout, 0)
	for _, c := range []string{"a", "b", "c"} {
		if st, _ := eng.StatusOf(at, health.Key{Channel: c, Model: "gpt-4o"}); st.Phase != health.PhaseEjected {
			t.Fatalf("%s is %s, want Ejected (the scenario's premise)", c, st.Phase)
		}
	}
	if floor := BudgetFloorPerSecond * BudgetBuckets; allowed != floor || refused != n-floor || panicked != allowed {
		t.Errorf("%d retries allowed (%d by panic routing), %d refused; want the floor of %d, all by panic routing, and %d refused", allowed, panicked, refused, floor, n-floor)
	}
}

// outHealth is fakeHealth whose out channels report phase (Ejected, Probing, Disabled, or
// RateLimited for a pending Retry-After).
type outHealth struct {
	fakeHealth
	phase health.Phase
}

func (h *outHealth) StatusOf(now time.Time, k health.Key) (health.Status, bool) {
	if h.out[k.Channel] {
		return health.Status{Key: k, Phase: h.phase}, true
	}
	return h.fakeHealth.StatusOf(now, k)
}

// Which retries away from a channel taken out of rotation meanwhile are free: those away from a
// verdict (the engine's ejection, an operator's disable) to a routable channel; not those away
// from a Retry-After, nor the listed cohort's, which ignores health.
func TestBudgetFreeRetriesAreThoseAwayFromAVerdict(t *testing.T) {
	for _, tt := range []struct {
		name   string
		phase  health.Phase
		listed bool
		free   bool
	}{
		{"ejected", health.PhaseEjected, false, true},
		{"probing", health.PhaseProbing, false, true},
		{"disabled by an operator", health.PhaseDisabled, false, true},
		{"waiting out a Retry-After", health.PhaseRateLimited, false, false},
		{"still in rotation", health.PhaseDegraded, false, false},
		{"ejected, listed cohort", health.PhaseEjected, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(nil)
			h := &outHealth{fakeHealth: fakeHealth{out: map[string]bool{}}, phase: tt.phase}
			allowed := 0
			for range 100 {
				var p Plan
				h.out["a"] = false
				p.Start(w, h, fixedRand(0), t0, "gpt-4o")
				if tt.listed {
					p.SetCohort(CohortListed)
				}
				if st := p.Next(t0); st.Action != ActionTry || st.Channel.Name != "a" {
					t.Fatalf("first step %+v, want a try on a", st)
				}
				h.out["a"] = tt.phase != health.PhaseDegraded // the verdict arrives while the attempt runs
				p.Observe(Result{Outcome: health.OutcomeServerError})
				if st := p.Next(t0); st.Action == ActionTry {
					allowed++
				}
			}
			want := BudgetFloorPerSecond * BudgetBuckets
			if tt.free {
				want = 100
			}
			if allowed != want {
				t.Errorf("%d of 100 retries allowed, want %d", allowed, want)
			}
		})
	}
}

// A continuation follows the retry's rule (Plan.AllowContinuation): away from a channel the
// engine ejected it is free, away from one still in rotation it is charged (the floor, then
// refused), and with no channel known it is charged too.
func TestContinuationsFollowTheRetryBudgetRule(t *testing.T) {
	for _, tt := range []struct {
		name  string
		phase health.Phase
		free  bool
	}{
		{"broken on an ejected channel", health.PhaseEjected, true},
		{"broken on a channel in rotation", health.PhaseDegraded, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(nil)
			h := &outHealth{fakeHealth: fakeHealth{out: map[string]bool{"a": tt.phase != health.PhaseDegraded}}, phase: tt.phase}
			var p Plan
			p.Start(w, h, fixedRand(0), t0, "gpt-4o")
			mr := w.models["gpt-4o"]
			allowed := 0
			for range 100 {
				if p.AllowContinuation(t0, mr, "a") {
					allowed++
				}
			}
			want := BudgetFloorPerSecond * BudgetBuckets
			if tt.free {
				want = 100
			}
			if allowed != want {
				t.Errorf("%d of 100 continuations allowed, want %d", allowed, want)
			}
		})
	}
}
