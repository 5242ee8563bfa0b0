package controller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// ConditionProxiesReporting says whether the live part of the status (phases, scores, traffic) is
// current: True when every discovered proxy replica answered, False when some or all did not (the
// status then shows what the reachable replicas, or the last poll, reported). It is the one
// condition added to the contract's Ready/Available/Degraded, so stale data is marked as such.
const ConditionProxiesReporting = "ProxiesReporting"

// ConditionFleetShared says whether every proxy replica shares evidence and verdicts through
// the fleet store (--fleet-redis): False while some run on their local evidence alone (the
// store slow, down or unreachable from them), naming them. Absent when no replica uses a store.
// It sits beside ProxiesReporting, the other condition about the proxies rather than the
// channel.
const ConditionFleetShared = "FleetShared"

// Reasons of FleetShared.
const (
	ReasonFleetShared = "Shared"
	ReasonLocalMode   = "LocalMode"
)

// Condition and model reasons the controller sets (compile problems use routing's reasons).
const (
	ReasonCompiled          = "Compiled"
	ReasonConfigHeldBack    = "ConfigHeldBack"
	ReasonProblemResolved   = "ProblemResolved"
	ReasonDisabled          = "Disabled"
	ReasonEnabled           = "Enabled"
	ReasonRoutable          = "Routable"
	ReasonNotRoutable       = "NotRoutable"
	ReasonNoReport          = "NoReport"
	ReasonNotPublished      = "NotPublished"
	ReasonAllModelsRoutable = "AllModelsRoutable"
	ReasonModelNotRoutable  = "ModelNotRoutable"
	// ReasonPanicRouting: some model has no routable channel, and the policy's panicRouting
	// serves it on the least-bad one: requests are answered, by a channel the rules ejected.
	ReasonPanicRouting      = "PanicRouting"
	ReasonChannelsHealthy   = "AllChannelsHealthy"
	ReasonChannelsUnhealthy = "ChannelsNotHealthy"
	ReasonAllReporting      = "AllReplicasReporting"
	ReasonSomeUnreachable   = "ReplicasUnreachable"
	ReasonNoneReachable     = "NoReplicaReachable"
	ReasonNoReplicas        = "NoReplicas"
	// Accepted, Programmed and Ready (the contract's second wave).
	ReasonAccepted     = "Accepted"
	ReasonProgrammed   = "Programmed"
	ReasonPending      = "Pending"
	ReasonStale        = "Stale"
	ReasonNoProxies    = "NoProxies"
	ReasonNotMonitored = "NotMonitored"
	ReasonReady        = "Ready"
)

// liveView is what the proxy replicas reported on the last poll.
type liveView struct {
	// Polled is false until the first poll has completed: status then keeps what it had.
	Polled   bool
	Replicas []replicaInfo
	Models   map[modelKey]modelAggregate
	// DiscoveryError is why finding the replicas failed on the last poll ("" when it did not).
	DiscoveryError string
	// Clients is the GatewayClients' use today, summed over the reachable replicas (clients.go).
	Clients map[string]clientUsage
	// Rollouts are the cohorts of the policies with a spec.rollout, by namespace/name.
	Rollouts map[string]rolloutAggregate
}

// replicaInfo is one discovered replica's reachability and, when it reports one, the config it
// serves.
type replicaInfo struct {
	Name      string
	Reachable bool
	Error     string
	// Hash is the served config's hash ("" before the replica loaded one); Generations maps
	// each object it serves (routing.ObjectKey) to its generation (nil from proxies that predate
	// the field).
	Hash        string
	Generations map[string]int64
	// Fleet is the replica's link to the fleet store (nil without one); only whether it is
	// connected is kept, so that the view moves when a replica leaves or rejoins the fleet.
	Fleet *fleetLink
}

// fleetLink is what the controller keeps of a replica's adminapi.FleetLink.
type fleetLink struct{ Connected bool }

// fresh reports whether the view carries live data.
func (v liveView) fresh() bool {
	return v.Polled && slices.ContainsFunc(v.Replicas, func(r replicaInfo) bool { return r.Reachable })
}

// seconds drops what status cannot store (sub-second precision, the monotonic clock), so a
// computed time compares equal to the same time read back from the API server.
func seconds(t time.Time) metav1.Time { return metav1.NewTime(t.UTC().Truncate(time.Second)) }

