package health

import (
	"fmt"
	"math"
	"time"
)

const (
	// rlMinShare keeps a trickle of traffic on a rate-limited channel so its recovery is seen.
	rlMinShare = 1.0
	// maxLevel bounds the cooldown doubling counter; MaxCooldown caps the duration long before.
	maxLevel = 30
	// baselineSpan: the healthy-p95 baseline is an EWMA with a time constant of 10 windows, slow
	// enough that an incident does not teach the channel that slow is normal.
	baselineSpan = 10
	// latencyFloor: latency is compared with max(baseline, latencyFloor). A channel whose healthy p95
	// is 7 ms doubles on any scheduler hiccup; at LLM latencies nobody is paged for less than this.
	latencyFloor = float64(250 * time.Millisecond)
)

// refLatency is the latency the baseline comparisons use: the baseline, but never below the floor.
func (s *state) refLatency() float64 { return max(s.baseline, latencyFloor) }

// state is one channel×model. All times are Unix nanoseconds; 0 means unset.
type state struct {
	key Key
	set Settings
	geo geometry

	base Phase // never RateLimited: that is the rlOn overlay on Healthy/Degraded
	now  int64 // the key's clock: the latest time it has been advanced to
	idle bool  // window empty and evaluated once: bucket boundaries can be skipped

	score     int
	p95       float64 // ns, cached; p95Dirty when the latency histogram changed
	p95Dirty  bool
	baseline  float64 // ns, EWMA of the window p95 while Healthy; 0 until first measured
	minRecent int     // MinRequests scaled to RecentErrorWindow
	lowSince  int64   // since when the score is below EjectBelow
	consec    int     // failures in a row while in service
	lastFail  Outcome
	// streakStart is when the current run of consec failures began (0 without one) and
	// lastSuccess the latest success: the fleet's consecutive rule needs both (FleetReport).
	streakStart, lastSuccess int64

	ejections      int
	level          int   // cooldown doublings for the next ejection
	inServiceSince int64 // start of the current healthy stretch (cooldown decay)
	cooldownUntil  int64
	cooldownLen    time.Duration

	probeNext, probeSent int64
	probeInFlight        bool
	probeOK              int

	step                     int
	stepStart                int64
	stepReq, stepFail, stepN uint32 // requests, failures, latency samples in the current ramp step
	stepLat                  hist

	rlOn       bool    // a 429 is being honoured: Retry-After pending or share below 100
	rlCut      float64 // share in percent right after the last 429
	retryUntil int64
	last429    int64
	lastCut    int64

	disabledUntil int64

	panic                   bool
	lastAt                  int64
	lastReason, lastMessage string

	// shadow is the DryRun machine of this key (Target.DryRun): it takes the key's outcomes and
	// journals what it would do; nil in Enforce. dryRun marks a shadow itself.
	shadow *state
	dryRun bool

	// The engine's bookkeeping of its sweeps (Engine.active, Engine.dirty).
	pos           int    // index in Engine.order
	sweeps        uint64 // Engine.sweeps when the key last caught up with Engine.swept
	listed, dirty bool   // on Engine.active, on Engine.dirty
	gone          bool   // dropped by Configure

	// fl is the key's fleet view (SetFleet); nil until the first one, so a replica without a
	// fleet store carries nothing more per key.
	fl *fleetState

	// win is most of the state's bytes; its only pointer is its first field. It stays the last
	// field: the garbage collector scans an object only up to its last pointer, so a pointer
	// after win's arrays would have every GC cycle walk every key's window too
	// (BenchmarkGCWith5000Keys measures a collection with 5,000 keys).
	win window
}

func newState(k Key, set Settings, t int64) *state {
	s := &state{key: k, base: PhaseHealthy, now: t, idle: true, score: 100, lastAt: t, inServiceSince: t}
	s.reconfigure(set)
	return s
}

