package health

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// fleet is N replicas' engines sharing one FleetBoard, synced by hand: the evidence loop of
// internal/fleet without its I/O.
type fleet struct {
	t       testing.TB
	board   *FleetBoard
	engines []*Engine
	pending [][]FleetVerdict
}

func newFleet(t testing.TB, n int, set Settings, keys ...Key) *fleet {
	return newFleetAt(t, t0, n, set, keys...)
}

// newFleetAt is newFleet with the engines configured at start.
func newFleetAt(t testing.TB, start time.Time, n int, set Settings, keys ...Key) *fleet {
	t.Helper()
	f := &fleet{t: t, board: NewFleetBoard(time.Second), pending: make([][]FleetVerdict, n)}
	var targets []Target
	for _, k := range keys {
		targets = append(targets, Target{Key: k, Settings: set})
	}
	for range n {
		e := NewEngine(0)
		e.Configure(start, targets)
		f.engines = append(f.engines, e)
	}
	return f
}

func replicaName(i int) string { return fmt.Sprintf("replica-%d", i) }

// sync runs one exchange for replica i at now: its outbox and pending proposals to the board,
// the board's inputs back into its engine.
func (f *fleet) syncOne(i int, now time.Time) {
	f.t.Helper()
	e := f.engines[i]
	ins, err := f.board.Exchange(now, replicaName(i), e.FleetOutbox(now), f.pending[i])
	if err != nil {
		f.t.Fatal(err)
	}
	f.pending[i] = f.pending[i][:0]
	for _, in := range ins {
		if v := e.SetFleet(now, in); v != nil {
			f.pending[i] = append(f.pending[i], *v)
		}
	}
}

func (f *fleet) sync(now time.Time) {
	for i := range f.engines {
		f.syncOne(i, now)
	}
}

func (f *fleet) phases(now time.Time, k Key) []Phase {
	var out []Phase
	for _, e := range f.engines {
		out = append(out, status(f.t, e, now, k).Phase)
	}
	return out
}

func allIn(ps []Phase, p Phase) bool {
	for _, q := range ps {
		if q != p {
			return false
		}
	}
	return true
}

// ---- against a naive recount ----

// fleetAttempt is one attempt of one replica.
type fleetAttempt struct {
	replica int
	at      time.Time
	o       Outcome
	lat     time.Duration
}

// naiveFleetTrip is the fleet rule of SetFleet for replica me at t, recounted from every
// replica's raw attempts: the window is every bucket of 1 s from floor(t)-Window to t, the
// latency window every 2 s slice from floor2(t)-Window (chat's geometry), p95 the
// ceil(95%)-th latency, the streaks the failures after each replica's last success.
func naiveFleetTrip(set Settings, as []fleetAttempt, me, replicas int, t time.Time) string {
	type tally struct {
		req, fail, to int
		lat           []time.Duration
	}
	per := make([]tally, replicas)
	sec, sl := int64(time.Second), int64(2*time.Second)
	tn := t.UnixNano()
	cFrom := (tn/sec)*sec - int64(set.Window)
	lFrom := (tn/sl)*sl - int64(set.Window)
	for _, a := range as {
		c, n := &per[a.replica], a.at.UnixNano()
		if n > tn {
			continue
		}
		if n >= cFrom {
			c.req++
			if a.o.IsFailure() {
				c.fail++
			}
			if a.o == OutcomeTimeout {
				c.to++
			}
		}
		if n >= lFrom && a.o == OutcomeSuccess {
			c.lat = append(c.lat, a.lat)
		}
	}
	if replicas < 2 {
		return ""
	}
	// union without replica skip (-1: none)
	sum := func(skip int) (u tally) {
		for r, c := range per {
			if r != skip {
				u.req, u.fail, u.to = u.req+c.req, u.fail+c.fail, u.to+c.to
				u.lat = append(u.lat, c.lat...)
			}
		}
		return u
	}
	// worst: the replica with the most of by, ties to the fewest of size.
	worst := func(by, size func(c tally) int) int {
		w := 0
		for r, c := range per {
			if by(c) > by(per[w]) || (by(c) == by(per[w]) && size(c) < size(per[w])) {
				w = r
			}
		}
		return w
	}
	p95Over := func(l []time.Duration) bool {
		if len(l) == 0 {
			return false
		}
		l = slices.Clone(l)
		slices.Sort(l)
		return l[(len(l)*95+99)/100-1] > set.LatencyP95
	}
	// rate: n of req reach pct percent; the rest, without the worst replica, half of it.
	rate := func(n, req int, pct float64) bool { return pct > 0 && n > 0 && float64(n)*100 >= float64(req)*pct }
	all := sum(-1)
	if all.req >= set.MinRequests {
		er, tr := float64(set.ErrorRatePercent), float64(set.TimeoutRatePercent)
		w := sum(worst(func(c tally) int { return c.fail }, func(c tally) int { return c.req }))
		if rate(all.fail, all.req, er) && rate(w.fail, w.req, er/2) {
			return "ErrorRateExceeded"
		}
		w = sum(worst(func(c tally) int { return c.to }, func(c tally) int { return c.req }))
		if rate(all.to, all.req, tr) && rate(w.to, w.req, tr/2) {
			return "TimeoutRateExceeded"
		}
		// The slow kind's order is slowerThan's: it breaks ties on the histograms.
		hists := make([][LatencyBins]uint32, replicas)
		bins := window{edges: edgesFor(float64(set.LatencyP95))}
		for r, c := range per {
			for _, l := range c.lat {
				hists[r][bins.bin(int64(l))]++
			}
		}
		ws := 0
		for r := range per {
			if slowerThan(&hists[r], &hists[ws]) {
				ws = r
			}
		}
		w = sum(ws)
		if p95Over(all.lat) && p95Over(w.lat) {
			return "LatencyP95Exceeded"
		}
	}
	// Streaks: per replica, the failures after its last success; the merged history's trailing
	// run is their sum exactly when no success came after any streak began.
	streak := make([]int, replicas)
	merged := 0
	for _, a := range as { // as is in time order
		switch {
		case a.o.IsFailure():
			streak[a.replica]++
			merged++
		case a.o == OutcomeSuccess:
			streak[a.replica] = 0
			merged = 0
		}
	}
	total := 0
	for _, n := range streak {
		total += n
	}
	if total >= set.ConsecutiveFailures && total-slices.Max(streak) > 0 && merged == total {
		return "ConsecutiveFailures"
	}
	return ""
}