// setCondition sets a condition with the object's generation. meta.SetStatusCondition keeps the
// lastTransitionTime of a condition whose status did not change, so an unchanged condition causes
// no status write.
func setCondition(conds *[]metav1.Condition, c metav1.Condition, generation int64, now time.Time) {
	c.ObservedGeneration = generation
	c.LastTransitionTime = seconds(now)
	meta.SetStatusCondition(conds, c)
}

// setOptional is setCondition for a condition that may be absent (no Type).
func setOptional(conds *[]metav1.Condition, c metav1.Condition, generation int64, now time.Time) {
	if c.Type != "" {
		setCondition(conds, c, generation, now)
	}
}

// readyCondition is the Ready condition of one object from the compile result: False with the
// first problem's reason when the object has problems; True when its compiled form is what the
// proxies are served; False (ConfigHeldBack) when other objects' problems keep its change from
// being published.
func readyCondition(kind, namespace, name string, res *SyncResult) metav1.Condition {
	if ps := problemsFor(routing.Blocking(res.Problems), kind, namespace, name); len(ps) > 0 {
		msgs := make([]string, len(ps))
		for i, p := range ps {
			msgs[i] = p.String()
		}
		served := "; it is left out of the proxy config until fixed (other objects publish as usual)"
		for _, h := range res.Held {
			if h.Kind == kind && h.Namespace == namespace && h.Name == name && h.Served == routing.ServedLastGood {
				served = "; the proxies keep serving its last good version (other objects publish as usual)"
			}
		}
		return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: ps[0].Reason,
			Message: strings.Join(msgs, "; ") + served}
	}
	if publishedAsCompiled(kind, namespace, name, res) {
		return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonCompiled,
			Message: "compiled into the proxy config"}
	}
	msg := "not in the proxy config yet"
	if res.HeldBack {
		msg = "not in the proxy config yet: publishing is held back by problems in " + strings.Join(problemObjects(routing.Blocking(res.Problems)), ", ")
	}
	return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonConfigHeldBack, Message: msg}
}

// publishedAsCompiled reports whether the object's compiled form (and key) is what is published.
func publishedAsCompiled(kind, namespace, name string, res *SyncResult) bool {
	k, ok := kindOf(kind)
	return ok && res.Published != nil && k.AsCompiled(res, namespace, name)
}

// effectiveDisabled reports whether the operator override is in force at now.
func effectiveDisabled(spec *v1alpha1.ProviderChannelSpec, now time.Time) bool {
	return spec.Disabled && (spec.DisabledUntil == nil || now.Before(spec.DisabledUntil.Time))
}

// disabledMessage describes the override: who, why and until when.
func disabledMessage(spec *v1alpha1.ProviderChannelSpec, by string) string {
	msg := "disabled"
	if by != "" {
		msg += " by " + by
	}
	if spec.DisabledReason != "" {
		msg += ": " + spec.DisabledReason
	}
	if spec.DisabledUntil != nil {
		msg += " (until " + spec.DisabledUntil.UTC().Format(time.RFC3339) + ")"
	}
	return msg
}

// channelInputs is everything a ProviderChannel's status is computed from.
type channelInputs struct {
	// Channel as read, with the status last written.
	Channel *v1alpha1.ProviderChannel
	Now     time.Time
	Ready   metav1.Condition
	// Accepted and Programmed are set when their Type is.
	Accepted, Programmed metav1.Condition
	Live                 liveView
	// ScoreStep: see Options.ScoreStep.
	ScoreStep int32
	// DisabledBy is the field manager that last set spec.disabled.
	DisabledBy string
	// Override is the operator override at Now (overrideAt).
	Override overrideState
}