func (s *state) reconfigure(set Settings) {
	s.set = set
	s.minRecent = int(max(1, ceilDiv(int64(set.MinRequests)*int64(set.RecentErrorWindow), int64(set.Window))))
	if g := geometryOf(&set); g != s.geo || s.win.w == 0 {
		s.geo = g
		s.win.init(g, s.now)
		s.idle, s.p95Dirty = true, true
		s.stepLat, s.stepN = hist{}, 0 // bins changed meaning
	}
	if s.step >= len(set.RampSteps) {
		s.step = len(set.RampSteps) - 1
	}
}

func (s *state) inService() bool { return s.base == PhaseHealthy || s.base == PhaseDegraded }

// phase is the phase as reported: RateLimited overlays Healthy and Degraded.
func (s *state) phase() Phase {
	if s.rlOn && s.inService() {
		return PhaseRateLimited
	}
	return s.base
}

func (s *state) p95v() float64 {
	if s.p95Dirty {
		s.p95 = s.win.quantile(&s.win.lat, s.win.latN, 95)
		s.p95Dirty = false
	}
	return s.p95
}

// rlShare is the rate-limit share in percent at t: cut on 429 bursts, then restored linearly at
// 100 points per Window from the later of the last 429 and the end of Retry-After.
func (s *state) rlShare(t int64) float64 {
	if !s.rlOn {
		return 100
	}
	from := max(s.last429, s.retryUntil)
	if t <= from {
		return s.rlCut
	}
	return min(100, s.rlCut+float64(t-from)*100/float64(s.set.Window))
}

// rlEnd is when the share is back at 100 (and Retry-After is over).
func (s *state) rlEnd() int64 {
	from := max(s.last429, s.retryUntil)
	return from + int64(math.Ceil((100-s.rlCut)/100*float64(s.set.Window)))
}

// traffic is the fraction of its normal traffic the key may take at t, and whether it may take
// any at all. Ejected, Probing and Disabled take none; a pending Retry-After takes none.
func (s *state) traffic(t int64) (float64, bool) {
	f := 1.0
	switch s.base {
	case PhaseHealthy:
	case PhaseDegraded:
		f = float64(s.score) / 100
	case PhaseRampingUp:
		f = float64(s.set.RampSteps[s.step]) / 100
	default:
		return 0, false
	}
	if s.rlOn {
		if t < s.retryUntil {
			return 0, false
		}
		f *= s.rlShare(t) / 100
	}
	return f, true
}

func (s *state) status() Status {
	f, ok := s.traffic(s.now)
	w := &s.win
	st := Status{
		Key: s.key, Phase: s.phase(), Score: s.score,
		WindowRequests: w.total.requests(), WindowFailures: w.total.failures(),
		P95: time.Duration(s.p95v()), Baseline: time.Duration(s.baseline), Ejections: s.ejections,
		LastTransition: timeOf(s.lastAt), Reason: s.lastReason, Message: s.lastMessage, Panic: s.panic,
	}
	if ok {
		st.TrafficPercent = int(math.Round(f * 100))
	}
	if b := s.base; b == PhaseEjected || b == PhaseProbing {
		// Out of service the window drains and the computed score climbs back to 100 while the
		// channel still takes no traffic; "Ejected, score 97" misleads whoever reads it at 3 a.m.
		// The internal score (panic ordering, rules) is untouched.
		st.Score = 0
	}
	if sh := s.shadow; sh != nil {
		would := sh.status()
		st.DryRun, st.DryRunPhase, st.DryRunScore = true, would.Phase, would.Score
		st.DryRunReason, st.DryRunMessage, st.DryRunLastTransition = would.Reason, would.Message, would.LastTransition
		st.DryRunWindowRequests, st.DryRunWindowFailures = would.WindowRequests, would.WindowFailures
	}
	if st.WindowRequests > 0 {
		st.ErrorRatePercent = float64(st.WindowFailures) * 100 / float64(st.WindowRequests)
	}
	if s.base == PhaseEjected {
		st.CooldownUntil = timeOf(s.cooldownUntil)
	}
	if s.retryUntil > s.now {
		st.RetryAfterUntil = timeOf(s.retryUntil)
	}
	if fl := s.fl; s.fleetFresh() && fl.in.Verdict != nil && fl.in.Verdict.Version == fl.follows && s.now < nanos(fl.in.Verdict.Until) {
		st.FleetVerdictBy = fl.in.Verdict.By
	}
	return st
}

