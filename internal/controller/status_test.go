package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/routing"
)

func channel(models ...string) *v1alpha1.ProviderChannel {
	pc := &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "openai-direct", Generation: 3}}
	for _, m := range models {
		pc.Spec.Models = append(pc.Spec.Models, v1alpha1.ChannelModel{Name: m})
	}
	return pc
}

var readyTrue = metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonCompiled, Message: "compiled into the proxy config"}

func allReporting(n int) []replicaInfo {
	out := make([]replicaInfo, n)
	for i := range out {
		out[i] = replicaInfo{Name: string(rune('a' + i)), Reachable: true}
	}
	return out
}

func liveOf(models map[modelKey]modelAggregate) liveView {
	return liveView{Polled: true, Replicas: allReporting(3), Models: models}
}

func healthyAgg(score int32, requests int64) modelAggregate {
	return modelAggregate{Phase: v1alpha1.PhaseHealthy, Replicas: map[string]int32{"Healthy": 3}, HealthScore: score,
		TrafficPercent: 100, WindowRequests: requests, P95LatencyMillis: 1800}
}

// TestChannelStatusContract: aggregates become the contract's fields; the channel shows its worst model.
func TestChannelStatusContract(t *testing.T) {
	pc := channel("gpt-4o", "gpt-4o-mini")
	tr := testStart.Add(-time.Minute)
	ejected := modelAggregate{Phase: v1alpha1.PhaseEjected, Replicas: map[string]int32{"Ejected": 2, "Healthy": 1}, HealthScore: 12,
		TrafficPercent: 0, WindowRequests: 240, WindowFailures: 52, ErrorRatePercent: 22, P95LatencyMillis: 2900, Ejections: 2}
	ejected.LastTransition = &adminapi.Transition{Time: tr, Reason: "ErrorRateExceeded", Message: "error rate 21.7% (52/240) >= 18% over 120s"}
	st := channelStatus(channelInputs{Channel: pc, Now: testStart, Ready: readyTrue, ScoreStep: 5, Live: liveOf(map[modelKey]modelAggregate{
		{"llm/openai-direct", "gpt-4o"}:      ejected,
		{"llm/openai-direct", "gpt-4o-mini"}: healthyAgg(97, 100),
	})})
	ltt := metav1.NewTime(tr)
	now := metav1.NewTime(testStart)
	want := v1alpha1.ProviderChannelStatus{
		ObservedGeneration: 3,
		Phase:              v1alpha1.PhaseEjected,
		HealthScore:        ptr32(12),
		TrafficPercent:     ptr32(0),
		Replicas:           "2/3",
		Models: []v1alpha1.ModelStatus{
			{Name: "gpt-4o", Phase: v1alpha1.PhaseEjected, HealthScore: 12, TrafficPercent: 0, WindowRequests: 240, ErrorRatePercent: 22,
				P95LatencyMillis: 2900, Ejections: 2, Replicas: map[string]int32{"Ejected": 2, "Healthy": 1},
				LastTransitionTime: &ltt, Reason: "ErrorRateExceeded", Message: "error rate 21.7% (52/240) >= 18% over 120s"},
			{Name: "gpt-4o-mini", Phase: v1alpha1.PhaseHealthy, HealthScore: 97, TrafficPercent: 100, WindowRequests: 100,
				P95LatencyMillis: 1800, LastTransitionTime: &now},
		},
	}
	conds := st.Conditions
	st.Conditions = nil
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	for typ, want := range map[string]metav1.ConditionStatus{
		v1alpha1.ConditionReady: metav1.ConditionTrue, v1alpha1.ConditionAvailable: metav1.ConditionTrue, ConditionProxiesReporting: metav1.ConditionTrue,
	} {
		c := meta.FindStatusCondition(conds, typ)
		if c == nil || c.Status != want || c.ObservedGeneration != 3 {
			t.Errorf("condition %s = %+v, want status %s with observedGeneration 3", typ, c, want)
		}
	}
}

func ptr32(v int32) *int32 { return &v }