// channelStatus computes a ProviderChannel's status. It is pure: the same inputs give the same
// status, and an input that did not change in a way worth reporting gives back the old status, so
// a stable system writes nothing.
func channelStatus(in channelInputs) v1alpha1.ProviderChannelStatus {
	pc := in.Channel
	old := &pc.Status
	st := v1alpha1.ProviderChannelStatus{ObservedGeneration: pc.Generation}
	for _, c := range old.Conditions {
		st.Conditions = append(st.Conditions, *c.DeepCopy())
	}
	disabled := effectiveDisabled(&pc.Spec, in.Now)
	st.Models = nextModels(in)

	// The channel shows its worst reported model, and its scores and shares. A model no replica
	// reports (one no RoutingPolicy routes on this channel, say) does not hide the others' health:
	// the channel is Unknown only when nothing reports at all.
	st.Phase = v1alpha1.PhaseUnknown
	for _, m := range st.Models {
		if m.Phase == v1alpha1.PhaseUnknown {
			continue
		}
		if st.Phase == v1alpha1.PhaseUnknown {
			st.Phase = m.Phase
		}
		st.Phase = worstPhase(st.Phase, m.Phase)
		if st.HealthScore == nil {
			score, traffic := m.HealthScore, m.TrafficPercent
			st.HealthScore, st.TrafficPercent = &score, &traffic
			continue
		}
		st.HealthScore = ptrMin(st.HealthScore, m.HealthScore)
		st.TrafficPercent = ptrMin(st.TrafficPercent, m.TrafficPercent)
	}
	if disabled {
		st.Phase = v1alpha1.PhaseDisabled
	}
	st.Disabled = disabled
	st.Replicas = replicasColumn(st.Phase, st.Models)

	setOptional(&st.Conditions, in.Accepted, pc.Generation, in.Now)
	setOptional(&st.Conditions, in.Programmed, pc.Generation, in.Now)
	setCondition(&st.Conditions, in.Ready, pc.Generation, in.Now)
	setCondition(&st.Conditions, channelAvailable(pc, disabled, in.DisabledBy, st.Models), pc.Generation, in.Now)
	if c, ok := overrideCondition(&pc.Spec, in.Override, in.DisabledBy); ok {
		setCondition(&st.Conditions, c, pc.Generation, in.Now)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, ConditionOverrideApplied)
	}
	if in.Live.Polled {
		setCondition(&st.Conditions, reportingCondition(in.Live.Replicas), pc.Generation, in.Now)
		if c, ok := fleetCondition(in.Live.Replicas); ok {
			setCondition(&st.Conditions, c, pc.Generation, in.Now)
		} else {
			meta.RemoveStatusCondition(&st.Conditions, ConditionFleetShared)
		}
	}
	return st
}

// fleetCondition is FleetShared from the reachable replicas' links to the fleet store; ok is
// false when none reports one (no --fleet-redis). The message names the replicas in local mode
// and no count, nor the store's error (it varies from poll to poll; /admin/v1/channels has it),
// so that it changes only when a replica leaves or rejoins the fleet.
func fleetCondition(replicas []replicaInfo) (metav1.Condition, bool) {
	var local []string
	linked := false
	for _, r := range replicas {
		if !r.Reachable {
			continue
		}
		switch {
		case r.Fleet == nil:
			local = append(local, r.Name+" (no fleet store)")
		case !r.Fleet.Connected:
			linked = true
			local = append(local, r.Name)
		default:
			linked = true
		}
	}
	if !linked {
		return metav1.Condition{}, false
	}
	c := metav1.Condition{Type: ConditionFleetShared, Status: metav1.ConditionTrue, Reason: ReasonFleetShared,
		Message: "every proxy replica shares evidence and verdicts through the fleet store"}
	if len(local) > 0 {
		slices.Sort(local)
		c.Status, c.Reason = metav1.ConditionFalse, ReasonLocalMode
		c.Message = "in local mode, judging on their own evidence (see fleet in their /admin/v1/channels): " + strings.Join(local, ", ")
	}
	return c, true
}

// nextModels are a channel's model statuses from the live view: a model whose figures did not
// move by enough to be written (significant) keeps its old status, so the result equals
// pc.Status.Models exactly when nothing is worth writing. The poller asks the same question to
// decide whether to queue the channel at all (liveNews).
func nextModels(in channelInputs) []v1alpha1.ModelStatus {
	pc := in.Channel
	disabled := effectiveDisabled(&pc.Spec, in.Now)
	prev := map[string]v1alpha1.ModelStatus{}
	for _, m := range pc.Status.Models {
		prev[m.Name] = m
	}
	fresh := in.Live.fresh()
	var out []v1alpha1.ModelStatus
	for _, m := range pc.Spec.Models {
		p, hadPrev := prev[m.Name]
		var next v1alpha1.ModelStatus
		agg, reported := in.Live.Models[modelKey{routing.ChannelID(pc.Namespace, pc.Name), m.Name}]
		switch {
		case !fresh && hadPrev:
			// No live data (not polled yet, or no replica reachable): keep what was last seen;
			// ProxiesReporting says it is not live.
			next = *p.DeepCopy()
		case fresh && reported:
			next = modelFromAggregate(m.Name, agg, p, hadPrev, in.Now)
		default:
			next = unknownModel(m.Name, p, hadPrev, in.Now)
		}
		if disabled {
			next = disabledModel(next, p, hadPrev, disabledMessage(&pc.Spec, in.DisabledBy), in.Now)
		}
		if hadPrev && !significant(p, next, in.ScoreStep) {
			next = *p.DeepCopy()
		}
		out = append(out, next)
	}
	return out
}