// TestFleetRulesAgainstRecount generates a few hundred fleets with low traffic per replica
// (never enough for a local rate or p95 verdict, never a local streak long enough) and checks,
// for every replica, that SetFleet trips exactly when and as a naive recount over the union of
// the replicas' attempts says.
func TestFleetRulesAgainstRecount(t *testing.T) {
	set := chat()
	set.TimeoutRatePercent = 10
	set.LatencyP95 = 5 * time.Second
	set.EjectBelow = 0 // the score rule needs minutes; it must not interfere
	rng := rand.New(rand.NewPCG(29, 1))
	trips := map[string]int{}
	checked := 0
	for sc := range 400 {
		replicas := 2 + rng.IntN(6)
		end := t0.Add(90 * time.Second)
		outage := end // in a quarter of the fleets every replica fails everything from outage on
		if rng.IntN(4) == 0 {
			outage = end.Add(-time.Duration(rng.Int64N(int64(20 * time.Second))))
		}
		var as []fleetAttempt
		for r := range replicas {
			n := rng.IntN(16) // fewer than MinRequests in any window
			failP := []float64{0, 0, 0.1, 0.3, 0.6, 1}[rng.IntN(6)]
			timeoutShare := rng.Float64()
			slow := rng.IntN(3) == 0
			for range n {
				a := fleetAttempt{replica: r, at: t0.Add(time.Duration(rng.Int64N(int64(90 * time.Second)))), o: OutcomeSuccess,
					lat: time.Duration((0.5 + rng.Float64()) * float64(time.Second))}
				if slow && rng.IntN(4) > 0 {
					a.lat = time.Duration((4 + 4*rng.Float64()) * float64(time.Second))
				}
				if rng.Float64() < failP {
					a.o, a.lat = OutcomeServerError, 200*time.Millisecond
					if rng.Float64() < timeoutShare {
						a.o, a.lat = OutcomeTimeout, 10*time.Second
					}
				}
				if a.at.After(outage) {
					a.o, a.lat = OutcomeServerError, 200*time.Millisecond
				}
				as = append(as, a)
			}
		}
		slices.SortStableFunc(as, func(a, b fleetAttempt) int { return a.at.Compare(b.at) })
		// No replica may reach a local streak of ConsecutiveFailures: the point is what the
		// fleet sees that no replica does. Break long runs with a success.
		run := make([]int, replicas)
		for i := range as {
			a := &as[i]
			if a.o.IsFailure() {
				if run[a.replica]+1 >= set.ConsecutiveFailures {
					a.o, a.lat = OutcomeSuccess, time.Second
					run[a.replica] = 0
					continue
				}
				run[a.replica]++
			} else {
				run[a.replica] = 0
			}
		}
		engines := make([]*Engine, replicas)
		for r := range engines {
			engines[r] = newEngine(t, set, kA)
		}
		for _, a := range as {
			engines[a.replica].Observe(kA, Observation{At: a.at, Outcome: a.o, Latency: a.lat})
		}
		reports := make([]FleetReport, replicas)
		for r, e := range engines {
			e.mu.Lock()
			s := e.states[kA]
			e.advance(s, nanos(end))
			if !s.inService() {
				e.mu.Unlock()
				t.Fatalf("scenario %d: replica %d left service on local evidence: %+v", sc, r, eventsOf(e, kA))
			}
			reports[r] = s.report()
			e.mu.Unlock()
		}
		for me, e := range engines {
			in := FleetInput{Key: kA, Expires: end.Add(3 * time.Second), Complete: true}
			for r, rep := range reports {
				if r == me {
					continue
				}
				in.Replicas++
				in.Others.Add(&rep.Counts)
				in.Top.Consider(&rep)
				if rep.Streak > 0 {
					in.Streak += rep.Streak
					if in.StreakStart.IsZero() || rep.StreakStart.Before(in.StreakStart) {
						in.StreakStart = rep.StreakStart
					}
				}
				if rep.LastSuccess.After(in.LastSuccess) {
					in.LastSuccess = rep.LastSuccess
				}
			}
			want := naiveFleetTrip(set, as, me, replicas, end)
			v := e.SetFleet(end, in)
			got := ""
			if v != nil {
				got = v.Reason
				if v.Phase != PhaseEjected || v.Prev != 0 || !v.Until.After(end) {
					t.Errorf("scenario %d replica %d: proposal %+v, want an NX Ejected verdict in the future", sc, me, v)
				}
				if ph := status(t, e, end, kA).Phase; ph != PhaseEjected {
					t.Errorf("scenario %d replica %d: tripped on fleet counts but %s", sc, me, ph)
				}
			}
			if got != want {
				t.Errorf("scenario %d replica %d of %d: engine %q, recount %q\nattempts %v", sc, me, replicas, got, want, as)
			}
			trips[want]++
			checked++
		}
	}
	t.Logf("%d replica verdicts checked: %v", checked, trips)
	for _, r := range []string{"", "ErrorRateExceeded", "TimeoutRateExceeded", "LatencyP95Exceeded", "ConsecutiveFailures"} {
		if trips[r] < 10 {
			t.Errorf("only %d verdicts %q among the generated fleets: the generator does not exercise the rule", trips[r], r)
		}
	}
}

