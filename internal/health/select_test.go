package health

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func channels(routes []Route) []string {
	var out []string
	for _, r := range routes {
		out = append(out, r.Channel)
	}
	return out
}

func TestSelectStrategies(t *testing.T) {
	set := chat()
	e := newEngine(t, set, kA, kB, kC)
	// One minute at 1 request/s: kA 10% errors, kB clean, kC 20% errors (Degraded), none ejected.
	for i := range 60 {
		at := t0.Add(time.Duration(i) * time.Second)
		e.Observe(kA, failureEvery(at, i, 10))
		e.Observe(kB, success(at, time.Second))
		e.Observe(kC, failureEvery(at, i, 5))
	}
	now := t0.Add(time.Minute)
	sa, sb, sc := status(t, e, now, kA), status(t, e, now, kB), status(t, e, now, kC)
	if !(sb.Score > sa.Score && sa.Score > sc.Score) || sc.Phase != PhaseDegraded || sa.Phase != PhaseHealthy {
		t.Fatalf("setup: scores a=%d(%s) b=%d(%s) c=%d(%s), want b > a > c, only c Degraded",
			sa.Score, sa.Phase, sb.Score, sb.Phase, sc.Score, sc.Phase)
	}
	wc := 100 * float64(sc.Score) / 100
	cands := []Candidate{{Channel: kA.Channel, Weight: 100}, {Channel: kB.Channel, Weight: 100}, {Channel: kC.Channel, Weight: 100}}
	total := 200 + wc

	for _, tc := range []struct {
		name     string
		strategy Strategy
		rnd      float64
		want     []string
	}{
		{"HealthScore: best score band first", StrategyHealthScore, 0.5, []string{kB.Channel, kA.Channel, kC.Channel}},
		{"HealthScore: canary, the best lower band first in 10% of calls", StrategyHealthScore, 0.01, []string{kA.Channel, kB.Channel, kC.Channel}},
		{"HealthScore: degraded keeps last place either way", StrategyHealthScore, 0.99, []string{kB.Channel, kA.Channel, kC.Channel}},
		{"Priority: list order", StrategyPriority, 0.01, []string{kA.Channel, kB.Channel, kC.Channel}},
		{"Weighted: low draw picks the first slice", StrategyWeighted, 0, []string{kA.Channel, kB.Channel, kC.Channel}},
		{"Weighted: middle draw picks the second", StrategyWeighted, 150 / total, []string{kB.Channel, kA.Channel, kC.Channel}},
		{"Weighted: top draw picks the degraded one", StrategyWeighted, (200 + wc/2) / total, []string{kC.Channel, kA.Channel, kB.Channel}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			routes := e.Select(now, kA.Model, cands, tc.strategy, true, tc.rnd, nil)
			if got := channels(routes); !slices.Equal(got, tc.want) {
				t.Fatalf("order %v, want %v", got, tc.want)
			}
			for _, r := range routes {
				want := 100.0
				if r.Channel == kC.Channel {
					want = wc
				}
				if math.Abs(r.Weight-want) > 1e-9 || r.Panic {
					t.Errorf("%s: weight %v panic %v, want %v false", r.Channel, r.Weight, r.Panic, want)
				}
			}
		})
	}

	// A degraded channel first in Priority order keeps its place with probability score/100.
	prio := []Candidate{cands[2], cands[0], cands[1]}
	first := 0
	for i := range 1000 {
		if e.Select(now, kA.Model, prio, StrategyPriority, true, (float64(i)+0.5)/1000, nil)[0].Channel == kC.Channel {
			first++
		}
	}
	if want := sc.Score * 10; first != want {
		t.Errorf("degraded channel first in %d/1000 draws, want %d", first, want)
	}
}

func failureEvery(at time.Time, i, n int) Observation {
	if i%n == n-1 {
		return failure(at, OutcomeServerError)
	}
	return success(at, time.Second)
}