// replicasColumn is the REPLICAS column: "37/200", the replicas that see the channel's phase
// on its first model in that phase whose replicas disagree, of all that report it; empty while
// they agree, so that the replica count is in status only when it says something.
func replicasColumn(phase v1alpha1.Phase, models []v1alpha1.ModelStatus) string {
	for _, m := range models {
		if m.Phase != phase || len(m.Replicas) < 2 {
			continue
		}
		var all int32
		for _, n := range m.Replicas {
			all += n
		}
		return fmt.Sprintf("%d/%d", m.Replicas[string(phase)], all)
	}
	return ""
}

func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

func ptrMin(p *int32, v int32) *int32 {
	m := min(*p, v)
	return &m
}

// modelFromAggregate is a model's status from the replicas' reports.
func modelFromAggregate(name string, agg modelAggregate, prev v1alpha1.ModelStatus, hadPrev bool, now time.Time) v1alpha1.ModelStatus {
	m := v1alpha1.ModelStatus{
		Name:             name,
		Phase:            agg.Phase,
		HealthScore:      agg.HealthScore,
		TrafficPercent:   agg.TrafficPercent,
		WindowRequests:   agg.WindowRequests,
		ErrorRatePercent: agg.ErrorRatePercent,
		P95LatencyMillis: agg.P95LatencyMillis,
		Ejections:        agg.Ejections,
		Panic:            agg.Panic,
	}
	if len(agg.Replicas) > 1 {
		// Only while the replicas disagree: counts that agree would change with every pod of
		// a rolling update and rewrite every channel's status for nothing.
		m.Replicas = maps.Clone(agg.Replicas)
	}
	switch {
	case agg.LastTransition != nil && hadPrev && prev.Phase == m.Phase && prev.LastTransitionTime != nil &&
		!seconds(agg.LastTransition.Time).After(prev.LastTransitionTime.Time):
		// The same phase, and no newer transition: the replica that held the latest one may
		// have gone (a rolling update); what status said stays true.
		m.LastTransitionTime, m.Reason, m.Message = prev.LastTransitionTime.DeepCopy(), prev.Reason, prev.Message
	case agg.LastTransition != nil:
		t := seconds(agg.LastTransition.Time)
		m.LastTransitionTime, m.Reason, m.Message = &t, agg.LastTransition.Reason, agg.LastTransition.Message
	case hadPrev && prev.Phase == m.Phase:
		m.LastTransitionTime, m.Reason, m.Message = prev.LastTransitionTime.DeepCopy(), prev.Reason, prev.Message
	default:
		t := seconds(now)
		m.LastTransitionTime = &t
	}
	return m
}

// unknownModel is a model no replica reports on.
func unknownModel(name string, prev v1alpha1.ModelStatus, hadPrev bool, now time.Time) v1alpha1.ModelStatus {
	m := v1alpha1.ModelStatus{Name: name, Phase: v1alpha1.PhaseUnknown, Reason: ReasonNoReport,
		Message: "no proxy replica reports this model"}
	if hadPrev && prev.Phase == v1alpha1.PhaseUnknown && prev.LastTransitionTime != nil {
		m.LastTransitionTime = prev.LastTransitionTime.DeepCopy()
	} else {
		t := seconds(now)
		m.LastTransitionTime = &t
	}
	return m
}

// disabledModel applies the operator override at once, without waiting for the proxies to
// reload: phase Disabled, no traffic. The replicas' figures stay for reference.
func disabledModel(m v1alpha1.ModelStatus, prev v1alpha1.ModelStatus, hadPrev bool, msg string, now time.Time) v1alpha1.ModelStatus {
	m.Phase, m.TrafficPercent, m.Reason, m.Message = v1alpha1.PhaseDisabled, 0, ReasonDisabled, msg
	if hadPrev && prev.Phase == v1alpha1.PhaseDisabled && prev.LastTransitionTime != nil {
		m.LastTransitionTime = prev.LastTransitionTime.DeepCopy()
	} else {
		t := seconds(now)
		m.LastTransitionTime = &t
	}
	return m
}