// ---- time ----

// atRest says that time alone cannot change s: its window is empty and evaluated, no
// transition is scheduled and it is not probing. Advancing it would only move its clock, so the
// sweeps skip it and advance lets it catch up with the Ticks it missed when next used.
func (s *state) atRest() bool {
	return s.idle && s.base != PhaseProbing && s.nextTimer() == math.MaxInt64 && (s.shadow == nil || s.shadow.atRest())
}

// advance brings s to time t, processing in order every bucket boundary (window-derived
// verdicts: score, Degraded, p95 and rate rules, HealthScoreLow) and every scheduled transition
// (cooldown over, ramp step held, override expired, rate limit healed) that falls in between,
// each stamped with its own time. Earlier times are ignored: a key's clock never goes back.
func (e *Engine) advance(s *state, t int64) {
	if s.shadow != nil {
		e.advance(s.shadow, t)
	}
	if s.sweeps != e.sweeps {
		// Ticks skipped the key while it was at rest (or were the last to visit it): it is where
		// they would have left it, at the latest Tick's time.
		s.sweeps = e.sweeps
		t = max(t, e.swept)
	}
	for {
		nb := int64(math.MaxInt64)
		if !s.idle {
			nb = (s.win.head + 1) * s.win.w
		}
		nt := s.nextTimer()
		if nb > t && nt > t {
			break
		}
		if nt < nb {
			s.now = nt
			e.fire(s, nt)
			continue
		}
		s.now = nb
		sliced := s.win.roll()
		e.boundary(s, nb, sliced)
		s.idle = s.win.empty()
	}
	s.now = max(s.now, t)
	if s.idle {
		s.win.jump(s.now)
	}
}

func (s *state) nextTimer() int64 {
	n := int64(math.MaxInt64)
	switch s.base {
	case PhaseEjected:
		n = s.cooldownUntil
	case PhaseRampingUp:
		n = s.stepStart + int64(s.set.RampHold)
	case PhaseDisabled:
		if s.disabledUntil > 0 {
			n = s.disabledUntil
		}
	}
	if s.rlOn {
		n = min(n, s.rlEnd())
	}
	return n
}

// fire applies the scheduled transition due at at (nextTimer made sure one is).
func (e *Engine) fire(s *state, at int64) {
	if s.rlOn && s.rlEnd() <= at {
		from := s.phase()
		s.rlOn = false
		e.changed(s, at, from, ReasonRateLimitRecovered, actorRule, "no 429 for the restore period; share back at 100%")
		return
	}
	switch s.base {
	case PhaseEjected:
		e.enterProbing(s, at, ReasonCooldownElapsed, actorRule, fmt.Sprintf("cooldown of %s elapsed", s.cooldownLen))
	case PhaseRampingUp:
		held := s.set.RampSteps[s.step]
		if s.step == len(s.set.RampSteps)-1 {
			// The score decides between Healthy and Degraded at the next bucket boundary.
			s.consec, s.lowSince, s.inServiceSince = 0, 0, at
			e.transition(s, at, PhaseHealthy, ReasonRampCompleted, actorRule,
				fmt.Sprintf("held %d%% for %s without a rise in errors or latency", held, s.set.RampHold))
			return
		}
		s.step++
		s.startStep(at)
		e.note(s, at, ReasonRampStep, actorRule, fmt.Sprintf("traffic share %d%% -> %d%% after holding %s without a rise",
			held, s.set.RampSteps[s.step], s.set.RampHold))
	case PhaseDisabled:
		e.enterProbing(s, at, ReasonEnabled, actorOperator,
			fmt.Sprintf("override expired at %s; probing before the ramp", timeOf(at).Format(time.RFC3339)))
	}
}

