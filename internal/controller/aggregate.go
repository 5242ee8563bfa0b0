package controller

import (
	"math"
	"sort"
	"strconv"
	"time"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/health"
)

// modelKey names one channel×model.
type modelKey struct{ Channel, Model string }

// replicaReport is one proxy replica's answer to GET /admin/v1/channels.
type replicaReport struct {
	Replica  string
	Channels []liveState
	Rollouts []adminapi.RolloutState
}

// liveState is what the poller keeps of one replica's channel×model: what aggregate reads, in
// under half of an adminapi.ChannelState (200 replicas × 5,000 keys are a million of them).
type liveState struct {
	// Channel, Model and Phase are interned (adminapi.View); Phase is normalPhase's.
	Channel, Model, Phase string
	LastTransition        *adminapi.Transition
	// rare holds what few states carry (nil for the others).
	rare                           *rareState
	WindowRequests, WindowFailures int32
	P95LatencyMillis               int32
	Ejections                      int32
	HealthScore, TrafficPercent    int8
	Panic                          bool
}

// rareState is what only some states carry: a DryRun policy's would-be phase, and a verdict the
// fleet store holds. Nothing else of FleetKeyState is kept: with a store, every state carries
// one, and its per-phase counts were a map per replica × key.
type rareState struct {
	// DryRunPhase is normalPhase's ("" without a dry run); DryRunTransition its last transition.
	DryRunPhase      string
	DryRunTransition *adminapi.Transition
	// Verdict is the fleet verdict's phase (normalPhase's) when the store holds one, else "".
	Verdict string
}

// keepLive is what the poller keeps of a state.
func keepLive(s adminapi.ChannelState) liveState {
	l := liveState{Channel: s.Channel, Model: s.Model, Phase: adminapi.Intern(normalPhase(s.Phase)), LastTransition: s.LastTransition,
		WindowRequests: clampInt32(s.WindowRequests), WindowFailures: clampInt32(s.WindowFailures),
		P95LatencyMillis: int32(min(max(s.P95LatencyMillis, 0), math.MaxInt32)), Ejections: clampInt32(s.Ejections),
		HealthScore: int8(clampPercent(s.HealthScore)), TrafficPercent: int8(clampPercent(s.TrafficPercent)), Panic: s.Panic}
	if l.LastTransition != nil {
		l.LastTransition.Reason = adminapi.Intern(l.LastTransition.Reason)
	}
	verdict := s.Fleet != nil && s.Fleet.VerdictBy != ""
	if s.DryRun != nil || verdict {
		l.rare = &rareState{}
		if s.DryRun != nil {
			l.rare.DryRunPhase, l.rare.DryRunTransition = adminapi.Intern(normalPhase(s.DryRun.Phase)), s.DryRun.LastTransition
		}
		if verdict {
			l.rare.Verdict = adminapi.Intern(normalPhase(s.Fleet.Phase))
		}
	}
	return l
}

func liveKey(l *liveState) adminapi.ChannelKey {
	return adminapi.ChannelKey{Channel: l.Channel, Model: l.Model}
}

// newLiveView is a replica's view as the poller keeps it.
func newLiveView() adminapi.View[liveState] {
	return adminapi.View[liveState]{Keep: keepLive, Key: liveKey}
}

// liveStates is keepLive of each state (for tests and callers holding full documents).
func liveStates(states ...adminapi.ChannelState) []liveState {
	out := make([]liveState, len(states))
	for i, s := range states {
		out[i] = keepLive(s)
	}
	return out
}

func clampInt32(v int) int32 { return int32(min(max(v, 0), math.MaxInt32)) }

// modelAggregate is one channel×model as all replicas together see it.
type modelAggregate struct {
	// Phase is the fleet's phase: the verdict the fleet store holds when a replica reports one
	// (FleetKeyState.VerdictBy set), else the phase most of the traffic sees, each replica's
	// view weighted by its traffic (replicaWeights); the more severe phase on a tie.
	Phase v1alpha1.Phase
	// Replicas counts the replicas reporting each phase (their own, local phase).
	Replicas map[string]int32
	// HealthScore and TrafficPercent are weighted by each replica's traffic, rounded down: what
	// the traffic as a whole gets. One replica of 200 ejecting a channel is 99%, not 0% beside
	// a Healthy phase (the minimum was), nor 100%.
	HealthScore    int32
	TrafficPercent int32
	// WindowRequests and WindowFailures are summed; ErrorRatePercent is computed from the sums so a
	// busy replica weighs more than an idle one.
	WindowRequests   int64
	WindowFailures   int64
	ErrorRatePercent int32
	// P95LatencyMillis is the highest replica p95 (a p95 cannot be merged; the worst is honest).
	P95LatencyMillis int64
	Ejections        int64
	Panic            bool
	// LastTransition is the latest transition among the replicas in the fleet's phase.
	LastTransition *adminapi.Transition
	// DryRunPhase is the dominant would-be phase of a DryRun policy's channel×model ("" when no
	// replica reports one) and DryRunReason the latest would-be transition's rule among the
	// replicas in that phase.
	DryRunPhase  v1alpha1.Phase
	DryRunReason string
}