// TestChannelStatusNoChurn: feeding a computed status back with drifting figures gives the same
// status (no write), while a phase change or a real move is written.
func TestChannelStatusNoChurn(t *testing.T) {
	pc := channel("gpt-4o")
	in := func(agg modelAggregate, now time.Time) channelInputs {
		return channelInputs{Channel: pc, Now: now, Ready: readyTrue, ScoreStep: 5,
			Live: liveOf(map[modelKey]modelAggregate{{"llm/openai-direct", "gpt-4o"}: agg})}
	}
	pc.Status = channelStatus(in(healthyAgg(97, 240), testStart))
	first := *pc.Status.DeepCopy()

	for i, agg := range []modelAggregate{healthyAgg(95, 250), healthyAgg(99, 230), healthyAgg(93, 200)} {
		got := channelStatus(in(agg, testStart.Add(time.Duration(i+1)*time.Minute)))
		if !equality.Semantic.DeepEqual(first, got) {
			t.Errorf("drift %d rewrote status:\n%s", i, cmp.Diff(first, got))
		}
	}
	if got := channelStatus(in(healthyAgg(90, 240), testStart)); got.Models[0].HealthScore != 90 {
		t.Errorf("a move of a full step was not written: %d", got.Models[0].HealthScore)
	}
	if got := channelStatus(in(healthyAgg(97, 40), testStart)); got.Models[0].WindowRequests != 40 {
		t.Errorf("traffic dropping to a sixth was not written: %d", got.Models[0].WindowRequests)
	}
	degraded := healthyAgg(96, 240)
	degraded.Phase, degraded.Replicas = v1alpha1.PhaseDegraded, map[string]int32{"Degraded": 2, "Healthy": 1}
	got := channelStatus(in(degraded, testStart.Add(time.Hour)))
	if got.Phase != v1alpha1.PhaseDegraded || got.Models[0].LastTransitionTime.Time != testStart.Add(time.Hour) {
		t.Errorf("phase change: %+v", got.Models[0])
	}
	// Conditions keep their lastTransitionTime while their status holds.
	if a, b := meta.FindStatusCondition(first.Conditions, v1alpha1.ConditionAvailable), meta.FindStatusCondition(got.Conditions, v1alpha1.ConditionAvailable); !a.LastTransitionTime.Equal(&b.LastTransitionTime) {
		t.Errorf("Available lastTransitionTime moved: %v -> %v", a.LastTransitionTime, b.LastTransitionTime)
	}
}