// boundary evaluates the window after it rolled to the bucket starting at b.
func (e *Engine) boundary(s *state, b int64, sliced bool) {
	if sliced {
		s.p95Dirty = true
		// Only a Healthy key teaches the baseline what normal latency is.
		if s.base == PhaseHealthy && int(s.win.latN) >= s.set.MinRequests {
			p := s.p95v()
			if s.baseline == 0 {
				s.baseline = p
			} else {
				s.baseline += (p - s.baseline) * float64(s.win.lw) / float64(baselineSpan*s.set.Window)
			}
		}
	}
	s.score = s.computeScore()
	if !s.inService() {
		return
	}
	if e.checkTrips(s, b, true) {
		return
	}
	set := &s.set
	if set.EjectBelow > 0 && s.score < set.EjectBelow {
		if s.lowSince == 0 {
			s.lowSince = b
		}
		if b-s.lowSince >= int64(set.EjectAfter) {
			e.eject(s, b, ReasonHealthScoreLow, fmt.Sprintf("health score %d < %d for %s (%s)",
				s.score, set.EjectBelow, time.Duration(b-s.lowSince), s.figures()))
			return
		}
	} else {
		s.lowSince = 0
	}
	switch {
	case s.base == PhaseHealthy && s.score < set.DegradedBelow:
		e.transition(s, b, PhaseDegraded, ReasonHealthScoreDegraded, actorRule,
			fmt.Sprintf("health score %d < %d (%s)", s.score, set.DegradedBelow, s.figures()))
	case s.base == PhaseDegraded && s.score >= set.DegradedBelow:
		e.transition(s, b, PhaseHealthy, ReasonHealthScoreRecovered, actorRule,
			fmt.Sprintf("health score %d >= %d (%s)", s.score, set.DegradedBelow, s.figures()))
	}
}

// ---- score and rules ----

// computeScore: 100 - ErrorWeight*Perr - (100-ErrorWeight)*Plat, rounded, in [0, 100]; see the
// package doc for the penalties.
func (s *state) computeScore() int {
	set := &s.set
	w := &s.win
	perr := errPenalty(w.total.failures(), w.total.requests(), set.ErrorRatePercent, set.MinRequests)
	perr = max(perr, errPenalty(w.recent.failures(), w.recent.requests(), set.ErrorRatePercent, s.minRecent))
	plat := 0.0
	if s.baseline > 0 && w.latN > 0 {
		plat = clamp01((s.p95v()/s.refLatency()-1)/2) * min(1, float64(w.latN)/float64(set.MinRequests))
	}
	ew := float64(set.ErrorWeightPercent)
	return int(math.Round(min(100, max(0, 100-ew*perr-(100-ew)*plat))))
}

// errPenalty is the failure rate relative to the ejection threshold (1 at the threshold and
// above), damped by volume so that three requests at night cannot sink a score.
func errPenalty(fail, req, thresholdPct, minReq int) float64 {
	if req == 0 {
		return 0
	}
	ref := 1.0
	if thresholdPct > 0 {
		ref = float64(thresholdPct) / 100
	}
	return clamp01(float64(fail)/float64(req)/ref) * min(1, float64(req)/float64(minReq))
}

func clamp01(x float64) float64 { return min(1, max(0, x)) }

// figures summarises the window for messages.
func (s *state) figures() string {
	req, fail := s.win.total.requests(), s.win.total.failures()
	rate := 0.0
	if req > 0 {
		rate = float64(fail) * 100 / float64(req)
	}
	base := "no baseline yet"
	if s.baseline > 0 {
		base = "baseline " + dur(s.baseline).String()
	}
	// The score takes the worse of the window and the recent window: show the recent one too, or
	// a message like "score 29 (error rate 4.2% over 60s)" makes no sense to whoever reads it.
	recent := ""
	if rr, rf := s.win.recent.requests(), s.win.recent.failures(); rr > 0 && rf > 0 {
		recent = fmt.Sprintf("; recent %.1f%% (%d/%d) over %s", float64(rf)*100/float64(rr), rf, rr, s.set.RecentErrorWindow)
	}
	return fmt.Sprintf("error rate %.1f%% (%d/%d) over %s%s; p95 %s vs %s", rate, fail, req, s.set.Window, recent, dur(s.p95v()), base)
}