// significant reports whether next differs from prev by enough to be written: any change of
// phase, traffic share, replica counts, panic or transition, or a move of the figures by a
// meaningful step. Small drifts of score, error rate, volume and latency are not news; writing
// them would rewrite status on every poll.
func significant(prev, next v1alpha1.ModelStatus, step int32) bool {
	// Ejections are written when they grow: the sum falls when a replica restarts (its count
	// starts again), which is no news.
	if prev.Phase != next.Phase || prev.TrafficPercent != next.TrafficPercent || prev.Panic != next.Panic ||
		next.Ejections > prev.Ejections || prev.Reason != next.Reason || prev.Message != next.Message ||
		!maps.Equal(prev.Replicas, next.Replicas) ||
		!equality.Semantic.DeepEqual(prev.LastTransitionTime, next.LastTransitionTime) {
		return true
	}
	return abs(prev.HealthScore-next.HealthScore) >= step ||
		abs(prev.ErrorRatePercent-next.ErrorRatePercent) >= step ||
		bigMove(prev.WindowRequests, next.WindowRequests, 10) ||
		bigMove(prev.P95LatencyMillis, next.P95LatencyMillis, 100)
}

// bigMove: a change of at least minAbs and at least half of the larger value.
func bigMove(a, b, minAbs int64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d >= minAbs && 2*d >= max(a, b)
}

func abs(v int32) int32 {
	if v < 0 {
		return -v
	}
	return v
}

// channelAvailable: at least one model routable on this channel.
func channelAvailable(pc *v1alpha1.ProviderChannel, disabled bool, by string, models []v1alpha1.ModelStatus) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionAvailable}
	if disabled {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonDisabled, disabledMessage(&pc.Spec, by)
		return c
	}
	var ok, notOK []string
	for _, m := range models {
		switch {
		case routable(m.Phase):
			ok = append(ok, m.Name)
		case m.Phase != v1alpha1.PhaseUnknown:
			notOK = append(notOK, fmt.Sprintf("%s is %s", m.Name, m.Phase))
		}
	}
	switch {
	case len(ok) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonRoutable, "routable for "+strings.Join(ok, ", ")
	case len(notOK) == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, ReasonNoReport, "no proxy replica reports this channel yet"
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonNotRoutable, "no model is routable: "+strings.Join(notOK, ", ")
	}
	return c
}

// reportingCondition marks the live status as current or not.
func reportingCondition(replicas []replicaInfo) metav1.Condition {
	c := metav1.Condition{Type: ConditionProxiesReporting}
	var down []string
	for _, r := range replicas {
		if !r.Reachable {
			down = append(down, fmt.Sprintf("%s (%s)", r.Name, r.Error))
		}
	}
	n := len(replicas)
	switch {
	case n == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonNoReplicas, "no proxy replica found to poll; status is not live"
	case len(down) == 0:
		// No count: the message would change with the replica set alone, on every channel.
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonAllReporting, "every proxy replica reports"
	case len(down) == n:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonNoneReachable,
			"no proxy replica reachable: "+strings.Join(down, "; ")+"; status shows the last data seen and is not live"
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonSomeUnreachable,
			fmt.Sprintf("%d of %d proxy replicas unreachable: %s; status is aggregated from the others", len(down), n, strings.Join(down, "; "))
	}
	return c
}

// policyInputs is everything a RoutingPolicy's status is computed from.
type policyInputs struct {
	Policy *v1alpha1.RoutingPolicy
	Now    time.Time
	Ready  metav1.Condition
	// Accepted, Programmed and ResolvedRefs are set when their Type is.
	Accepted, Programmed, ResolvedRefs metav1.Condition
	// Published is the table the proxies are served: the rows follow what is actually routed.
	Published *routing.Table
	// Channels are the ProviderChannels the policy routes (by name: they are in its namespace),
	// with their status; a row whose channel is missing shows Unknown.
	Channels map[string]*v1alpha1.ProviderChannel
	// Live is the replicas' view: a rollout's dry-run phases and cohorts come from it.
	Live liveView
}