// ---- scenarios ----

// TestBankExampleAcrossTheFleet spreads the design notes' bank example (2 requests/s, 52/240
// failures in the window at 10:02) at random over 4 replicas. No replica alone ever has the
// 200 requests the rule needs; the fleet trips once, as one proxy would, within a sync
// interval or two of the exact-window moment, and every replica follows.
func TestBankExampleAcrossTheFleet(t *testing.T) {
	set := chat()
	set.Window, set.MinRequests, set.ErrorRatePercent = 120*time.Second, 200, 18
	set.ConsecutiveFailures = 1000
	set.TimeoutRatePercent = 0
	traffic := bankTraffic(5 * time.Minute)
	var want time.Time
	for _, a := range traffic {
		req, fail := recount(traffic, a.at.Add(-set.Window), a.at, false)
		if req >= set.MinRequests && fail*100 >= req*set.ErrorRatePercent {
			want = a.at
			break
		}
	}
	if want.IsZero() {
		t.Fatal("the generated traffic never trips the rule")
	}
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "local", true: "shared"}[shared], func(t *testing.T) {
			rng := rand.New(rand.NewPCG(2, 9))
			start := traffic[0].at
			f := newFleetAt(t, start, 4, set, kA)
			next := start.Truncate(time.Second).Add(time.Second)
			for _, a := range traffic {
				for shared && !next.After(a.at) {
					f.sync(next)
					next = next.Add(time.Second)
				}
				f.engines[rng.IntN(4)].Observe(kA, Observation{At: a.at, Outcome: a.o, Latency: 800 * time.Millisecond})
			}
			end := traffic[len(traffic)-1].at.Add(3 * time.Second)
			for shared && !next.After(end) {
				f.sync(next)
				next = next.Add(time.Second)
			}
			if !shared {
				if ps := f.phases(end, kA); slices.Contains(ps, PhaseEjected) {
					t.Fatalf("local judgement ejected with 1/4 of the traffic per replica: %v", ps)
				}
				return
			}
			v, ok := f.board.Verdict(end, kA)
			if !ok || v.Reason != "ErrorRateExceeded" || !strings.Contains(v.Message, "across 4 replicas") {
				t.Fatalf("fleet verdict %+v (held %v), want ErrorRateExceeded across 4 replicas", v, ok)
			}
			for i, e := range f.engines {
				ev, ok := firstTo(eventsOf(e, kA), PhaseEjected)
				if !ok {
					t.Fatalf("replica %d never ejected: %+v", i, eventsOf(e, kA))
				}
				if ev.At.Before(want.Add(-time.Second)) || ev.At.After(want.Add(3*time.Second)) {
					t.Errorf("replica %d ejected at %s, want within [-1s, +3s] of the exact-window moment %s",
						i, ev.At.Format(time.TimeOnly+".000"), want.Format(time.TimeOnly+".000"))
				}
				// Each replica tripped on the fleet's counts itself (replicas that trip in the same
				// interval all do) or adopted the verdict.
				own := ev.Actor == actorRule && strings.Contains(ev.Message, "across 4 replicas")
				if ev.Reason != "ErrorRateExceeded" || !(own || ev.Actor == actorFleet) || (replicaName(i) == v.By && !own) {
					t.Errorf("replica %d: ejected by %s/%s (%s)", i, ev.Reason, ev.Actor, ev.Message)
				}
				if st := status(t, e, end, kA); !st.CooldownUntil.Equal(v.Until) {
					t.Errorf("replica %d cools down until %s, the fleet until %s", i, st.CooldownUntil, v.Until)
				}
			}
			t.Logf("exact-window moment %s; verdict %s by %s: %s", want.Format(time.TimeOnly+".0"), v.Reason, v.By, v.Message)
		})
	}
}