func dur(ns float64) time.Duration { return time.Duration(ns).Round(time.Millisecond) }

// checkTrips applies the trip rules to a key in service and ejects on the first that holds. The
// p95 rule runs at bucket boundaries only (withLatency), where the histogram is re-read.
func (e *Engine) checkTrips(s *state, at int64, withLatency bool) bool {
	set := &s.set
	w := &s.win
	if req := w.total.requests(); req >= set.MinRequests {
		fail := w.total.failures()
		if set.ErrorRatePercent > 0 && fail*100 >= req*set.ErrorRatePercent {
			e.eject(s, at, ReasonErrorRateExceeded, fmt.Sprintf("error rate %.1f%% (%d/%d) >= %d%% over %s",
				float64(fail)*100/float64(req), fail, req, set.ErrorRatePercent, set.Window))
			return true
		}
		to := int(w.total[OutcomeTimeout])
		if set.TimeoutRatePercent > 0 && to*100 >= req*set.TimeoutRatePercent {
			e.eject(s, at, ReasonTimeoutRateExceeded, fmt.Sprintf("timeout rate %.1f%% (%d/%d) >= %d%% over %s",
				float64(to)*100/float64(req), to, req, set.TimeoutRatePercent, set.Window))
			return true
		}
		if withLatency && set.LatencyP95 > 0 && w.latN > 0 && s.p95v() > float64(set.LatencyP95) {
			e.eject(s, at, ReasonLatencyP95Exceeded, fmt.Sprintf("p95 latency %s > %s over %s (%d successes, %d requests)",
				dur(s.p95v()), set.LatencyP95, set.Window, w.latN, req))
			return true
		}
	}
	if set.ConsecutiveFailures > 0 && s.consec >= set.ConsecutiveFailures {
		e.eject(s, at, ReasonConsecutiveFailures, fmt.Sprintf("%d consecutive failures (last: %s)", s.consec, s.lastFail))
		return true
	}
	return false
}

// ---- observations ----

func (e *Engine) observe(s *state, o Observation) {
	e.advance(s, nanos(o.At))
	t := s.now // an observation older than the key's clock counts as happening now
	if o.Outcome == OutcomeSuccess {
		s.lastSuccess = t
	}
	if s.win.add(o.Outcome.tallied(), o.Latency) {
		s.p95Dirty = true
	}
	s.idle = false
	if o.Outcome == OutcomeRateLimited {
		e.rateLimited(s, t, o.RetryAfter)
	}
	switch s.base {
	case PhaseHealthy, PhaseDegraded:
		switch {
		case o.Outcome.IsFailure():
			if s.consec == 0 {
				s.streakStart = t
			}
			s.consec++
			s.lastFail = o.Outcome
		case o.Outcome == OutcomeSuccess:
			s.consec, s.streakStart = 0, 0
		}
		e.checkTrips(s, t, false)
	case PhaseRampingUp:
		if !o.Probe {
			e.observeRamp(s, t, o)
		}
	case PhaseProbing:
		// A shadow sends no probes: in a dry run the channel keeps its live traffic, and those
		// attempts are what a probe would have been.
		if o.Probe || s.dryRun {
			e.observeProbe(s, t, o)
		}
	}
	// Ejected and Disabled: the window still records what panic or in-flight traffic saw.
}