// policyStatus computes a RoutingPolicy's status: one row per channel × model it routes, taken
// from the channels' own status (so `kubectl get` of both kinds agree), and its conditions.
func policyStatus(in policyInputs) v1alpha1.RoutingPolicyStatus {
	rp := in.Policy
	st := v1alpha1.RoutingPolicyStatus{ObservedGeneration: rp.Generation}
	for _, c := range rp.Status.Conditions {
		st.Conditions = append(st.Conditions, *c.DeepCopy())
	}
	lookup := tableLookup{table: in.Published}
	rows, published := policyRows(lookup, rp.Namespace, rp.Name)
	pol, _ := lookup.policy(rp.Namespace, rp.Name)
	dryRun := pol != nil && pol.Rollout != nil && pol.Rollout.DryRun
	for _, row := range rows {
		if pc := in.Channels[row.Channel]; pc != nil {
			for _, m := range pc.Status.Models {
				if m.Name == row.Model {
					row.Phase, row.HealthScore, row.TrafficPercent = m.Phase, m.HealthScore, m.TrafficPercent
				}
			}
		}
		st.Channels = append(st.Channels, row)
		if dryRun {
			// The policy's channels are in its namespace: the row names them as spec.channels does.
			dry := v1alpha1.PolicyDryRunStatus{Channel: row.Channel, Model: row.Model, Phase: v1alpha1.PhaseUnknown}
			if agg, ok := in.Live.Models[modelKey{routing.ChannelID(rp.Namespace, row.Channel), row.Model}]; ok && agg.DryRunPhase != "" {
				dry.Phase, dry.Reason = agg.DryRunPhase, agg.DryRunReason
			}
			st.DryRun = append(st.DryRun, dry)
		}
	}
	if pol != nil && pol.Rollout != nil && !pol.Rollout.DryRun {
		ro := in.Live.Rollouts[rp.Namespace+"/"+rp.Name]
		st.Rollout = &v1alpha1.RolloutStatus{Percent: int32(pol.Rollout.Percent), Policy: cohortStatus(ro.Policy), Listed: cohortStatus(ro.Listed)}
	}
	setOptional(&st.Conditions, in.Accepted, rp.Generation, in.Now)
	setOptional(&st.Conditions, in.Programmed, rp.Generation, in.Now)
	setOptional(&st.Conditions, in.ResolvedRefs, rp.Generation, in.Now)
	setCondition(&st.Conditions, in.Ready, rp.Generation, in.Now)
	available, degraded := policyHealth(published, pol != nil && pol.PanicRouting, rp.Spec.Models, st.Channels)
	setCondition(&st.Conditions, available, rp.Generation, in.Now)
	setCondition(&st.Conditions, degraded, rp.Generation, in.Now)
	return st
}

// policyRows are the rows of a policy's status, one per channel × model it routes in the published
// table, Phase Unknown (policyStatus fills in the channels' figures); published is false when the
// policy is not in the table.
func policyRows(published tableLookup, namespace, name string) (rows []v1alpha1.PolicyChannelStatus, ok bool) {
	pol, ok := published.policy(namespace, name)
	if !ok {
		return nil, false
	}
	for _, cand := range pol.Channels {
		ch, found := published.channel(cand.Channel)
		if !found {
			continue
		}
		for _, model := range pol.Models {
			if _, serves := ch.Upstream(model); !serves {
				continue
			}
			// The policy's channels are in its namespace, so the row names them as spec.channels does.
			rows = append(rows, v1alpha1.PolicyChannelStatus{Channel: ch.Name, Model: model, Phase: v1alpha1.PhaseUnknown})
		}
	}
	return rows, true
}