// replicaWeights is each report's traffic: the requests in its detection windows over every
// channel×model it reports. A replica's view of one key is weighted by its traffic as a whole,
// not by its traffic on that key: an ejected key carries none on the replicas that ejected it.
func replicaWeights(reports []replicaReport) []int64 {
	w := make([]int64, len(reports))
	for i, r := range reports {
		for _, s := range r.Channels {
			w[i] += int64(s.WindowRequests)
		}
	}
	return w
}

// aggregate merges the replicas' reports per channel×model. It is pure and order-independent,
// and makes one pass over the states without copying them: at 200 replicas × 5,000 keys a copy
// per state was most of a poll's CPU and memory.
func aggregate(reports []replicaReport) map[modelKey]modelAggregate {
	type acc struct {
		agg modelAggregate
		// byTraffic and byCount weigh each phase by the replicas' traffic and by head.
		byTraffic map[string]int64
		// weighted and plain sums of score and share, for the two weightings.
		weight, score, traffic  int64
		heads, hScore, hTraffic int64
		latest                  map[string]*adminapi.Transition // per phase
		dry                     map[string]int32                // replicas per would-be phase
		dryLatest               map[string]*adminapi.Transition
		verdict                 map[string]int32 // replicas per fleet verdict held in the store
	}
	later := func(m map[string]*adminapi.Transition, phase string, t *adminapi.Transition) {
		if t != nil && (m[phase] == nil || t.Time.After(m[phase].Time)) {
			m[phase] = t
		}
	}
	weights := replicaWeights(reports)
	accs := map[modelKey]*acc{}
	for ri, r := range reports {
		w := weights[ri]
		for i := range r.Channels {
			s := &r.Channels[i]
			k := modelKey{s.Channel, s.Model}
			a := accs[k]
			if a == nil {
				a = &acc{agg: modelAggregate{Replicas: map[string]int32{}}, byTraffic: map[string]int64{}, latest: map[string]*adminapi.Transition{}}
				accs[k] = a
			}
			g := &a.agg
			phase := s.Phase
			g.Replicas[phase]++
			a.byTraffic[phase] += w
			score, traffic := int64(s.HealthScore), int64(s.TrafficPercent)
			a.weight, a.score, a.traffic = a.weight+w, a.score+w*score, a.traffic+w*traffic
			a.heads, a.hScore, a.hTraffic = a.heads+1, a.hScore+score, a.hTraffic+traffic
			later(a.latest, phase, s.LastTransition)
			g.WindowRequests += int64(s.WindowRequests)
			g.WindowFailures += int64(s.WindowFailures)
			g.P95LatencyMillis = max(g.P95LatencyMillis, int64(s.P95LatencyMillis))
			g.Ejections += int64(s.Ejections)
			g.Panic = g.Panic || s.Panic
			if s.rare == nil {
				continue
			}
			if dp := s.rare.DryRunPhase; dp != "" {
				if a.dry == nil {
					a.dry, a.dryLatest = map[string]int32{}, map[string]*adminapi.Transition{}
				}
				a.dry[dp]++
				later(a.dryLatest, dp, s.rare.DryRunTransition)
			}
			if v := s.rare.Verdict; v != "" {
				if a.verdict == nil {
					a.verdict = map[string]int32{}
				}
				a.verdict[v]++
			}
		}
	}
	out := make(map[modelKey]modelAggregate, len(accs))
	for k, a := range accs {
		g := a.agg
		if a.weight > 0 {
			g.Phase = dominantPhase(a.byTraffic)
			g.HealthScore, g.TrafficPercent = int32(a.score/a.weight), int32(a.traffic/a.weight)
		} else {
			// An idle fleet (no traffic in any window) counts heads.
			g.Phase = dominantPhase(g.Replicas)
			g.HealthScore, g.TrafficPercent = int32(a.hScore/a.heads), int32(a.hTraffic/a.heads)
		}
		if a.verdict != nil {
			g.Phase = dominantPhase(a.verdict)
		}
		if g.WindowRequests > 0 {
			g.ErrorRatePercent = int32(math.Round(float64(g.WindowFailures) * 100 / float64(g.WindowRequests)))
		}
		if t := a.latest[string(g.Phase)]; t != nil {
			c := *t
			g.LastTransition = &c
		}
		if a.dry != nil {
			g.DryRunPhase = dominantPhase(a.dry)
			if t := a.dryLatest[string(g.DryRunPhase)]; t != nil {
				g.DryRunReason = t.Reason
			}
		}
		out[k] = g
	}
	return out
}

