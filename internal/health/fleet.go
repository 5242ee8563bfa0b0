package health

import (
	"fmt"
	"time"
)

// Fleet evidence: with a fleet store (--fleet-redis) the replicas of one gateway share what they
// see of each channel×model, so that the fleet judges like one proxy. The engine stays pure: what
// the other replicas saw enters through SetFleet, like time, and what this replica saw leaves
// through FleetOutbox. The evidence loop (internal/fleet) carries both to and from the store once
// per sync interval; FleetBoard is the store's semantics in memory, the reference a store is
// tested against.
//
// Without any SetFleet call, or once the last FleetInput of a key has expired (store slow, down
// or partitioned), the key is judged on local evidence alone, exactly as without a fleet.

// LatencyBins is the number of bins of a FleetCounts latency histogram; bins above
// LatencyLimitBin hold successes slower than the key's LatencyP95.
const (
	LatencyBins     = nBins
	LatencyLimitBin = limitBin
)

// FleetCounts are the window tallies of one channel×model: one replica's (FleetReport) or the sum
// of several (FleetInput.Others). They are a snapshot of the window at the report's time, not a
// delta: a replica's newer report replaces its older one.
type FleetCounts struct {
	// Requests, Failures and Timeouts over the key's Window, as the local rules count them
	// (429s are requests, never failures; client errors are nothing). Timeouts are failures too.
	Requests, Failures, Timeouts int
	// Latency is the histogram of successful attempts' latency over the window. Bin i holds
	// latencies in (edge(i-1), edge(i)]; the edges are those of the key's Settings.LatencyP95
	// (three per doubling, edge 44 exactly LatencyP95), which every replica of one config shares,
	// so histograms add up bin by bin and a fleet p95 is read from their sum.
	Latency [LatencyBins]uint32
}

// Add adds o to c, bin by bin.
func (c *FleetCounts) Add(o *FleetCounts) {
	c.Requests += o.Requests
	c.Failures += o.Failures
	c.Timeouts += o.Timeouts
	for i, n := range o.Latency {
		c.Latency[i] += n
	}
}

// Slow is the number of latency samples in c above LatencyP95 (bins above LatencyLimitBin).
func (c *FleetCounts) Slow() uint32 {
	var n uint32
	for _, v := range c.Latency[LatencyLimitBin+1:] {
		n += v
	}
	return n
}

// Samples is the number of latency samples in c.
func (c *FleetCounts) Samples() uint32 {
	var n uint32
	for _, v := range c.Latency {
		n += v
	}
	return n
}

// FleetReport is what one replica tells the fleet about one channel×model at one sync: its
// window, its failure streak, where it stands and what it asks for. FleetOutbox returns one per
// key that is not quiet.
type FleetReport struct {
	Key
	Counts FleetCounts
	// Streak is the replica's current run of consecutive failures (while in service), StreakStart
	// when its first failure happened (zero without a streak) and LastSuccess the replica's latest
	// success on the key (zero if none is remembered). The fleet's consecutive rule adds the
	// streaks only while no replica saw a success since the earliest StreakStart.
	Streak      int
	StreakStart time.Time
	LastSuccess time.Time
	// Phase and TrafficPercent are the replica's own (Status.Phase, Status.TrafficPercent), for
	// the fleet view (replicas per phase, traffic-weighted share).
	Phase          Phase
	TrafficPercent int
	// Follows is the Version of the fleet verdict the replica has adopted, 0 if none.
	Follows uint64
	// RetryAfterUntil is the end of the Retry-After the replica honours (zero if none): the
	// fleet applies the latest one to every replica, since a quota is the account's.
	RetryAfterUntil time.Time
	// WantsProbeLease: the key is Probing here by the fleet's verdict (or its probes just reached
	// a verdict not yet handed to the store). Only the holder of the key's probe lease probes;
	// the store grants it to one asking replica at a time (FleetInput.HoldsProbeLease).
	WantsProbeLease bool
}