func TestSignificant(t *testing.T) {
	base := v1alpha1.ModelStatus{Name: "m", Phase: v1alpha1.PhaseHealthy, HealthScore: 90, TrafficPercent: 100, WindowRequests: 200,
		ErrorRatePercent: 3, P95LatencyMillis: 1000, Replicas: map[string]int32{"Healthy": 3}}
	cases := []struct {
		name   string
		change func(*v1alpha1.ModelStatus)
		want   bool
	}{
		{"same", func(*v1alpha1.ModelStatus) {}, false},
		{"score -4", func(m *v1alpha1.ModelStatus) { m.HealthScore = 86 }, false},
		{"score -5", func(m *v1alpha1.ModelStatus) { m.HealthScore = 85 }, true},
		{"error rate +4", func(m *v1alpha1.ModelStatus) { m.ErrorRatePercent = 7 }, false},
		{"error rate +5", func(m *v1alpha1.ModelStatus) { m.ErrorRatePercent = 8 }, true},
		{"requests +40%", func(m *v1alpha1.ModelStatus) { m.WindowRequests = 280 }, false},
		{"requests doubled", func(m *v1alpha1.ModelStatus) { m.WindowRequests = 400 }, true},
		{"requests to 0", func(m *v1alpha1.ModelStatus) { m.WindowRequests = 0 }, true},
		{"p95 +30%", func(m *v1alpha1.ModelStatus) { m.P95LatencyMillis = 1300 }, false},
		{"p95 tripled", func(m *v1alpha1.ModelStatus) { m.P95LatencyMillis = 3000 }, true},
		{"phase", func(m *v1alpha1.ModelStatus) { m.Phase = v1alpha1.PhaseDegraded }, true},
		{"traffic share", func(m *v1alpha1.ModelStatus) { m.TrafficPercent = 50 }, true},
		{"replica counts", func(m *v1alpha1.ModelStatus) { m.Replicas = map[string]int32{"Healthy": 2} }, true},
		{"panic", func(m *v1alpha1.ModelStatus) { m.Panic = true }, true},
		{"ejections", func(m *v1alpha1.ModelStatus) { m.Ejections = 1 }, true},
	}
	for _, tc := range cases {
		next := *base.DeepCopy()
		tc.change(&next)
		if got := significant(base, next, 5); got != tc.want {
			t.Errorf("%s: significant = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestChannelStatusLiveness: without live data the last status stays and is marked; a model no
// replica reports is Unknown.
func TestChannelStatusLiveness(t *testing.T) {
	pc := channel("gpt-4o")
	live := liveOf(map[modelKey]modelAggregate{{"llm/openai-direct", "gpt-4o"}: healthyAgg(97, 240)})
	pc.Status = channelStatus(channelInputs{Channel: pc, Now: testStart, Ready: readyTrue, ScoreStep: 5, Live: live})

	// Not polled yet (a restarted controller): nothing changes.
	got := channelStatus(channelInputs{Channel: pc, Now: testStart.Add(time.Hour), Ready: readyTrue, ScoreStep: 5})
	if !equality.Semantic.DeepEqual(pc.Status, got) {
		t.Errorf("status changed before the first poll:\n%s", cmp.Diff(pc.Status, got))
	}
	// Nobody reachable: models stay, ProxiesReporting says so.
	down := liveView{Polled: true, Replicas: []replicaInfo{{Name: "a", Error: "connection refused"}}}
	got = channelStatus(channelInputs{Channel: pc, Now: testStart.Add(time.Hour), Ready: readyTrue, ScoreStep: 5, Live: down})
	if !equality.Semantic.DeepEqual(pc.Status.Models, got.Models) || got.Phase != v1alpha1.PhaseHealthy {
		t.Errorf("models changed while no replica was reachable:\n%s", cmp.Diff(pc.Status.Models, got.Models))
	}
	if c := meta.FindStatusCondition(got.Conditions, ConditionProxiesReporting); c.Status != metav1.ConditionFalse || c.Reason != ReasonNoneReachable ||
		!strings.Contains(c.Message, "a (connection refused)") {
		t.Errorf("ProxiesReporting = %+v", c)
	}
	// A new model nobody reports yet (or one no policy routes here) is Unknown on its own row,
	// without hiding the channel's reported health.
	pc2 := channel("gpt-4o", "o3")
	pc2.Status = pc.Status
	got = channelStatus(channelInputs{Channel: pc2, Now: testStart, Ready: readyTrue, ScoreStep: 5, Live: live})
	if got.Models[1].Phase != v1alpha1.PhaseUnknown || got.Phase != v1alpha1.PhaseHealthy || *got.HealthScore != 97 {
		t.Errorf("unknown model: phase %s, channel %s, score %v", got.Models[1].Phase, got.Phase, *got.HealthScore)
	}
}

// TestChannelStatusDisabled: the override shows at once, says who and why, and ends at disabledUntil.
func TestChannelStatusDisabled(t *testing.T) {
	pc := channel("gpt-4o")
	live := liveOf(map[modelKey]modelAggregate{{"llm/openai-direct", "gpt-4o"}: healthyAgg(97, 240)})
	pc.Status = channelStatus(channelInputs{Channel: pc, Now: testStart, Ready: readyTrue, ScoreStep: 5, Live: live})

	until := metav1.NewTime(testStart.Add(30 * time.Minute))
	pc.Spec.Disabled, pc.Spec.DisabledReason, pc.Spec.DisabledUntil = true, "INC-1234 provider incident", &until
	at := testStart.Add(time.Minute)
	got := channelStatus(channelInputs{Channel: pc, Now: at, Ready: readyTrue, ScoreStep: 5, Live: live, DisabledBy: "kubectl-patch"})
	m := got.Models[0]
	wantMsg := "disabled by kubectl-patch: INC-1234 provider incident (until 2026-11-30T10:30:00Z)"
	if got.Phase != v1alpha1.PhaseDisabled || m.Phase != v1alpha1.PhaseDisabled || m.TrafficPercent != 0 || *got.TrafficPercent != 0 ||
		m.Reason != ReasonDisabled || m.Message != wantMsg || !m.LastTransitionTime.Time.Equal(at) {
		t.Errorf("disabled model: %+v", m)
	}
	if c := meta.FindStatusCondition(got.Conditions, v1alpha1.ConditionAvailable); c.Status != metav1.ConditionFalse || c.Reason != ReasonDisabled || c.Message != wantMsg {
		t.Errorf("Available = %+v", c)
	}
	if d := untilOverrideEnds(&pc.Spec, at); d != 29*time.Minute+100*time.Millisecond {
		t.Errorf("requeue after %s", d)
	}
	pc.Status = got
	// While disabled, the replicas' drifting figures write nothing.
	if again := channelStatus(channelInputs{Channel: pc, Now: at.Add(time.Minute), Ready: readyTrue, ScoreStep: 5, DisabledBy: "kubectl-patch",
		Live: liveOf(map[modelKey]modelAggregate{{"llm/openai-direct", "gpt-4o"}: healthyAgg(95, 250)})}); !equality.Semantic.DeepEqual(got, again) {
		t.Errorf("disabled status churned:\n%s", cmp.Diff(got, again))
	}
	// At disabledUntil the replicas' view is back.
	after := testStart.Add(31 * time.Minute)
	got = channelStatus(channelInputs{Channel: pc, Now: after, Ready: readyTrue, ScoreStep: 5, Live: live, DisabledBy: "kubectl-patch"})
	if got.Phase != v1alpha1.PhaseHealthy || untilOverrideEnds(&pc.Spec, after) != 0 {
		t.Errorf("after disabledUntil: phase %s", got.Phase)
	}
}

func TestReadyCondition(t *testing.T) {
	mk := func(name string) routing.Channel {
		return routing.Channel{Name: name, Namespace: "llm", Provider: "openai", Weight: 100}
	}
	published := &routing.Table{Channels: []routing.Channel{mk("a"), mk("b")}, Credentials: map[string]routing.Secret{"llm/a": routing.NewSecret("k")}}
	changed := &routing.Table{Channels: []routing.Channel{mk("a"), mk("b")}, Credentials: map[string]routing.Secret{"llm/a": routing.NewSecret("rotated")}}
	changed.Channels[1].Weight = 50
	problem := routing.Problem{Kind: "RoutingPolicy", Namespace: "llm", Name: "chat", Reason: routing.ReasonChannelNotFound,
		Message: "spec.channels: ProviderChannel llm/ghost not found"}
	cases := []struct {
		name       string
		obj        string
		res        SyncResult
		wantStatus metav1.ConditionStatus
		wantReason string
		wantIn     string
	}{
		{"published", "a", SyncResult{Compiled: published, Published: published}, metav1.ConditionTrue, ReasonCompiled, "compiled"},
		{"own problem", "chat", SyncResult{Compiled: changed, Published: published, Problems: []routing.Problem{problem}, HeldBack: true},
			metav1.ConditionFalse, routing.ReasonChannelNotFound, "RoutingPolicy llm/chat: spec.channels: ProviderChannel llm/ghost not found"},
		{"unchanged while held back", "a", SyncResult{Compiled: published, Published: published, Problems: []routing.Problem{problem}, HeldBack: true},
			metav1.ConditionTrue, ReasonCompiled, "compiled"},
		{"key rotated while held back", "a", SyncResult{Compiled: changed, Published: published, Problems: []routing.Problem{problem}, HeldBack: true},
			metav1.ConditionFalse, ReasonConfigHeldBack, "RoutingPolicy llm/chat (ChannelNotFound)"},
		{"changed while held back", "b", SyncResult{Compiled: changed, Published: published, Problems: []routing.Problem{problem}, HeldBack: true},
			metav1.ConditionFalse, ReasonConfigHeldBack, "held back"},
	}
	for _, tc := range cases {
		kind := "ProviderChannel"
		if tc.obj == "chat" {
			kind = "RoutingPolicy"
		}
		c := readyCondition(kind, "llm", tc.obj, &tc.res)
		if c.Status != tc.wantStatus || c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.wantIn) {
			t.Errorf("%s: %+v", tc.name, c)
		}
	}
}

func TestReportingCondition(t *testing.T) {
	cases := []struct {
		replicas []replicaInfo
		reason   string
		msg      string
	}{
		{nil, ReasonNoReplicas, "no proxy replica found"},
		{allReporting(2), ReasonAllReporting, "every proxy replica reports"},
		{[]replicaInfo{{Name: "a", Reachable: true}, {Name: "b", Error: "timeout"}}, ReasonSomeUnreachable, "1 of 2 proxy replicas unreachable: b (timeout)"},
		{[]replicaInfo{{Name: "b", Error: "timeout"}}, ReasonNoneReachable, "not live"},
	}
	for _, tc := range cases {
		c := reportingCondition(tc.replicas)
		if c.Reason != tc.reason || !strings.Contains(c.Message, tc.msg) {
			t.Errorf("%v: %+v", tc.replicas, c)
		}
	}
}

func TestPolicyStatus(t *testing.T) {
	tbl := &routing.Table{
		Channels: []routing.Channel{
			{Name: "a", Namespace: "llm", Models: []routing.ChannelModel{{Name: "gpt-4o"}, {Name: "mini"}}},
			{Name: "b", Namespace: "llm", Models: []routing.ChannelModel{{Name: "gpt-4o"}}},
		},
		Policies: []routing.Policy{{Name: "chat", Namespace: "llm", Models: []string{"gpt-4o", "mini"},
			Channels: []routing.PolicyChannel{{Channel: "llm/a"}, {Channel: "llm/b"}}}},
	}
	withModels := func(name string, ms ...v1alpha1.ModelStatus) *v1alpha1.ProviderChannel {
		pc := &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Name: name}}
		pc.Status.Models = ms
		return pc
	}
	rp := &v1alpha1.RoutingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "chat", Generation: 2}}
	rp.Spec.Models = []string{"gpt-4o", "mini"}
	st := policyStatus(policyInputs{Policy: rp, Now: testStart, Ready: readyTrue, Published: tbl, Channels: map[string]*v1alpha1.ProviderChannel{
		"a": withModels("a", v1alpha1.ModelStatus{Name: "gpt-4o", Phase: v1alpha1.PhaseHealthy, HealthScore: 97, TrafficPercent: 100},
			v1alpha1.ModelStatus{Name: "mini", Phase: v1alpha1.PhaseEjected, HealthScore: 10}),
		"b": withModels("b", v1alpha1.ModelStatus{Name: "gpt-4o", Phase: v1alpha1.PhaseRampingUp, HealthScore: 80, TrafficPercent: 15}),
	}})
	want := []v1alpha1.PolicyChannelStatus{
		{Channel: "a", Model: "gpt-4o", Phase: v1alpha1.PhaseHealthy, HealthScore: 97, TrafficPercent: 100},
		{Channel: "a", Model: "mini", Phase: v1alpha1.PhaseEjected, HealthScore: 10},
		{Channel: "b", Model: "gpt-4o", Phase: v1alpha1.PhaseRampingUp, HealthScore: 80, TrafficPercent: 15},
	}
	if diff := cmp.Diff(want, st.Channels); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	if st.ObservedGeneration != 2 {
		t.Errorf("observedGeneration %d", st.ObservedGeneration)
	}
	av := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAvailable)
	dg := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
	if av.Status != metav1.ConditionFalse || av.Message != "no routable channel for mini" {
		t.Errorf("Available = %+v", av)
	}
	if dg.Status != metav1.ConditionTrue || dg.Message != "a/mini is Ejected, b/gpt-4o is RampingUp" {
		t.Errorf("Degraded = %+v", dg)
	}
	// With panicRouting, the ejected channel answers mini: Available, and it says panic.
	tbl.Policies[0].PanicRouting = true
	channels := map[string]*v1alpha1.ProviderChannel{
		"a": withModels("a", v1alpha1.ModelStatus{Name: "gpt-4o", Phase: v1alpha1.PhaseHealthy}, v1alpha1.ModelStatus{Name: "mini", Phase: v1alpha1.PhaseEjected}),
		"b": withModels("b", v1alpha1.ModelStatus{Name: "gpt-4o", Phase: v1alpha1.PhaseHealthy}),
	}
	st = policyStatus(policyInputs{Policy: rp, Now: testStart, Ready: readyTrue, Published: tbl, Channels: channels})
	if av := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAvailable); av.Status != metav1.ConditionTrue || av.Reason != ReasonPanicRouting ||
		!strings.HasPrefix(av.Message, "no routable channel for mini: panic routing serves it") {
		t.Errorf("panic routing: Available = %+v", av)
	}
	// An operator's Disabled leaves panic routing nothing to pick: not available.
	channels["a"].Status.Models[1].Phase = v1alpha1.PhaseDisabled
	st = policyStatus(policyInputs{Policy: rp, Now: testStart, Ready: readyTrue, Published: tbl, Channels: channels})
	if av := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAvailable); av.Status != metav1.ConditionFalse || av.Reason != ReasonModelNotRoutable {
		t.Errorf("every channel of mini disabled: Available = %+v", av)
	}
	tbl.Policies[0].PanicRouting = false
	// Not published: no rows, Unknown.
	st = policyStatus(policyInputs{Policy: rp, Now: testStart, Ready: readyTrue, Published: &routing.Table{}})
	if len(st.Channels) != 0 || meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAvailable).Status != metav1.ConditionUnknown {
		t.Errorf("unpublished policy: %+v", st)
	}
}