// policyHealth is a policy's Available (every model has a routable channel, or panic routing
// serves those without one) and Degraded (some channel is not Healthy) conditions. panicRouting
// is the published policy's effective panicRouting.
func policyHealth(published, panicRouting bool, models []string, rows []v1alpha1.PolicyChannelStatus) (available, degraded metav1.Condition) {
	available = metav1.Condition{Type: v1alpha1.ConditionAvailable}
	degraded = metav1.Condition{Type: v1alpha1.ConditionDegraded}
	if !published {
		msg := "the policy is not in the proxy config (see Ready)"
		available.Status, available.Reason, available.Message = metav1.ConditionUnknown, ReasonNotPublished, msg
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionUnknown, ReasonNotPublished, msg
		return
	}
	if !slices.ContainsFunc(rows, func(r v1alpha1.PolicyChannelStatus) bool { return r.Phase != v1alpha1.PhaseUnknown }) {
		msg := "no proxy replica reports this policy's channels yet"
		available.Status, available.Reason, available.Message = metav1.ConditionUnknown, ReasonNoReport, msg
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionUnknown, ReasonNoReport, msg
		return
	}
	var unroutable, panicking, unhealthy []string
	for _, m := range models {
		if slices.ContainsFunc(rows, func(r v1alpha1.PolicyChannelStatus) bool { return r.Model == m && routable(r.Phase) }) {
			continue
		}
		// Panic routing (health.Engine.Select) names the least-bad channel unless every one is
		// Disabled by an operator.
		if panicRouting && slices.ContainsFunc(rows, func(r v1alpha1.PolicyChannelStatus) bool {
			return r.Model == m && r.Phase != v1alpha1.PhaseDisabled && r.Phase != v1alpha1.PhaseUnknown
		}) {
			panicking = append(panicking, m)
			continue
		}
		unroutable = append(unroutable, m)
	}
	for _, r := range rows {
		if r.Phase != v1alpha1.PhaseHealthy {
			unhealthy = append(unhealthy, fmt.Sprintf("%s/%s is %s", r.Channel, r.Model, r.Phase))
		}
	}
	switch {
	case len(unroutable) == 0 && len(panicking) == 0:
		available.Status, available.Reason, available.Message = metav1.ConditionTrue, ReasonAllModelsRoutable, "every model has a routable channel"
	case len(unroutable) == 0:
		available.Status, available.Reason, available.Message = metav1.ConditionTrue, ReasonPanicRouting,
			"no routable channel for "+strings.Join(panicking, ", ")+": panic routing serves it on the least-bad channel (spec.panicRouting)"
	default:
		available.Status, available.Reason, available.Message = metav1.ConditionFalse, ReasonModelNotRoutable,
			"no routable channel for "+strings.Join(unroutable, ", ")
		if len(panicking) > 0 {
			available.Message += "; panic routing serves " + strings.Join(panicking, ", ") + " on the least-bad channel"
		}
	}
	if len(unhealthy) == 0 {
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionFalse, ReasonChannelsHealthy, "every channel is Healthy"
	} else {
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, ReasonChannelsUnhealthy, strings.Join(unhealthy, ", ")
	}
	return
}

// objectConditions are the three conditions of the contract's second wave for one object, and
// ResolvedRefs for a RoutingPolicy.
type objectConditions struct {
	Accepted, Programmed, Ready metav1.Condition
	// ResolvedRefs (RoutingPolicy only): whether every fallback and context-overflow model can
	// be followed. False does not hold the policy back (the proxy skips the hop), but makes
	// Ready False, so a GitOps health check shows the dead hop.
	ResolvedRefs metav1.Condition
}

// ConditionResolvedRefs is added to the contract's conditions on RoutingPolicies, as Gateway
// API routes have it for a backend in another namespace that does not consent.
const ConditionResolvedRefs = "ResolvedRefs"