// TestFleetVerdictAdoption follows one verdict through its life: set by the first replica to
// trip, adopted by the others within one interval, one probe holder for the fleet, the holder's
// ramp adopted by all, and the ramp ending on every replica at the same moment.
func TestFleetVerdictAdoption(t *testing.T) {
	set := chat()
	f := newFleet(t, 3, set, kA, kB)
	now := t0
	// Every replica sees two timeouts in a row: 6 in all, no success anywhere.
	for i, e := range f.engines {
		for j := range 2 {
			e.Observe(kA, failure(now.Add(time.Duration(2*i+j)*100*time.Millisecond), OutcomeTimeout))
		}
	}
	// Within a few intervals the view is complete (every replica has had the chance to report)
	// and the first replica to trip sets the verdict; the others adopt it.
	var v FleetVerdict
	for range 5 {
		now = now.Add(time.Second)
		f.sync(now)
		if held, ok := f.board.Verdict(now, kA); ok && v.Version == 0 {
			v = held
		}
	}
	if v.Reason != "ConsecutiveFailures" || !strings.Contains(v.Message, "6 consecutive failures across 3 replicas") {
		t.Fatalf("verdict %+v, want ConsecutiveFailures: 6 across 3 replicas", v)
	}
	if ps := f.phases(now, kA); !allIn(ps, PhaseEjected) {
		t.Fatalf("%v, want every replica Ejected", ps)
	}
	for i, e := range f.engines {
		ev, _ := firstTo(eventsOf(e, kA), PhaseEjected)
		// A replica trips on the fleet's counts itself (actor rule) or adopts the verdict
		// (actor fleet); either way it cools down until the verdict's end.
		if ev.Reason != "ConsecutiveFailures" || (ev.Actor != actorFleet && ev.Actor != actorRule) ||
			(ev.Actor == actorFleet) != (replicaName(i) != v.By && !strings.Contains(ev.Message, "across")) {
			t.Errorf("replica %d: ejection %+v", i, ev)
		}
		if st := status(t, e, now, kA); !st.CooldownUntil.Equal(v.Until) || st.Ejections != 1 || st.FleetVerdictBy != v.By {
			t.Errorf("replica %d: cooldown until %s, %d ejections, verdict by %q; want %s, 1, %q", i, st.CooldownUntil, st.Ejections, st.FleetVerdictBy, v.Until, v.By)
		}
	}
	if ps := f.phases(now, kB); !allIn(ps, PhaseHealthy) {
		t.Errorf("the other key: %v, want Healthy everywhere", ps)
	}

	// Cooldown over: everyone Probing, only the lease holder probes; the store stays reachable.
	probes := make([]int, 3)
	for now = v.Until; ; now = now.Add(time.Second) {
		f.sync(now)
		for i, e := range f.engines {
			for _, k := range e.ProbesDue(now, nil) {
				probes[i]++
				e.Observe(k, Observation{At: now, Outcome: OutcomeSuccess, Latency: time.Second, Probe: true})
			}
		}
		if ps := f.phases(now, kA); !slices.Contains(ps, PhaseProbing) || now.Sub(v.Until) > 2*time.Minute {
			break
		}
	}
	holders := 0
	for _, n := range probes {
		if n > 0 {
			holders++
		}
	}
	if total := probes[0] + probes[1] + probes[2]; holders != 1 || total != set.ProbeSuccessesRequired {
		t.Fatalf("probes per replica %v, want %d from one replica only", probes, set.ProbeSuccessesRequired)
	}
	if ps := f.phases(now, kA); !allIn(ps, PhaseRampingUp) {
		t.Fatalf("after the holder's probes passed: %v, want every replica RampingUp", ps)
	}
	ramp, ok := f.board.Verdict(now, kA)
	if !ok || ramp.Phase != PhaseRampingUp || ramp.Version <= v.Version {
		t.Fatalf("ramp verdict %+v %v", ramp, ok)
	}
	// The ramp steps follow the verdict's clock on every replica.
	end := ramp.Until
	for _, e := range f.engines {
		if st := status(t, e, end.Add(-time.Millisecond), kA); st.Phase != PhaseRampingUp || st.TrafficPercent != 100 {
			t.Errorf("just before the ramp's end: %s at %d%%, want RampingUp at 100%%", st.Phase, st.TrafficPercent)
		}
		if st := status(t, e, end, kA); st.Phase != PhaseHealthy {
			t.Errorf("at the ramp's end: %s, want Healthy", st.Phase)
		}
	}
	if _, ok := f.board.Verdict(end, kA); ok {
		t.Error("the ramp verdict outlived its Until")
	}
}