// TestProgrammed: Programmed compares the generation each reporting replica serves with the
// object's; Ready is Accepted and Programmed.
func TestProgrammed(t *testing.T) {
	tbl := &routing.Table{Channels: []routing.Channel{{Name: "a", Namespace: "llm", Generation: 4}}}
	key := routing.ObjectKey("ProviderChannel", "llm", "a")
	ok := SyncResult{Compiled: tbl, Published: tbl}
	broken := SyncResult{Compiled: &routing.Table{}, Published: tbl, Held: []routing.Held{{Kind: "ProviderChannel", Namespace: "llm", Name: "a", Served: routing.ServedLastGood}},
		Problems: []routing.Problem{{Kind: "ProviderChannel", Namespace: "llm", Name: "a", Reason: routing.ReasonSecretNotFound, Message: "spec.credentialsRef: Secret llm/k not found"}}}
	replica := func(name string, gen int64) replicaInfo {
		r := replicaInfo{Name: name, Reachable: true, Hash: "h-" + name, Generations: map[string]int64{}}
		if gen > 0 {
			r.Generations[key] = gen
		}
		return r
	}
	view := func(rs ...replicaInfo) liveView { return liveView{Polled: true, Replicas: rs} }
	cases := []struct {
		name                       string
		gen                        int64
		res                        SyncResult
		live                       liveView
		monitored                  bool
		accepted, programmed, rdy  metav1.ConditionStatus
		programmedReason, readyHas string
	}{
		{"every replica serves it", 4, ok, view(replica("p0", 4), replica("p1", 4)), true,
			metav1.ConditionTrue, metav1.ConditionTrue, metav1.ConditionTrue, ReasonProgrammed, "served by every proxy replica"},
		{"one replica lags", 4, ok, view(replica("p0", 4), replica("p1", 3)), true,
			metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse, ReasonStale, "p1 serve(s) generation 3"},
		{"a replica has not loaded it", 4, ok, view(replica("p0", 4), replica("p1", 0)), true,
			metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse, ReasonPending, "not served yet by p1"},
		{"unreachable replicas do not count", 4, ok, view(replica("p0", 4), replicaInfo{Name: "p1", Error: "refused"}), true,
			metav1.ConditionTrue, metav1.ConditionTrue, metav1.ConditionTrue, ReasonProgrammed, "every proxy replica"},
		{"no replica reports", 4, ok, view(replicaInfo{Name: "p1", Error: "refused"}), true,
			metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse, ReasonNoProxies, "no proxy replica reports"},
		{"before the first poll", 4, ok, liveView{}, true,
			metav1.ConditionTrue, metav1.ConditionUnknown, metav1.ConditionFalse, ReasonPending, "first poll"},
		{"no proxy is polled", 4, ok, liveView{}, false,
			metav1.ConditionTrue, metav1.ConditionUnknown, metav1.ConditionTrue, ReasonNotMonitored, "not checked"},
		{"held at its last good generation", 5, broken, view(replica("p0", 4)), true,
			metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionFalse, ReasonStale, "Secret llm/k not found"},
		{"a proxy that predates generations, serving what is published", 4, ok,
			view(replicaInfo{Name: "old", Reachable: true, Hash: tbl.Hash()}), true,
			metav1.ConditionTrue, metav1.ConditionTrue, metav1.ConditionTrue, ReasonProgrammed, "every proxy replica"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			compiled := readyCondition("ProviderChannel", "llm", "a", &tc.res)
			got := conditionsFor("ProviderChannel", "llm", "a", tc.gen, compiled, &tc.res, tc.live, tc.monitored, nil)
			if got.Accepted.Type != v1alpha1.ConditionAccepted || got.Programmed.Type != v1alpha1.ConditionProgrammed || got.Ready.Type != v1alpha1.ConditionReady {
				t.Fatalf("types: %+v", got)
			}
			if got.Accepted.Status != tc.accepted || got.Programmed.Status != tc.programmed || got.Ready.Status != tc.rdy {
				t.Errorf("Accepted %s, Programmed %s, Ready %s; want %s, %s, %s\n%+v", got.Accepted.Status, got.Programmed.Status, got.Ready.Status,
					tc.accepted, tc.programmed, tc.rdy, got)
			}
			if got.Programmed.Reason != tc.programmedReason {
				t.Errorf("Programmed reason %s (%s), want %s", got.Programmed.Reason, got.Programmed.Message, tc.programmedReason)
			}
			if !strings.Contains(got.Ready.Message, tc.readyHas) {
				t.Errorf("Ready message %q, want it to mention %q", got.Ready.Message, tc.readyHas)
			}
			if tc.accepted == metav1.ConditionFalse && got.Accepted.Reason != routing.ReasonSecretNotFound {
				t.Errorf("Accepted reason %s, want the problem's", got.Accepted.Reason)
			}
		})
	}
}