// TestSelectRampShare checks that a ramping channel gets first place about as often as its share.
func TestSelectRampShare(t *testing.T) {
	set := chat()
	for _, tc := range []struct {
		name     string
		strategy Strategy
		want     float64 // share of draws in which the ramping channel comes first
	}{
		{"HealthScore", StrategyHealthScore, 0.05},
		{"Priority", StrategyPriority, 0.05},
		{"Weighted", StrategyWeighted, 5.0 / 105},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, set, kA, kB)
			rampAt := toRamp(t, e, kA, t0)
			cands := []Candidate{{Channel: kA.Channel, Weight: 100}, {Channel: kB.Channel, Weight: 100}}
			const n = 10000
			first := 0
			var dst []Route
			for i := range n {
				dst = e.Select(rampAt, kA.Model, cands, tc.strategy, true, (float64(i)+0.5)/n, dst)
				if len(dst) != 2 {
					t.Fatalf("routes %+v, want both channels", dst)
				}
				if r := routeOf(dst, kA.Channel); r.Weight != 5 || r.Phase != PhaseRampingUp {
					t.Fatalf("ramping route %+v, want weight 5", r)
				}
				if dst[0].Channel == kA.Channel {
					first++
				}
			}
			if got := float64(first) / n; math.Abs(got-tc.want) > 0.001 {
				t.Errorf("ramping channel first in %.4f of draws, want %.4f", got, tc.want)
			}
		})
	}
}

func TestSelectSkipsUnknownAndNotRoutable(t *testing.T) {
	e := newEngine(t, chat(), kA, kB)
	eject(t, e, kA, t0)
	cands := []Candidate{{Channel: "unknown", Weight: 100}, {Channel: kA.Channel, Weight: 100}, {Channel: kB.Channel, Weight: 100}}
	routes := e.Select(t0.Add(10*time.Second), kA.Model, cands, StrategyPriority, true, 0, nil)
	if got := channels(routes); !slices.Equal(got, []string{kB.Channel}) {
		t.Errorf("routes %v, want only %s", got, kB.Channel)
	}
}

// TestHealthScoreCanaryEjectsAStarvedChannel: under HealthScore a failing first choice is demoted
// after a failure or two; the canary share keeps sending it a little traffic, so it is ejected
// within seconds instead of flipping Healthy/Degraded as its empty window recovers.
func TestHealthScoreCanaryEjectsAStarvedChannel(t *testing.T) {
	set := chat()
	e := newEngine(t, set, kA, kB)
	cands := []Candidate{{Channel: kA.Channel, Weight: 100}, {Channel: kB.Channel, Weight: 100}}
	rng := rand.New(rand.NewPCG(1, 2))
	var routes []Route
	// 2 requests/s (quiet enough that the score is re-evaluated between failures); from t0
	// channel A fails every attempt, B answers.
	for i := range 2 * 120 {
		at := t0.Add(time.Duration(i) * 500 * time.Millisecond)
		routes = e.Select(at, kA.Model, cands, StrategyHealthScore, true, rng.Float64(), routes)
		if len(routes) == 0 {
			t.Fatal("nothing routable")
		}
		switch routes[0].Channel {
		case kA.Channel:
			e.Observe(kA, failure(at, OutcomeServerError))
			e.Observe(kB, success(at, 300*time.Millisecond))
		default:
			e.Observe(kB, success(at, 300*time.Millisecond))
		}
		if st := status(t, e, at, kA); st.Phase == PhaseEjected {
			t.Logf("ejected %s after the channel started failing", at.Sub(t0))
			if d := at.Sub(t0); d > 45*time.Second {
				t.Errorf("ejected only after %s", d)
			}
			return
		}
	}
	t.Fatalf("a channel failing every attempt was never ejected; journal: %v", reasons(eventsOf(e, kA)))
}

// TestScoreReadsZeroOutOfService: an Ejected or Probing key reports score 0 (it takes no traffic,
// though its draining window would compute ever better scores); in the ramp the live score is back.
func TestScoreReadsZeroOutOfService(t *testing.T) {
	e := newEngine(t, chat(), kA)
	at := eject(t, e, kA, t0)
	for _, d := range []time.Duration{0, time.Minute, 4 * time.Minute} {
		if st := status(t, e, at.Add(d), kA); st.Phase != PhaseEjected || st.Score != 0 {
			t.Errorf("%s after the ejection: %s score %d, want Ejected score 0", d, st.Phase, st.Score)
		}
	}
	ramp := toRamp(t, e, kA, at)
	if st := status(t, e, ramp, kA); st.Phase != PhaseRampingUp || st.Score == 0 {
		t.Errorf("in the ramp: %s score %d, want the live score", st.Phase, st.Score)
	}
}