// TestFleetDilutesOneReplicasFailures: one replica's own egress is broken. It ejects the
// channel for itself (a local verdict); the fleet never holds a verdict and the other replicas,
// which see only successes and a little noise, keep the channel.
func TestFleetDilutesOneReplicasFailures(t *testing.T) {
	set := chat()
	f := newFleet(t, 4, set, kA)
	rng := rand.New(rand.NewPCG(4, 4))
	now := t0
	for step := range 600 { // 10 minutes at 4 requests/s in all, 1/s per replica
		now = t0.Add(time.Duration(step) * time.Second)
		for i, e := range f.engines {
			o := OutcomeSuccess
			if i == 0 || rng.IntN(100) == 0 {
				o = OutcomeServerError
			}
			if ph := status(t, e, now, kA).Phase; ph == PhaseHealthy || ph == PhaseDegraded || ph == PhaseRampingUp {
				e.Observe(kA, Observation{At: now.Add(100 * time.Millisecond), Outcome: o, Latency: time.Second})
			}
			for _, k := range e.ProbesDue(now, nil) {
				e.Observe(k, Observation{At: now, Outcome: o, Latency: time.Second, Probe: true})
			}
		}
		f.sync(now.Add(500 * time.Millisecond))
		if v, ok := f.board.Verdict(now, kA); ok {
			t.Fatalf("at %s the fleet holds %+v on one replica's failures", now.Format(time.TimeOnly), v)
		}
	}
	if st := status(t, f.engines[0], now, kA); st.Ejections == 0 {
		t.Errorf("the broken replica never ejected for itself: %+v", st)
	}
	for i, e := range f.engines[1:] {
		if st := status(t, e, now, kA); st.Ejections != 0 {
			t.Errorf("replica %d ejected: %+v", i+1, eventsOf(e, kA))
		}
	}
}

// TestFleetRetryAfter: one replica's 429 with Retry-After holds every replica off the channel
// until it passes, and the share comes back afterwards.
func TestFleetRetryAfter(t *testing.T) {
	set := chat()
	f := newFleet(t, 3, set, kA, kB)
	cands := []Candidate{{Channel: kA.Channel, Weight: 100}, {Channel: kB.Channel, Weight: 100}}
	now := t0.Add(time.Second)
	f.engines[1].Observe(kA, Observation{At: now, Outcome: OutcomeRateLimited, RetryAfter: 30 * time.Second})
	until := now.Add(30 * time.Second)
	now = now.Add(time.Second)
	f.sync(now) // replica-1 tells the board; replica-2 learns at once, replica-0 at the next sync
	now = now.Add(time.Second)
	f.sync(now)
	for i, e := range f.engines {
		st := status(t, e, now, kA)
		if !st.RetryAfterUntil.Equal(until) || st.TrafficPercent != 0 || st.Phase != PhaseRateLimited {
			t.Errorf("replica %d: %s, retry until %s, traffic %d%%; want RateLimited until %s, 0%%", i, st.Phase, st.RetryAfterUntil, st.TrafficPercent, until)
		}
		for _, r := range e.Select(now, "gpt-4o", cands, StrategyHealthScore, true, 0.5, nil) {
			if r.Channel == kA.Channel {
				t.Errorf("replica %d routes to %s during the fleet's Retry-After", i, kA.Channel)
			}
		}
		if i != 1 {
			if ev := eventsOf(e, kA); len(ev) != 1 || !strings.Contains(ev[0].Message, "another replica") {
				t.Errorf("replica %d journal %+v, want one RateLimited event naming another replica", i, ev)
			}
		}
	}
	// A second sync changes nothing more: the same Retry-After is not a new 429.
	f.sync(now.Add(time.Second))
	if n := len(eventsOf(f.engines[0], kA)); n != 1 {
		t.Errorf("replica 0 has %d events after a second sync, want 1", n)
	}
	after := until.Add(time.Second)
	f.sync(after)
	for i, e := range f.engines {
		if st := status(t, e, after, kA); st.TrafficPercent == 0 {
			t.Errorf("replica %d after the Retry-After: traffic %d%%, want some", i, st.TrafficPercent)
		}
	}
}

// TestFleetLostStoreProbesLocally: while the store answers, only the lease holder probes; once
// the inputs have expired (store gone), every replica probes on its own, as without a fleet.
func TestFleetLostStoreProbesLocally(t *testing.T) {
	set := chat()
	f := newFleet(t, 3, set, kA)
	now := t0
	f.board.Exchange(now, "replica-0", nil, []FleetVerdict{{Key: kA, Phase: PhaseEjected, Until: now.Add(time.Minute), Reason: "ErrorRateExceeded"}})
	f.sync(now)
	if ps := f.phases(now, kA); !allIn(ps, PhaseEjected) {
		t.Fatalf("%v, want every replica Ejected", ps)
	}
	now = now.Add(time.Minute)
	f.sync(now) // verdict expired: everyone Probing, asking for the lease
	f.sync(now.Add(time.Second))
	now = now.Add(time.Second)
	due := 0
	for _, e := range f.engines {
		due += len(e.ProbesDue(now, nil))
	}
	if due != 1 {
		t.Fatalf("%d probes due with the store up, want 1 (the lease holder's)", due)
	}
	// The store goes away: no more syncs. Within 3 intervals the inputs expire.
	now = now.Add(3 * time.Second)
	for i, e := range f.engines {
		got := e.ProbesDue(now.Add(set.ProbeInterval), nil)
		if len(got) != 1 {
			t.Errorf("replica %d with the store gone: %d probes due, want 1", i, len(got))
		}
	}
}