// rolloutAggregate is one policy's rollout cohorts, summed over the replicas that serve it.
type rolloutAggregate struct {
	Percent        int
	DryRun         bool
	Policy, Listed adminapi.CohortCounts
}

// aggregateRollouts sums the replicas' cohort figures per policy (namespace/name). Replicas that
// serve another form of the policy (a reload in progress) are added up all the same: the counts
// are since each replica started, whatever percent it served them under.
func aggregateRollouts(reports []replicaReport) map[string]rolloutAggregate {
	var out map[string]rolloutAggregate
	for _, r := range reports {
		for _, ro := range r.Rollouts {
			if out == nil {
				out = map[string]rolloutAggregate{}
			}
			g := out[ro.Name]
			g.Percent, g.DryRun = ro.Percent, ro.DryRun
			g.Policy = addCounts(g.Policy, ro.Policy)
			g.Listed = addCounts(g.Listed, ro.Listed)
			out[ro.Name] = g
		}
	}
	return out
}

func addCounts(a, b adminapi.CohortCounts) adminapi.CohortCounts {
	return adminapi.CohortCounts{Requests: a.Requests + max(b.Requests, 0), Successes: a.Successes + max(b.Successes, 0),
		LatencyNanos: a.LatencyNanos + max(b.LatencyNanos, 0)}
}

// cohortStatus is a cohort's figures as status shows them.
func cohortStatus(c adminapi.CohortCounts) v1alpha1.CohortStatus {
	out := v1alpha1.CohortStatus{Requests: c.Requests}
	if c.Requests > 0 {
		out.SuccessRate = strconv.FormatFloat(math.Floor(float64(c.Successes)*1000/float64(c.Requests))/10, 'f', 1, 64)
		out.MeanLatency = (time.Duration(c.LatencyNanos / c.Requests)).Round(time.Millisecond).String()
	}
	return out
}

// normalPhase maps a reported phase to the API's spelling; anything unknown is Unknown.
func normalPhase(s string) string {
	if _, err := health.ParsePhase(s); err != nil {
		return string(v1alpha1.PhaseUnknown)
	}
	return s
}

// severity orders phases from best to worst for aggregation. Unknown (no report) sits just above
// Healthy: not evidence of trouble, but not evidence of health either.
func severity(p v1alpha1.Phase) int {
	if p == v1alpha1.PhaseUnknown {
		return 0
	}
	hp, err := health.ParsePhase(string(p))
	if err != nil {
		return 0
	}
	if hp == health.PhaseHealthy {
		return -1
	}
	return hp.Severity()
}

// dominantPhase is the phase with the most weight (replicas, or their traffic); a tie goes to
// the more severe phase.
func dominantPhase[N int32 | int64](counts map[string]N) v1alpha1.Phase {
	phases := make([]string, 0, len(counts))
	for p := range counts {
		phases = append(phases, p)
	}
	sort.Slice(phases, func(i, j int) bool {
		a, b := phases[i], phases[j]
		if counts[a] != counts[b] {
			return counts[a] > counts[b]
		}
		if sa, sb := severity(v1alpha1.Phase(a)), severity(v1alpha1.Phase(b)); sa != sb {
			return sa > sb
		}
		return a < b
	})
	if len(phases) == 0 {
		return v1alpha1.PhaseUnknown
	}
	return v1alpha1.Phase(phases[0])
}

// worstPhase is the more severe of two phases.
func worstPhase(a, b v1alpha1.Phase) v1alpha1.Phase {
	if severity(b) > severity(a) {
		return b
	}
	return a
}

// routable reports whether a phase carries real traffic.
func routable(p v1alpha1.Phase) bool {
	switch p {
	case v1alpha1.PhaseHealthy, v1alpha1.PhaseDegraded, v1alpha1.PhaseRateLimited, v1alpha1.PhaseRampingUp:
		return true
	}
	return false
}

func clampPercent(v int) int32 {
	return int32(min(max(v, 0), 100))
}