// FleetTop names the other replicas with the most evidence, one per kind (ties: the one with the
// fewest requests, or samples, so that leaving it out is the cautious choice).
type FleetTop struct {
	// Failing: the requests and failures of the replica with the most failures.
	FailingRequests, Failures int
	// Timing: the requests and timeouts of the replica with the most timeouts.
	TimingRequests, Timeouts int
	// Slow: the latency histogram of the replica with the most successes above LatencyP95.
	Slow [LatencyBins]uint32
	// Streak: the longest failure streak of one replica.
	Streak int
}

// Consider folds one other replica's report into t.
func (t *FleetTop) Consider(r *FleetReport) {
	c := &r.Counts
	if c.Failures > t.Failures || (c.Failures == t.Failures && c.Failures > 0 && c.Requests < t.FailingRequests) {
		t.FailingRequests, t.Failures = c.Requests, c.Failures
	}
	if c.Timeouts > t.Timeouts || (c.Timeouts == t.Timeouts && c.Timeouts > 0 && c.Requests < t.TimingRequests) {
		t.TimingRequests, t.Timeouts = c.Requests, c.Timeouts
	}
	if n := c.Slow(); n > 0 && slowerThan(&c.Latency, &t.Slow) {
		t.Slow = c.Latency
	}
	t.Streak = max(t.Streak, r.Streak)
}