// TestFleetRestartedReplicaAdopts: a replica started during an outage takes the fleet's verdict
// on its first SetFleet, before it serves, and joins a ramp at the step the fleet is at.
func TestFleetRestartedReplicaAdopts(t *testing.T) {
	set := chat()
	board := NewFleetBoard(time.Second)
	now := t0
	board.Exchange(now, "replica-0", nil, []FleetVerdict{{Key: kA, Phase: PhaseEjected, Until: now.Add(4 * time.Minute), Reason: "ErrorRateExceeded"}})
	board.Exchange(now, "replica-0", nil, []FleetVerdict{{Key: kB, Phase: PhaseRampingUp, Step: 0,
		StepStart: now.Add(-4 * time.Minute), Until: now.Add(8 * time.Minute), Reason: "ProbesPassed"}})

	now = now.Add(10 * time.Second)
	e := newEngine(t, set, kA, kB) // the restarted replica
	ins, _ := board.Exchange(now, "replica-new", e.FleetOutbox(now), nil)
	for _, in := range ins {
		if v := e.SetFleet(now, in); v != nil {
			t.Errorf("restarted replica proposes %+v", v)
		}
	}
	cands := []Candidate{{Channel: kA.Channel, Weight: 100}, {Channel: kB.Channel, Weight: 100}}
	if st := status(t, e, now, kA); st.Phase != PhaseEjected || !st.CooldownUntil.Equal(t0.Add(4*time.Minute)) || st.FleetVerdictBy != "replica-0" {
		t.Errorf("%v: %s until %s, want Ejected until %s", kA, st.Phase, st.CooldownUntil, t0.Add(4*time.Minute))
	}
	// Started 4m10s ago with 3m steps: the second step (15%), begun 1m10s ago, until t0+2m.
	if st := status(t, e, now, kB); st.Phase != PhaseRampingUp || st.TrafficPercent != 15 {
		t.Errorf("%v: %s at %d%%, want RampingUp at 15%%", kB, st.Phase, st.TrafficPercent)
	}
	if st := status(t, e, t0.Add(2*time.Minute-time.Millisecond), kB); st.TrafficPercent != 15 {
		t.Errorf("%v just before the fleet's next step: %d%%, want still 15%%", kB, st.TrafficPercent)
	}
	if st := status(t, e, t0.Add(2*time.Minute), kB); st.TrafficPercent != 50 {
		t.Errorf("%v at the fleet's next step: %d%%, want 50%%", kB, st.TrafficPercent)
	}
	if st := status(t, e, t0.Add(8*time.Minute), kB); st.Phase != PhaseHealthy {
		t.Errorf("%v at the fleet ramp's end: %s, want Healthy", kB, st.Phase)
	}
	for _, r := range e.Select(now, "gpt-4o", cands, StrategyHealthScore, true, 0.5, nil) {
		if r.Channel == kA.Channel {
			t.Error("the restarted replica routes to the channel the fleet ejected")
		}
	}
}

// TestFleetLatencyRule: a provider that turns slow but not failing, at 0.4 requests/s over 20
// replicas (0.02/s each). No replica ever has MinRequests; the fleet's p95 ejects.
func TestFleetLatencyRule(t *testing.T) {
	set := chat() // p95 limit 20s, MinRequests 20, window 60s
	const n = 20
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "local", true: "shared"}[shared], func(t *testing.T) {
			f := newFleet(t, n, set, kA)
			rng := rand.New(rand.NewPCG(20, 20))
			slowFrom := t0.Add(2 * time.Minute)
			var ejected time.Time
			for ms := int64(0); ms < int64(6*time.Minute/time.Millisecond); ms += 500 {
				now := t0.Add(time.Duration(ms) * time.Millisecond)
				if ms%2500 == 0 {
					lat := time.Duration((0.5 + rng.Float64()) * float64(time.Second))
					if !now.Before(slowFrom) {
						lat = time.Duration((25 + 10*rng.Float64()) * float64(time.Second))
					}
					f.engines[rng.IntN(n)].Observe(kA, Observation{At: now, Outcome: OutcomeSuccess, Latency: lat})
				}
				if shared && ms%1000 == 0 {
					f.sync(now)
				}
				if ejected.IsZero() && slices.Contains(f.phases(now, kA), PhaseEjected) {
					ejected = now
				}
			}
			if !shared {
				if !ejected.IsZero() {
					t.Errorf("local judgement ejected at %s with 1/%d of the traffic", ejected, n)
				}
				return
			}
			if ejected.IsZero() {
				t.Fatal("the fleet never ejected the slow provider")
			}
			v, _ := f.board.Verdict(ejected.Add(2*time.Second), kA)
			if v.Reason != "LatencyP95Exceeded" {
				t.Errorf("verdict %+v, want LatencyP95Exceeded", v)
			}
			// 20 slow successes at 0.4/s take 50 s; p95 > limit needs more than 5% of the window's samples slow.
			if d := ejected.Sub(slowFrom); d > 60*time.Second {
				t.Errorf("ejected %s after the provider turned slow, want within a window", d)
			}
			t.Logf("ejected %s after the provider turned slow: %s", ejected.Sub(slowFrom), v.Message)
		})
	}
}