// TestProgrammedSurvivesARestart: before the first poll a restarted controller keeps the
// Programmed it had written for this generation, so Ready does not flap; for a newer generation
// it waits for the poll.
func TestProgrammedSurvivesARestart(t *testing.T) {
	tbl := &routing.Table{Channels: []routing.Channel{{Name: "a", Namespace: "llm", Generation: 4}}}
	res := SyncResult{Compiled: tbl, Published: tbl}
	old := []metav1.Condition{{Type: v1alpha1.ConditionProgrammed, Status: metav1.ConditionTrue, Reason: ReasonProgrammed,
		Message: "generation 4 is served by every proxy replica that reports", ObservedGeneration: 4}}
	compiled := readyCondition("ProviderChannel", "llm", "a", &res)
	got := conditionsFor("ProviderChannel", "llm", "a", 4, compiled, &res, liveView{}, true, old)
	if got.Programmed.Status != metav1.ConditionTrue || got.Ready.Status != metav1.ConditionTrue {
		t.Errorf("after a restart: Programmed %s, Ready %s (%s); want both True", got.Programmed.Status, got.Ready.Status, got.Ready.Message)
	}
	got = conditionsFor("ProviderChannel", "llm", "a", 5, compiled, &res, liveView{}, true, old)
	if got.Programmed.Status != metav1.ConditionUnknown || got.Ready.Status != metav1.ConditionFalse {
		t.Errorf("a newer generation after a restart: Programmed %s, Ready %s; want Unknown and False", got.Programmed.Status, got.Ready.Status)
	}
}