// observeRamp returns the key to cooldown on a rise during the current step: a step failure rate
// above half of ErrorRatePercent, or, once the step has minP95Samples successes, a step p95 above
// twice the reference latency (the baseline, at least 250 ms) or above LatencyP95. A ramp exists to catch a relapse on little traffic, so
// the bar is half the ejection threshold, not the threshold itself.
func (e *Engine) observeRamp(s *state, t int64, o Observation) {
	set := &s.set
	s.stepReq++
	switch {
	case o.Outcome.IsFailure():
		s.stepFail++
		if uint64(s.stepFail)*200 > uint64(s.stepReq)*uint64(set.ErrorRatePercent) {
			e.eject(s, t, ReasonRampErrorRise, fmt.Sprintf("%d/%d failures (%.1f%%, last: %s) at ramp step %d%% > %.1f%%",
				s.stepFail, s.stepReq, float64(s.stepFail)*100/float64(s.stepReq), o.Outcome,
				set.RampSteps[s.step], float64(set.ErrorRatePercent)/2))
		}
	case o.Outcome == OutcomeSuccess && o.Latency > 0:
		s.stepLat[s.win.bin(int64(o.Latency))]++
		s.stepN++
		if s.stepN < minP95Samples {
			return
		}
		p := s.win.quantile(&s.stepLat, s.stepN, 95)
		if (s.baseline > 0 && p > 2*s.refLatency()) || (set.LatencyP95 > 0 && p > float64(set.LatencyP95)) {
			e.eject(s, t, ReasonRampLatencyRise, fmt.Sprintf("p95 latency %s at ramp step %d%% over %d successes, baseline %s, limit %s",
				dur(p), set.RampSteps[s.step], s.stepN, dur(s.baseline), set.LatencyP95))
		}
	}
}

func (e *Engine) observeProbe(s *state, t int64, o Observation) {
	set := &s.set
	s.probeInFlight = false
	switch {
	case o.Outcome == OutcomeSuccess && o.Latency <= set.ProbeMaxLatency:
		s.probeOK++
		if s.probeOK >= set.ProbeSuccessesRequired {
			s.step = 0
			s.startStep(t)
			e.transition(s, t, PhaseRampingUp, ReasonProbesPassed, actorProbe,
				fmt.Sprintf("%d probes in a row succeeded within %s; traffic share %d%%",
					s.probeOK, set.ProbeMaxLatency, set.RampSteps[0]))
			s.fleetProbed()
		}
	case o.Outcome == OutcomeSuccess:
		e.probeFailed(s, t, fmt.Sprintf("probe took %s > %s", o.Latency, set.ProbeMaxLatency))
	case o.Outcome.IsFailure():
		e.probeFailed(s, t, fmt.Sprintf("probe failed: %s", o.Outcome))
	}
	// A 429 answer says nothing about the channel's health: the probe is simply repeated.
}

// probeFailed restarts the cooldown at its current length: the key never re-entered service, so
// this is the same ejection going on, not a new one.
func (e *Engine) probeFailed(s *state, t int64, msg string) {
	s.cooldownLen = s.cooldownFor(s.level - 1)
	s.cooldownUntil = t + int64(s.cooldownLen)
	e.transition(s, t, PhaseEjected, ReasonProbeFailed, actorProbe, msg)
	s.fleetProbed()
}

// rateLimited honours a 429: Retry-After blocks the key until it passes, and the first 429 of a
// burst (429s less than one bucket apart) cuts the share by ShareReductionPercent.
func (e *Engine) rateLimited(s *state, t int64, retryAfter time.Duration) {
	e.rateLimitedBy(s, t, retryAfter, "429 from the provider")
}

// rateLimitedBy is rateLimited with the journal's account of where the 429 came from.
func (e *Engine) rateLimitedBy(s *state, t int64, retryAfter time.Duration, source string) {
	from := s.phase()
	share := s.rlShare(t)
	if !s.rlOn || t-s.lastCut >= s.win.w {
		share = max(rlMinShare, share*float64(100-s.set.ShareReductionPercent)/100)
		s.lastCut = t
	}
	s.rlCut, s.last429 = share, t
	if retryAfter > 0 {
		s.retryUntil = max(s.retryUntil, t+int64(retryAfter))
	}
	s.rlOn = s.rlEnd() > t
	msg := fmt.Sprintf("%s; traffic share cut to %.0f%%", source, share)
	if s.retryUntil > t {
		msg += fmt.Sprintf(", nothing before %s (Retry-After)", timeOf(s.retryUntil).Format(time.RFC3339Nano))
	}
	e.changed(s, t, from, ReasonRateLimited, actorRule, msg)
}