// TestFleetOutboxSkipsQuietKeys: of many keys, only those with something to tell are reported;
// a quiet key joins as soon as the fleet reports a problem with it.
func TestFleetOutboxSkipsQuietKeys(t *testing.T) {
	set := chat()
	var keys []Key
	for i := range 1000 {
		keys = append(keys, Key{Channel: fmt.Sprintf("ch-%04d", i), Model: "gpt-4o"})
	}
	e := newEngine(t, set, keys...)
	now := t0.Add(time.Second)
	for _, k := range keys {
		e.Observe(k, success(now, time.Second))
	}
	e.Observe(keys[3], failure(now, OutcomeServerError))
	e.Observe(keys[7], success(now, 25*time.Second)) // slower than LatencyP95: evidence
	e.Observe(keys[9], Observation{At: now, Outcome: OutcomeRateLimited, RetryAfter: 5 * time.Second})
	eject(t, e, keys[11], now)
	now = now.Add(5 * time.Second)
	got := func() []string {
		var out []string
		for _, r := range e.FleetOutbox(now) {
			out = append(out, r.Channel)
		}
		return out
	}
	// keys[9]: its Retry-After is over by now, but the share is still being restored.
	if want := []string{"ch-0003", "ch-0007", "ch-0009", "ch-0011"}; !slices.Equal(got(), want) {
		t.Fatalf("outbox %v, want %v", got(), want)
	}
	// Another replica reports failures on ch-0020: this replica's successes count from now on.
	e.SetFleet(now, FleetInput{Key: keys[20], Expires: now.Add(3 * time.Second), Replicas: 1,
		Others: FleetCounts{Requests: 3, Failures: 1}})
	if !slices.Contains(got(), "ch-0020") {
		t.Fatalf("outbox %v, want ch-0020 once the fleet has evidence on it", got())
	}
	for _, r := range e.FleetOutbox(now) {
		if r.Channel == "ch-0020" && (r.Counts.Requests != 1 || r.Counts.Failures != 0 || r.Counts.Samples() != 1) {
			t.Errorf("ch-0020 report %+v, want its one success", r.Counts)
		}
		if r.Channel == "ch-0011" && (!r.WantsProbeLease && r.Phase != PhaseEjected) {
			t.Errorf("ch-0011 report %+v", r)
		}
	}
	// The evidence expires with the input.
	now = now.Add(4 * time.Second)
	if slices.Contains(got(), "ch-0020") {
		t.Errorf("outbox %v still has ch-0020 after its fleet input expired", got())
	}
}

// TestFleetConsecutiveFailures: streaks add up across replicas only while no replica saw a
// success since the streak began.
func TestFleetConsecutiveFailures(t *testing.T) {
	set := chat() // 5 in a row
	for _, tc := range []struct {
		name         string
		successAfter bool // replica 3 answers a success after the others' streaks began
		want         bool
	}{
		{"no success anywhere", false, true},
		{"a success on another replica breaks the run", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t, 4, set, kA)
			now := t0.Add(2 * time.Second)
			for i, e := range f.engines[:3] { // 2 failures each: 6 in a row across the fleet
				for j := range 2 {
					e.Observe(kA, failure(now.Add(time.Duration(10*i+j)*time.Millisecond), OutcomeServerError))
				}
			}
			f.engines[3].Observe(kA, success(now.Add(-time.Second), time.Second))
			if tc.successAfter {
				f.engines[3].Observe(kA, success(now.Add(5*time.Millisecond), time.Second))
			}
			end := now.Add(5 * time.Second)
			for i := range 5 {
				f.sync(now.Add(time.Duration(i+1) * time.Second))
			}
			_, held := f.board.Verdict(end, kA)
			if held != tc.want {
				t.Fatalf("verdict held %v, want %v; phases %v", held, tc.want, f.phases(end, kA))
			}
			if ps := f.phases(end, kA); tc.want != allIn(ps, PhaseEjected) || (!tc.want && slices.Contains(ps, PhaseEjected)) {
				t.Errorf("phases %v", ps)
			}
		})
	}
}