// slowerThan orders latency histograms for FleetTop.Slow: more samples above LatencyP95 first,
// then fewer samples, then the one with more samples in the slowest bin where they differ, so
// that the order is total and the top does not depend on the order replicas are looked at.
func slowerThan(a, b *[LatencyBins]uint32) bool {
	ca, cb := FleetCounts{Latency: *a}, FleetCounts{Latency: *b}
	if n, m := ca.Slow(), cb.Slow(); n != m {
		return n > m
	}
	if n, m := ca.Samples(), cb.Samples(); n != m {
		return n < m
	}
	for i := LatencyBins - 1; i >= 0; i-- {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return false
}

// FleetVerdict is a phase the whole fleet follows for one channel×model, held by the store.
// While it is held, every replica adopts it within one sync interval (a restarted replica on its
// first SetFleet, before it serves); once Until has passed it is gone and each replica judges
// locally again (an Ejected verdict's end is where probing starts).
type FleetVerdict struct {
	Key
	// Phase is PhaseEjected (tripped on fleet counts, or a probe failed) or PhaseRampingUp
	// (probes passed).
	Phase Phase
	// Until is when the verdict ends: Ejected, the end of the cooldown; RampingUp, the end of the
	// ramp. The store keeps a verdict until then and no longer (SET ... PX Until-now).
	Until time.Time
	// RampingUp: step Step (an index in Settings.RampSteps) started at StepStart; later steps
	// follow every RampHold, on every replica alike.
	Step      int
	StepStart time.Time
	// Reason and Message are the journal's (e.g. ErrorRateExceeded, "error rate 100.0% (40/40)
	// >= 25% over 1m0s across 4 replicas").
	Reason, Message string
	// By is the replica whose proposal the store holds; the store sets it, a proposal leaves it
	// empty.
	By string
	// Version identifies the held verdict; the store assigns it on every successful write and it
	// increases per key, never reused while the store lives (e.g. INCR of a per-key counter).
	Version uint64
	// Prev makes a proposal conditional. Prev == 0: set only if no verdict is held for the key
	// (SET NX: the first replica to trip wins, the others adopt the winner's). Prev != 0: compare
	// and set, replace only if the held verdict's Version is Prev (a probe holder moving the
	// fleet from Ejected to RampingUp or back). A failed proposal changes nothing.
	Prev uint64
}

// FleetInput is what the fleet knows of one channel×model for one replica, as of one sync.
type FleetInput struct {
	Key
	// Expires: after it, the input is stale and the key is judged on local evidence alone, as if
	// the fleet did not exist. Stores set it a few sync intervals ahead (FleetBoard: 3), so that
	// a replica that lost its store falls back by itself within seconds.
	Expires time.Time
	// Replicas is the number of other replicas that reported the key in this sync.
	Replicas int
	// Others are the other replicas' window counts, summed (this replica's own are never in it).
	Others FleetCounts
	// The other replicas' failure streaks: Streak their sum, StreakStart the earliest start among
	// them, LastSuccess the latest success any of them reported.
	Streak      int
	StreakStart time.Time
	LastSuccess time.Time
	// Top is, among the other replicas, the one with the most evidence of each kind: the engine
	// leaves out the single replica (this one or Top's) with the most, so that one replica's own
	// trouble cannot eject for the fleet.
	Top FleetTop
	// Complete: every replica exchanging with the store has exchanged at least twice since the
	// key's evidence (a failure, a streak, a success slower than LatencyP95 in some replica's
	// report) first appeared, so each has had the chance to add its counts: a key is reported
	// only once it is not quiet, and a replica seeing only successes stays quiet until the fleet
	// has evidence on the key. The fleet rules trip on complete views only; without it a fleet
	// of quiet, healthy replicas would be absent from the denominators.
	Complete bool
	// Verdict is the verdict the store holds for the key; nil if none.
	Verdict *FleetVerdict
	// HoldsProbeLease: this replica holds the key's probe lease (granted for two sync intervals to
	// one replica that asked, renewed while it keeps asking). ProbeLeaseHeld: some replica does.
	HoldsProbeLease, ProbeLeaseHeld bool
	// RetryAfterUntil is the latest Retry-After end any replica reported; zero if none pending.
	RetryAfterUntil time.Time
}

// Board is the fleet store as one replica's evidence loop uses it: one exchange per sync
// interval. FleetBoard implements it in memory; internal/fleet implements it on Redis.
type Board interface {
	// Exchange, for replica at now: applies proposals (each as FleetVerdict.Prev says: NX or
	// compare-and-set; By and Version are set by the board), replaces every report the replica
	// made before with reports (a key it no longer reports is quiet there), grants or renews the
	// probe lease of each key it asks for (FleetReport.WantsProbeLease; one holder per key, for
	// two sync intervals), and returns, in channel, model order, the input of every key that
	// another replica reports, that has a verdict, a probe lease or a Retry-After held, or that
	// replica reported itself.
	Exchange(now time.Time, replica string, reports []FleetReport, proposals []FleetVerdict) ([]FleetInput, error)
}

// fleetState is one key's fleet view: the last input and what the key did with it.
type fleetState struct {
	in      FleetInput
	expires int64
	// follows is the Version of the verdict the key adopted (0: none).
	follows uint64
	// owned: the key is out of service by the fleet's judgement (it adopted a verdict or tripped
	// on fleet counts), not by a local rule. Only then does its recovery go through the probe
	// lease and is its probe's verdict the fleet's; a local verdict recovers locally.
	owned bool
	// pending is a verdict this replica's probes decided (the lease holder's ProbesPassed or
	// ProbeFailed), returned by the next SetFleet for the store.
	pending *FleetVerdict
}

// fresh says whether the key's fleet input still holds at its clock.
func (s *state) fleetFresh() bool { return s.fl != nil && s.now < s.fl.expires }

// mayProbe: with a fresh fleet view, only the probe lease holder probes; without one the key
// probes on its own, as without a fleet.
func (s *state) mayProbe() bool { return !s.fleetFresh() || !s.fl.owned || s.fl.in.HoldsProbeLease }

// fleetProbed notes, on the probe lease holder, the verdict its probes just reached (s.base is
// RampingUp or Ejected), for the next SetFleet to hand to the store.
func (s *state) fleetProbed() {
	if !s.fleetFresh() || !s.fl.owned || !s.fl.in.HoldsProbeLease || s.dryRun {
		return
	}
	v := &FleetVerdict{Key: s.key, Phase: s.base, Reason: s.lastReason, Message: s.lastMessage}
	if s.base == PhaseRampingUp {
		v.Step, v.StepStart = s.step, timeOf(s.stepStart)
		v.Until = timeOf(s.stepStart + int64(len(s.set.RampSteps)-s.step)*int64(s.set.RampHold))
	} else {
		v.Until = timeOf(s.cooldownUntil)
	}
	s.fl.pending = v
}

// FleetOutbox returns, in channel, model order, the report of every key that is not quiet at
// now: a failure in the window or a failure streak, a success slower than LatencyP95 in the
// window, a phase other than Healthy, a Retry-After pending, Probing (it wants the probe lease),
// or fresh fleet input that carries evidence (other replicas' failures, streaks or successes
// slower than LatencyP95, a verdict, a Retry-After), so that this replica's successes
// join the fleet's denominators as soon as another replica reports a problem. A quiet key costs
// the store nothing. Keys in DryRun take no part in the fleet.
func (e *Engine) FleetOutbox(now time.Time) []FleetReport {
	t := nanos(now)
	var out []FleetReport
	e.each(func(s *state) {
		if s.shadow != nil {
			return
		}
		e.advance(s, t)
		if s.quiet() {
			return
		}
		r := s.report()
		out = append(out, r)
	})
	return out
}

// report is the key's FleetReport at its clock.
func (s *state) report() FleetReport {
	w := &s.win
	r := FleetReport{Key: s.key, Phase: s.phase(), Streak: s.consec,
		StreakStart: timeOf(s.streakStart), LastSuccess: timeOf(s.lastSuccess),
		// The holder keeps the lease until the verdict its probes reached is out (pending), or
		// another replica would take it and probe once more before it learns.
		WantsProbeLease: s.fl != nil && s.fl.owned && (s.base == PhaseProbing || s.fl.pending != nil),
		Counts: FleetCounts{Requests: w.total.requests(), Failures: w.total.failures(),
			Timeouts: int(w.total[OutcomeTimeout]), Latency: w.lat}}
	if f, ok := s.traffic(s.now); ok {
		r.TrafficPercent = int(f*100 + 0.5)
	}
	if s.retryUntil > s.now {
		r.RetryAfterUntil = timeOf(s.retryUntil)
	}
	if s.fleetFresh() && s.fl.in.Verdict != nil && s.fl.in.Verdict.Version == s.fl.follows {
		r.Follows = s.fl.follows
	}
	return r
}

// slow counts the samples of h above the key's LatencyP95 (0 without a p95 rule): a success
// that slow is evidence for the fleet's p95 rule, as a failure is for its rate rules.
func (s *state) slow(h *[LatencyBins]uint32) uint32 {
	if s.set.LatencyP95 <= 0 {
		return 0
	}
	var n uint32
	for _, c := range h[limitBin+1:] {
		n += c
	}
	return n
}

// quiet says the key has nothing to tell the fleet (see FleetOutbox).
func (s *state) quiet() bool {
	if s.win.total.failures() > 0 || s.consec > 0 || s.phase() != PhaseHealthy || s.retryUntil > s.now ||
		s.slow((*[LatencyBins]uint32)(&s.win.lat)) > 0 {
		return false
	}
	if !s.fleetFresh() {
		return true
	}
	in := &s.fl.in
	return in.Others.Failures == 0 && in.Streak == 0 && in.Verdict == nil && nanos(in.RetryAfterUntil) <= s.now &&
		s.slow(&in.Others.Latency) == 0
}

// SetFleet gives one key the fleet's view as of now (see FleetInput) and applies it:
//   - RetryAfterUntil later than this replica's own is honoured like a 429 seen here (a quota is
//     the account's): no traffic before it, the share cut once;
//   - a held verdict this replica does not follow yet is adopted, journaled with actor "fleet":
//     Ejected until Until, or RampingUp at the step the verdict's StepStart and RampHold give
//     (not while Disabled: the operator wins);
//   - a verdict the probe lease holder's probes reached since the last call is returned, to be
//     proposed as a compare-and-set on the held verdict (Prev), or NX when none is held;
//   - with no verdict held and a Complete view, the rate, timeout-rate and p95 rules are
//     evaluated on local + Others counts (MinRequests counts the fleet's requests, so they work
//     at low traffic per replica), the consecutive rule on the summed streaks while no replica
//     saw a success since the earliest streak start. The rest of the fleet must still show it
//     without the one replica that has the most evidence of its kind (this one or Top's; a rate
//     rule at half its threshold): failures only one replica sees stay a local verdict there,
//     diluted by the fleet's denominators. On a fleet trip a key in service is ejected here, a
//     key already ejected here keeps its cooldown, and either way the verdict to publish is
//     returned (Prev 0: the first replica to trip wins; the others adopt the winner's);
//   - until Expires, a key in Probing probes only while it holds the probe lease (ProbesDue).
//
// An unknown key, a key in DryRun, or an input that has already expired changes nothing and
// returns nil. The probe lease and the other counts apply until the next SetFleet of the key, or
// Expires, whichever comes first.
func (e *Engine) SetFleet(now time.Time, in FleetInput) (propose *FleetVerdict) {
	t := nanos(now)
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.states[in.Key]
	if s == nil || s.shadow != nil {
		return nil
	}
	e.advance(s, t)
	if nanos(in.Expires) <= s.now {
		return nil
	}
	defer e.touch(s)
	if s.fl == nil {
		s.fl = &fleetState{}
	}
	fl := s.fl
	if in.Verdict != nil {
		v := *in.Verdict // the caller's copy may be reused
		in.Verdict = &v
	}
	fl.in, fl.expires = in, nanos(in.Expires)
	if ru := nanos(in.RetryAfterUntil); ru > s.now && ru > s.retryUntil {
		e.rateLimitedBy(s, s.now, time.Duration(ru-s.now), "429 seen by another replica")
	}
	if v := in.Verdict; v != nil && v.Version != fl.follows && s.base != PhaseDisabled {
		fl.follows, fl.pending = v.Version, nil
		if e.adopt(s, v) {
			fl.owned = true
		}
		return nil
	}
	if p := fl.pending; p != nil {
		fl.pending = nil
		p.Prev = 0
		if in.Verdict != nil {
			p.Prev = in.Verdict.Version
		}
		return p
	}
	if in.Verdict != nil || !(s.inService() || s.base == PhaseEjected) {
		return nil
	}
	reason, msg, ok := s.fleetTrip(&in)
	if !ok {
		return nil
	}
	if s.inService() {
		e.eject(s, s.now, reason, msg)
	}
	fl.owned = true
	return &FleetVerdict{Key: s.key, Phase: PhaseEjected, Until: timeOf(s.cooldownUntil), Reason: reason, Message: msg}
}

// adopt moves s to the fleet verdict v (mu held) and says whether it did. A key already where v
// says only takes v's times, without a journal entry: it is the replica that set v, or it got
// there itself.
func (e *Engine) adopt(s *state, v *FleetVerdict) bool {
	until := nanos(v.Until)
	if until <= s.now {
		return false
	}
	by := v.By
	if by == "" {
		by = "another replica"
	}
	switch v.Phase {
	case PhaseEjected:
		if s.base == PhaseEjected {
			s.cooldownUntil = until
			return true
		}
		if s.inService() {
			s.level = max(0, s.level-int((s.now-s.inServiceSince)/int64(s.set.MaxCooldown)))
		}
		if s.base != PhaseProbing { // a failed probe elsewhere continues the same ejection
			s.level = min(s.level+1, maxLevel)
			s.ejections++
		}
		s.cooldownUntil, s.cooldownLen = until, time.Duration(until-s.now)
		s.consec, s.streakStart, s.lowSince = 0, 0, 0
		e.transition(s, s.now, PhaseEjected, v.Reason, actorFleet,
			fmt.Sprintf("fleet verdict of %s until %s: %s", by, timeOf(until).Format(time.RFC3339), v.Message))
		return true
	case PhaseRampingUp:
		hold := int64(s.set.RampHold)
		start, step := nanos(v.StepStart), v.Step
		if start > s.now {
			start = s.now
		}
		for step < len(s.set.RampSteps)-1 && s.now-start >= hold {
			step, start = step+1, start+hold
		}
		if step < 0 || step >= len(s.set.RampSteps) || s.now-start >= hold {
			return false // the ramp is over by now: local judgement
		}
		was := s.base == PhaseRampingUp
		if !was || s.step != step {
			s.startStep(start)
		}
		s.step, s.stepStart = step, start
		if !was {
			e.transition(s, s.now, PhaseRampingUp, ReasonProbesPassed, actorFleet,
				fmt.Sprintf("fleet verdict of %s: %s; traffic share %d%%", by, v.Message, s.set.RampSteps[step]))
		}
		return true
	}
	return false
}

// fleetTrip applies the fleet's trip rules to s's window plus the others' (see SetFleet). Each
// rule must hold on the union, and the rest must still show it without the one replica, this
// one or another, with the most evidence of its kind (leave-worst-out): a rate rule at half its
// threshold at least, the p95 rule over its limit, the consecutive rule with a streak. An outage
// the whole fleet sees passes that; one replica's own broken egress, beside the noise of the
// others, does not. Half, not the whole threshold: the worst replica of a real outage is above
// the fleet's rate by chance, and requiring the rest to reach the threshold too delayed the
// bank example's fleet ejection by seconds.
func (s *state) fleetTrip(in *FleetInput) (reason, msg string, ok bool) {
	if in.Replicas == 0 || !in.Complete {
		return "", "", false
	}
	set, w, o, top := &s.set, &s.win, &in.Others, &in.Top
	if o.Failures == 0 && in.Streak == 0 && top.Slow == ([LatencyBins]uint32{}) {
		return "", "", false // the rest of the fleet has no evidence: no fleet rule can hold
	}
	across := func() string { return fmt.Sprintf("across %d replicas", in.Replicas+1) }
	// holds: n of req reach pct, and still do without the replica with the most (its n and req
	// are the larger n of this replica's (ln, lreq) and the top other's (tn, treq)).
	holds := func(pct, n, req, ln, lreq, tn, treq int) bool {
		wn, wreq := tn, treq
		if ln > tn || (ln == tn && lreq < treq) {
			wn, wreq = ln, lreq
		}
		rn, rreq := n-wn, req-wreq
		return pct > 0 && n*100 >= req*pct && rn > 0 && rn*200 >= rreq*pct
	}
	if req := w.total.requests() + o.Requests; req >= set.MinRequests {
		lreq := w.total.requests()
		fail := w.total.failures() + o.Failures
		if holds(set.ErrorRatePercent, fail, req, w.total.failures(), lreq, top.Failures, top.FailingRequests) {
			return ReasonErrorRateExceeded, fmt.Sprintf("error rate %.1f%% (%d/%d) >= %d%% over %s %s",
				float64(fail)*100/float64(req), fail, req, set.ErrorRatePercent, set.Window, across()), true
		}
		lto := int(w.total[OutcomeTimeout])
		if to := lto + o.Timeouts; holds(set.TimeoutRatePercent, to, req, lto, lreq, top.Timeouts, top.TimingRequests) {
			return ReasonTimeoutRateExceeded, fmt.Sprintf("timeout rate %.1f%% (%d/%d) >= %d%% over %s %s",
				float64(to)*100/float64(req), to, req, set.TimeoutRatePercent, set.Window, across()), true
		}
		if lim := float64(set.LatencyP95); lim > 0 {
			local := FleetCounts{Latency: w.lat}
			worst := FleetCounts{Latency: top.Slow}
			if slowerThan(&local.Latency, &worst.Latency) {
				worst = local
			}
			sum, rest := hist(o.Latency), hist{}
			for i := range sum {
				sum[i] += w.lat[i]
				rest[i] = sum[i] - worst.Latency[i]
			}
			n, rn := w.latN+o.Samples(), w.latN+o.Samples()-worst.Samples()
			if p := w.quantile(&sum, n, 95); p > lim && rn > 0 && w.quantile(&rest, rn, 95) > lim {
				return ReasonLatencyP95Exceeded, fmt.Sprintf("p95 latency %s > %s over %s (%d successes, %d requests) %s",
					dur(p), set.LatencyP95, set.Window, n, req, across()), true
			}
		}
	}
	if c, total := set.ConsecutiveFailures, s.consec+in.Streak; c > 0 && total >= c && total-max(s.consec, top.Streak) > 0 {
		start, last := nanos(in.StreakStart), max(nanos(in.LastSuccess), s.lastSuccess)
		if in.Streak == 0 {
			start = s.streakStart
		} else if s.consec > 0 {
			start = min(start, s.streakStart)
		}
		if last < start {
			return ReasonConsecutiveFailures, fmt.Sprintf("%d consecutive failures %s (last here: %s)",
				total, across(), s.lastFail), true
		}
	}
	return "", "", false
}