// conditionsFor computes Accepted, Programmed and Ready. compiled is readyCondition's verdict
// (problems, or whether the compiled form is what is published); monitored says whether the
// controller polls any proxy at all. Without proxies to poll, Programmed is Unknown and Ready
// follows compiled, as it did before Programmed existed.
//
// Before the first poll (a controller just started, or a new leader) Programmed keeps what the
// object's status says for this generation (old): the proxies did not stop serving it because
// the controller restarted, and Ready must not flap.
func conditionsFor(kind, namespace, name string, generation int64, compiled metav1.Condition, res *SyncResult, live liveView, monitored bool, old []metav1.Condition) objectConditions {
	var out objectConditions
	out.Accepted = metav1.Condition{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: ReasonAccepted,
		Message: "valid; compiles on its own"}
	accepted := len(problemsFor(routing.Blocking(kindProblems(kind, res)), kind, namespace, name)) == 0
	if !accepted {
		out.Accepted.Status, out.Accepted.Reason, out.Accepted.Message = metav1.ConditionFalse, compiled.Reason, compiled.Message
	}
	out.Programmed = programmedCondition(routing.ObjectKey(kind, namespace, name), generation, accepted, res, live, monitored,
		publishedAsCompiled(kind, namespace, name, res))
	if prev := meta.FindStatusCondition(old, v1alpha1.ConditionProgrammed); monitored && !live.Polled && prev != nil && prev.ObservedGeneration == generation {
		out.Programmed = metav1.Condition{Type: prev.Type, Status: prev.Status, Reason: prev.Reason, Message: prev.Message}
	}
	out.Ready = compiled
	switch {
	case compiled.Status != metav1.ConditionTrue:
		// A problem, or not published yet: say that, whatever the proxies serve.
	case out.Programmed.Status == metav1.ConditionTrue:
		out.Ready.Reason, out.Ready.Message = ReasonReady, "accepted and served by every proxy replica that reports"
	case out.Programmed.Reason == ReasonNotMonitored:
		out.Ready.Message = "compiled into the proxy config (the controller polls no proxy, so whether they serve it is not checked)"
	default:
		out.Ready = metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: out.Programmed.Reason, Message: out.Programmed.Message}
	}
	if kind == "RoutingPolicy" {
		out.ResolvedRefs = metav1.Condition{Type: ConditionResolvedRefs, Status: metav1.ConditionTrue, Reason: "ResolvedRefs",
			Message: "every fallback and context-overflow model can be followed"}
		var msgs []string
		for _, p := range problemsFor(res.Problems, kind, namespace, name) {
			if p.HoldsBack() {
				continue
			}
			if len(msgs) == 0 {
				out.ResolvedRefs.Reason = p.Reason
			}
			msgs = append(msgs, p.Message)
		}
		if len(msgs) > 0 {
			out.ResolvedRefs.Status = metav1.ConditionFalse
			out.ResolvedRefs.Message = strings.Join(msgs, "; ") + "; the proxies serve the policy and skip the hop"
			if out.Ready.Status == metav1.ConditionTrue {
				out.Ready = metav1.Condition{Status: metav1.ConditionFalse, Reason: out.ResolvedRefs.Reason, Message: out.ResolvedRefs.Message}
			}
		}
	}
	out.Accepted.Type, out.Programmed.Type, out.Ready.Type = v1alpha1.ConditionAccepted, v1alpha1.ConditionProgrammed, v1alpha1.ConditionReady
	return out
}

// programmedCondition compares the generation each reporting replica serves with the object's.
func programmedCondition(key string, generation int64, accepted bool, res *SyncResult, live liveView, monitored, asCompiled bool) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionProgrammed, Status: metav1.ConditionFalse}
	if !monitored {
		c.Status, c.Reason = metav1.ConditionUnknown, ReasonNotMonitored
		c.Message = "the controller polls no proxy (--proxy-service and --proxy-admin-url are empty)"
		return c
	}
	if !live.Polled {
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, ReasonPending, "waiting for the first poll of the proxy replicas"
		return c
	}
	publishedHash := res.publishedHash()
	var serving, pending, stale []string
	var staleGen int64
	for _, r := range live.Replicas {
		if !r.Reachable || r.Hash == "" {
			continue
		}
		g, ok := r.Generations[key]
		if r.Generations == nil && r.Hash == publishedHash && asCompiled {
			// A proxy that predates generations, serving exactly what is published.
			g, ok = generation, true
		}
		switch {
		case !ok:
			pending = append(pending, r.Name)
		case g < generation:
			stale, staleGen = append(stale, r.Name), max(staleGen, g)
		default:
			serving = append(serving, r.Name)
		}
	}
	switch {
	case len(serving)+len(pending)+len(stale) == 0:
		c.Reason = ReasonNoProxies
		c.Message = "no proxy replica reports a config"
		if live.DiscoveryError != "" {
			c.Message += ": " + live.DiscoveryError
		}
	case len(stale) > 0:
		c.Reason = ReasonStale
		c.Message = fmt.Sprintf("generation %d is not served: %s serve(s) generation %d", generation, strings.Join(stale, ", "), staleGen)
		if !accepted {
			c.Message += ", its last good version, until the problem in Accepted is fixed"
		}
	case len(pending) > 0:
		c.Reason = ReasonPending
		c.Message = fmt.Sprintf("generation %d is not served yet by %s", generation, strings.Join(pending, ", "))
		if !accepted {
			c.Message += ": it is left out of the proxy config until the problem in Accepted is fixed"
		}
	default:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonProgrammed
		c.Message = fmt.Sprintf("generation %d is served by every proxy replica that reports", generation)
	}
	return c
}