// TestFleetBoardSemantics pins what a store must do: NX, compare-and-set, one lease holder,
// the latest Retry-After, and a replica's reports replaced by its next exchange.
func TestFleetBoardSemantics(t *testing.T) {
	b := NewFleetBoard(time.Second)
	now := t0
	ej := FleetVerdict{Key: kA, Phase: PhaseEjected, Until: now.Add(time.Minute)}
	b.Exchange(now, "a", nil, []FleetVerdict{ej})
	b.Exchange(now, "b", nil, []FleetVerdict{ej}) // NX: a was first
	v, _ := b.Verdict(now, kA)
	if v.By != "a" || v.Version != 1 {
		t.Fatalf("after two NX proposals: %+v, want a's, version 1", v)
	}
	ramp := FleetVerdict{Key: kA, Phase: PhaseRampingUp, Until: now.Add(2 * time.Minute), Prev: 7}
	b.Exchange(now, "b", nil, []FleetVerdict{ramp}) // stale Prev
	if v, _ := b.Verdict(now, kA); v.Version != 1 {
		t.Fatalf("a CAS with a stale Prev replaced the verdict: %+v", v)
	}
	ramp.Prev = 1
	b.Exchange(now, "b", nil, []FleetVerdict{ramp})
	if v, _ := b.Verdict(now, kA); v.Version != 2 || v.By != "b" || v.Phase != PhaseRampingUp {
		t.Fatalf("CAS on the held version: %+v", v)
	}
	if _, ok := b.Verdict(now.Add(2*time.Minute), kA); ok {
		t.Fatal("verdict held past its Until")
	}

	want := FleetReport{Key: kB, WantsProbeLease: true, RetryAfterUntil: now.Add(10 * time.Second),
		Counts: FleetCounts{Requests: 4, Failures: 2}}
	b.Exchange(now, "a", []FleetReport{want}, nil)
	want.RetryAfterUntil = now.Add(5 * time.Second) // earlier: the latest one stays
	insB, _ := b.Exchange(now, "b", []FleetReport{want}, nil)
	insA, _ := b.Exchange(now.Add(time.Second), "a", []FleetReport{want}, nil)
	find := func(ins []FleetInput, k Key) FleetInput {
		for _, in := range ins {
			if in.Key == k {
				return in
			}
		}
		t.Fatalf("no input for %v in %+v", k, ins)
		return FleetInput{}
	}
	inB, inA := find(insB, kB), find(insA, kB)
	if inB.HoldsProbeLease || !inB.ProbeLeaseHeld || !inA.HoldsProbeLease {
		t.Errorf("lease: b holds %v (held %v), a holds %v; want a's, renewed", inB.HoldsProbeLease, inB.ProbeLeaseHeld, inA.HoldsProbeLease)
	}
	if !inB.RetryAfterUntil.Equal(now.Add(10*time.Second)) || inB.Others.Failures != 2 || inB.Replicas != 1 {
		t.Errorf("b's input %+v", inB)
	}
	// a goes quiet: its report no longer counts for b.
	b.Exchange(now.Add(2*time.Second), "a", nil, nil)
	insB, _ = b.Exchange(now.Add(2*time.Second), "b", []FleetReport{{Key: kB}}, nil)
	if in := find(insB, kB); in.Replicas != 0 || in.Others.Requests != 0 || in.HoldsProbeLease || in.ProbeLeaseHeld {
		t.Errorf("after a went quiet, b's input %+v", in)
	}
	if got := b.Replicas(now.Add(2 * time.Second)); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("replicas %v", got)
	}
}

// TestFleetBoardRoundMatchesExchange: a Round gives every replica the inputs Exchange gives a
// replica exchanging after all the others (Complete aside: it counts exchanges).
func TestFleetBoardRoundMatchesExchange(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for sc := range 50 {
		now := t0.Add(time.Duration(sc) * time.Hour)
		replicas := 1 + rng.IntN(8)
		var entries []RoundEntry
		for r := range replicas {
			e := RoundEntry{Replica: replicaName(r)}
			for _, k := range []Key{kA, kB, kC} {
				if rng.IntN(3) == 0 {
					continue
				}
				rep := FleetReport{Key: k, WantsProbeLease: rng.IntN(4) == 0}
				rep.Counts.Requests = rng.IntN(20)
				rep.Counts.Failures = rng.IntN(rep.Counts.Requests + 1)
				rep.Counts.Timeouts = rng.IntN(rep.Counts.Failures + 1)
				for range rng.IntN(5) {
					rep.Counts.Latency[rng.IntN(LatencyBins)]++
				}
				if rng.IntN(2) == 0 {
					rep.Streak = 1 + rng.IntN(3)
					rep.StreakStart = now.Add(-time.Duration(rng.IntN(10)) * time.Second)
				}
				if rng.IntN(2) == 0 {
					rep.LastSuccess = now.Add(-time.Duration(rng.IntN(10)) * time.Second)
				}
				if rng.IntN(5) == 0 {
					rep.RetryAfterUntil = now.Add(time.Duration(1+rng.IntN(10)) * time.Second)
				}
				e.Reports = append(e.Reports, rep)
			}
			if rng.IntN(4) == 0 {
				e.Proposals = []FleetVerdict{{Key: kA, Phase: PhaseEjected, Until: now.Add(time.Minute)}}
			}
			entries = append(entries, e)
		}
		seq := NewFleetBoard(time.Second)
		for _, e := range entries {
			seq.Exchange(now, e.Replica, e.Reports, e.Proposals)
		}
		want := map[string][]FleetInput{}
		for _, e := range entries {
			want[e.Replica], _ = seq.Exchange(now, e.Replica, e.Reports, nil)
		}
		round := NewFleetBoard(time.Second)
		round.Round(now, entries)
		for _, e := range entries {
			got := e.Inputs
			w := want[e.Replica]
			norm := func(ins []FleetInput) string {
				var b strings.Builder
				for _, in := range ins {
					v := in.Verdict
					in.Complete, in.Verdict = false, nil
					fmt.Fprintf(&b, "%+v", in)
					if v != nil {
						fmt.Fprintf(&b, " verdict %+v", *v)
					}
					b.WriteString("\n")
				}
				return b.String()
			}
			if norm(got) != norm(w) {
				t.Fatalf("scenario %d, %s:\nround    %+v\nexchange %+v", sc, e.Replica, got, w)
			}
		}
	}
}