// TestOnlyObjectsWhoseServedGenerationChangedAreReconciled: a replica loading a config that
// changes one object's generation re-reconciles that object, not every other; a replica coming
// or going re-reconciles all.
func TestOnlyObjectsWhoseServedGenerationChangedAreReconciled(t *testing.T) {
	a, b := routing.ObjectKey("RoutingPolicy", "llm", "a"), routing.ObjectKey("RoutingPolicy", "llm", "b")
	r := func(hash string, gens map[string]int64) replicaInfo {
		return replicaInfo{Name: "p0", Reachable: true, Hash: hash, Generations: gens}
	}
	prev := liveView{Polled: true, Replicas: []replicaInfo{r("h1", map[string]int64{a: 1, b: 1})}}
	next := liveView{Polled: true, Replicas: []replicaInfo{r("h2", map[string]int64{a: 2, b: 1})}}
	if replicasMoved(prev, next) {
		t.Fatal("a reload is not a replica moving")
	}
	if !servedChanged(prev, next, a) || servedChanged(prev, next, b) {
		t.Errorf("changed: a %v, b %v; want only a", servedChanged(prev, next, a), servedChanged(prev, next, b))
	}
	gone := liveView{Polled: true, Replicas: []replicaInfo{{Name: "p0", Error: "refused"}}}
	if !replicasMoved(next, gone) {
		t.Error("a replica becoming unreachable is a move")
	}
	legacy := liveView{Polled: true, Replicas: []replicaInfo{{Name: "p0", Reachable: true, Hash: "h3"}}}
	if !servedChanged(legacy, liveView{Polled: true, Replicas: []replicaInfo{{Name: "p0", Reachable: true, Hash: "h4"}}}, b) {
		t.Error("a replica without generations that loads another config changes every object")
	}
}