// ---- transitions ----

// eject takes a key in service or ramping out of rotation. The cooldown doubles with every
// ejection; the doubling decays by one level per full MaxCooldown spent in service since the
// key last (re)entered it.
func (e *Engine) eject(s *state, at int64, reason, msg string) {
	if s.inService() {
		s.level = max(0, s.level-int((at-s.inServiceSince)/int64(s.set.MaxCooldown)))
	}
	s.cooldownLen = s.cooldownFor(s.level)
	s.level = min(s.level+1, maxLevel)
	s.ejections++
	s.cooldownUntil = at + int64(s.cooldownLen)
	s.consec, s.streakStart, s.lowSince = 0, 0, 0
	if s.fl != nil {
		s.fl.owned = false // a local verdict (SetFleet marks its own trips the fleet's)
	}
	e.transition(s, at, PhaseEjected, reason, actorRule, msg)
}

// cooldownFor is Cooldown doubled level times, capped by MaxCooldown.
func (s *state) cooldownFor(level int) time.Duration {
	cd := s.set.Cooldown
	for i := 0; i < level && cd < s.set.MaxCooldown; i++ {
		cd *= 2
	}
	return min(cd, s.set.MaxCooldown)
}

func (e *Engine) enterProbing(s *state, at int64, reason, actor, msg string) {
	s.probeNext, s.probeInFlight, s.probeOK = at, false, 0
	e.transition(s, at, PhaseProbing, reason, actor, msg)
}

func (s *state) startStep(at int64) {
	s.stepStart, s.stepReq, s.stepFail, s.stepN, s.stepLat = at, 0, 0, 0, hist{}
}

// applyDisabled follows the operator override of a reload: Disabled wins over everything, and
// lifting it re-enters through probes and the ramp, never straight to full traffic.
func (e *Engine) applyDisabled(s *state, tg Target) {
	until := nanos(tg.DisabledUntil)
	off := tg.Disabled && (until == 0 || s.now < until)
	s.disabledUntil = 0
	if off {
		s.disabledUntil = until
	}
	switch {
	case off && s.base != PhaseDisabled:
		msg := "disabled by operator"
		if tg.DisabledReason != "" {
			msg += ": " + tg.DisabledReason
		}
		if until > 0 {
			msg += " (until " + timeOf(until).Format(time.RFC3339) + ")"
		}
		e.transition(s, s.now, PhaseDisabled, ReasonDisabled, actorOperator, msg)
	case !off && s.base == PhaseDisabled:
		e.enterProbing(s, s.now, ReasonEnabled, actorOperator, "override lifted by operator; probing before the ramp")
	}
}

// transition moves s to a new base phase and journals it when the reported phase changes.
func (e *Engine) transition(s *state, at int64, to Phase, reason, actor, msg string) {
	from := s.phase()
	s.base = to
	e.changed(s, at, from, reason, actor, msg)
}

// changed journals a change of the reported phase away from from, if there is one.
func (e *Engine) changed(s *state, at int64, from Phase, reason, actor, msg string) {
	if s.phase() != from {
		e.record(s, at, from, reason, actor, msg)
	}
}

// note journals an event that keeps the phase: a ramp step.
func (e *Engine) note(s *state, at int64, reason, actor, msg string) {
	e.record(s, at, s.phase(), reason, actor, msg)
}

func (e *Engine) record(s *state, at int64, from Phase, reason, actor, msg string) {
	if s.dryRun {
		reason = DryRunPrefix + reason
		msg = "would " + wouldDo(from, s.phase()) + " " + s.key.Channel + " × " + s.key.Model + ": " + msg
	}
	s.lastAt, s.lastReason, s.lastMessage = at, reason, msg
	e.emit(s, at, from, s.phase(), reason, actor, msg)
}