// TestFleetCondition: FleetShared is absent without a fleet store, True while every reachable
// replica shares, False naming those in local mode; its message holds no count and no error.
func TestFleetCondition(t *testing.T) {
	shared, local := &fleetLink{Connected: true}, &fleetLink{}
	cases := []struct {
		name     string
		replicas []replicaInfo
		present  bool
		status   metav1.ConditionStatus
		msg      string
	}{
		{"no store", allReporting(3), false, "", ""},
		{"all shared", []replicaInfo{{Name: "a", Reachable: true, Fleet: shared}, {Name: "b", Reachable: true, Fleet: shared}}, true,
			metav1.ConditionTrue, "every proxy replica shares evidence and verdicts through the fleet store"},
		{"two in local mode, one unreachable", []replicaInfo{{Name: "c", Reachable: true, Fleet: local}, {Name: "a", Reachable: true, Fleet: shared},
			{Name: "b", Reachable: true, Fleet: local}, {Name: "d", Error: "timeout"}}, true,
			metav1.ConditionFalse, "in local mode, judging on their own evidence (see fleet in their /admin/v1/channels): b, c"},
		{"one without a store", []replicaInfo{{Name: "a", Reachable: true, Fleet: shared}, {Name: "b", Reachable: true}}, true,
			metav1.ConditionFalse, "in local mode, judging on their own evidence (see fleet in their /admin/v1/channels): b (no fleet store)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := fleetCondition(tc.replicas)
			if ok != tc.present || c.Status != tc.status || c.Message != tc.msg {
				t.Errorf("got %v %+v; want present %v, %s %q", ok, c, tc.present, tc.status, tc.msg)
			}
			pc := channel("gpt-4o")
			st := channelStatus(channelInputs{Channel: pc, Now: testStart, Ready: readyTrue, ScoreStep: 5,
				Live: liveView{Polled: true, Replicas: tc.replicas}})
			if got := meta.FindStatusCondition(st.Conditions, ConditionFleetShared); (got != nil) != tc.present {
				t.Errorf("status carries FleetShared: %v, want %v", got != nil, tc.present)
			}
		})
	}
}
