package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/routing"
)

func managed(manager string, at time.Time, fields string) metav1.ManagedFieldsEntry {
	t := metav1.NewTime(at)
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Time: &t,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

func TestDisabledBy(t *testing.T) {
	spec := `{"f:spec":{"f:provider":{},"f:models":{}}}`
	disabled := `{"f:spec":{"f:disabled":{},"f:disabledReason":{}}}`
	cases := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    string
	}{
		{"the owner of spec.disabled", []metav1.ManagedFieldsEntry{
			managed("argocd-controller", testStart, spec),
			managed("kubectl-patch", testStart.Add(time.Minute), disabled),
			managed("kubectl-edit", testStart.Add(2*time.Minute), `{"f:metadata":{"f:labels":{}}}`),
		}, "kubectl-patch"},
		{"the field was removed: the last writer of the spec", []metav1.ManagedFieldsEntry{
			managed("kubectl-client-side-apply", testStart, spec),
			managed("argocd-controller", testStart.Add(time.Minute), spec),
		}, "argocd-controller"},
		{"status writes do not count", []metav1.ManagedFieldsEntry{
			managed("kubectl-patch", testStart, disabled),
			func() metav1.ManagedFieldsEntry {
				e := managed("switchyard-controller", testStart.Add(time.Hour), `{"f:spec":{"f:disabled":{}}}`)
				e.Subresource = "status"
				return e
			}(),
		}, "kubectl-patch"},
		{"nobody", nil, ""},
	}
	for _, tc := range cases {
		pc := &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{ManagedFields: tc.entries}}
		if got := disabledBy(pc); got != tc.want {
			t.Errorf("%s: disabledBy = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDisabledEvents(t *testing.T) {
	until := metav1.NewTime(testStart.Add(time.Hour))
	disabledCond := []metav1.Condition{{Type: v1alpha1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: ReasonDisabled}}
	routableCond := []metav1.Condition{{Type: v1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: ReasonRoutable}}
	pc := func(disabled bool, conds []metav1.Condition) *v1alpha1.ProviderChannel {
		p := &v1alpha1.ProviderChannel{ObjectMeta: metav1.ObjectMeta{Name: "x", ResourceVersion: "7"}}
		p.Spec.Disabled = disabled
		if disabled {
			p.Spec.DisabledReason, p.Spec.DisabledUntil = "INC-1234", &until
		}
		p.Status.Conditions = conds
		return p
	}
	cases := []struct {
		name       string
		pc         *v1alpha1.ProviderChannel
		now        overrideState
		wantReason string
		wantNote   string
	}{
		{"disabled", pc(true, routableCond), overrideOn, ReasonDisabled, "disabled by kubectl-patch: INC-1234 (until 2026-11-30T11:00:00Z)"},
		{"still disabled", pc(true, disabledCond), overrideOn, "", ""},
		{"enabled", pc(false, disabledCond), overrideOff, ReasonEnabled, "enabled by kubectl-patch; the channel re-enters through probes and the ramp"},
		{"expired", pc(true, disabledCond), overrideEnded, ReasonOverrideEnded, "override ended at disabledUntil 2026-11-30T11:00:00Z; the controller clears spec.disabled, disabledUntil and disabledReason"},
		{"never disabled", pc(false, routableCond), overrideOff, "", ""},
		{"created disabled", pc(true, nil), overrideOn, ReasonDisabled, "disabled by kubectl-patch"},
		{"written with a past disabledUntil", pc(true, routableCond), overrideInPast, ReasonDisabledUntilInPast, "spec.disabledUntil 2026-11-30T11:00:00Z had passed"},
	}
	for _, tc := range cases {
		got := disabledEvents(tc.pc, tc.now, "kubectl-patch", testStart)
		if tc.wantReason == "" {
			if len(got) != 0 {
				t.Errorf("%s: unexpected %+v", tc.name, got)
			}
			continue
		}
		if len(got) != 1 || got[0].Reason != tc.wantReason || !strings.Contains(got[0].Note, tc.wantNote) {
			t.Errorf("%s: got %+v, want %s %q", tc.name, got, tc.wantReason, tc.wantNote)
		}
		if wantType := map[bool]string{true: corev1.EventTypeWarning, false: corev1.EventTypeNormal}[tc.now == overrideInPast]; len(got) == 1 && got[0].Type != wantType {
			t.Errorf("%s: Event type %s, want %s", tc.name, got[0].Type, wantType)
		}
	}
}

// overrideAt: a disabledUntil ahead is in effect; one passed ends the override when the status
// says it was in effect at this generation, and otherwise was written in the past and never
// started.
func TestOverrideAt(t *testing.T) {
	past, ahead := metav1.NewTime(testStart.Add(-time.Minute)), metav1.NewTime(testStart.Add(time.Minute))
	spec := func(disabled bool, until *metav1.Time) *v1alpha1.ProviderChannelSpec {
		return &v1alpha1.ProviderChannelSpec{Disabled: disabled, DisabledUntil: until}
	}
	cond := func(typ, reason string, gen int64) []metav1.Condition {
		return []metav1.Condition{{Type: typ, Status: metav1.ConditionFalse, Reason: reason, ObservedGeneration: gen}}
	}
	at := metav1.NewTime(testStart)
	for _, tc := range []struct {
		name  string
		spec  *v1alpha1.ProviderChannelSpec
		conds []metav1.Condition
		want  overrideState
	}{
		{"not disabled", spec(false, nil), nil, overrideOff},
		{"disabled, no end", spec(true, nil), nil, overrideOn},
		{"disabled until ahead", spec(true, &ahead), nil, overrideOn},
		{"disabledUntil is now: over", spec(true, &at), cond(ConditionOverrideApplied, ReasonDisabled, 3), overrideEnded},
		{"passed while in effect", spec(true, &past), cond(ConditionOverrideApplied, ReasonDisabled, 3), overrideEnded},
		{"passed, the fields not cleared yet", spec(true, &past), cond(ConditionOverrideApplied, ReasonOverrideEnded, 3), overrideEnded},
		{"passed while in effect, status of an older controller", spec(true, &past), cond(v1alpha1.ConditionAvailable, ReasonDisabled, 3), overrideEnded},
		{"written in the past", spec(true, &past), nil, overrideInPast},
		{"written in the past, still", spec(true, &past), cond(ConditionOverrideApplied, ReasonDisabledUntilInPast, 3), overrideInPast},
		{"moved into the past while in effect", spec(true, &past), cond(ConditionOverrideApplied, ReasonDisabled, 2), overrideInPast},
	} {
		if got := overrideAt(testStart, tc.spec, 3, tc.conds); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestReadyEvents(t *testing.T) {
	bad := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "SecretNotFound", Message: "ProviderChannel llm/a: Secret llm/k not found"}
	held := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonConfigHeldBack, Message: "held back"}
	cases := []struct {
		name string
		old  []metav1.Condition
		new  metav1.Condition
		want []string // type/reason
	}{
		{"new problem", []metav1.Condition{readyTrue}, bad, []string{"Warning/SecretNotFound"}},
		{"first seen with a problem", nil, bad, []string{"Warning/SecretNotFound"}},
		{"same problem again", []metav1.Condition{bad}, bad, nil},
		{"another problem", []metav1.Condition{bad}, func() metav1.Condition { c := bad; c.Message = "other"; return c }(), []string{"Warning/SecretNotFound"}},
		{"resolved", []metav1.Condition{bad}, readyTrue, []string{"Normal/ProblemResolved"}},
		{"held back is not this object's problem", []metav1.Condition{readyTrue}, held, nil},
		{"published after being held back", []metav1.Condition{held}, readyTrue, nil},
		{"fine", []metav1.Condition{readyTrue}, readyTrue, nil},
	}
	for _, tc := range cases {
		var got []string
		for _, e := range readyEvents(tc.old, tc.new, "1", testStart) {
			got = append(got, e.Type+"/"+e.Reason)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestDeduper(t *testing.T) {
	ev := func(replica string, seq uint64, at time.Duration, model string) reportedEvent {
		return reportedEvent{Replica: replica, BootID: "boot-" + replica, Event: adminapi.Event{Seq: seq, Time: testStart.Add(at),
			Channel: "c", Model: model, From: "Healthy", To: "Ejected", Reason: "ErrorRateExceeded"}}
	}
	d := newDeduper(2*time.Minute, 30*time.Minute)
	got := d.filter([]reportedEvent{
		ev("a", 1, -40*time.Minute, "m"), // history
		ev("a", 2, 0, "m"),
		ev("b", 7, 3*time.Second, "m"),  // the same ejection from another replica
		ev("b", 8, 4*time.Second, "m2"), // another model
	}, testStart.Add(5*time.Second))
	if len(got) != 2 || got[0].Event.Seq != 2 || got[1].Event.Model != "m2" {
		t.Errorf("first batch: %+v", got)
	}
	// A later poll: the third replica reports the same ejection; then a new ejection after recovery.
	got = d.filter([]reportedEvent{ev("c", 3, 30*time.Second, "m"), ev("a", 9, 20*time.Minute, "m")}, testStart.Add(21*time.Minute))
	if len(got) != 1 || got[0].Event.Seq != 9 {
		t.Errorf("second batch: %+v", got)
	}
	// One fleet transition reached by other routes: a replica adopting the fleet verdict from
	// Probing, another tripping on the consecutive rule; within the window, the same target.
	adopted := ev("d", 4, 21*time.Minute, "m")
	adopted.Event.From, adopted.Event.Reason = "Probing", "FleetVerdict"
	tripped := ev("e", 5, 21*time.Minute+30*time.Second, "m")
	tripped.Event.Reason = "ConsecutiveFailures"
	if again := d.filter([]reportedEvent{adopted, tripped}, testStart.Add(22*time.Minute)); len(again) != 0 {
		t.Errorf("one fleet ejection journaled again: %+v", again)
	}
	e := transitionEntry(got[0])
	if e.Type != corev1.EventTypeWarning || e.Reason != "ErrorRateExceeded" || e.Key != "transition/boot-a/9" || !strings.HasPrefix(e.Note, "m: Healthy -> Ejected") {
		t.Errorf("entry: %+v", e)
	}
}

func TestSliceTargets(t *testing.T) {
	slices := []discoveryv1.EndpointSlice{
		{
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}, {Name: ptr.To("admin"), Port: ptr.To(int32(9090))}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.0.0.2"}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "proxy-b"}},
				{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "proxy-a"}},
				{Addresses: []string{"10.0.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}}, // terminating
			},
		},
		{
			Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("admin"), Port: ptr.To(int32(9090))}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"fd00::5"}}},
		},
		{Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080))}}, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.9"}}}},
	}
	got := uniqueTargets(sliceTargets(slices, "admin"))
	want := []target{
		{Name: "fd00::5", URL: "http://[fd00::5]:9090"},
		{Name: "proxy-a", URL: "http://10.0.0.1:9090"},
		{Name: "proxy-b", URL: "http://10.0.0.2:9090"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
}

func TestRenderRoundTrip(t *testing.T) {
	tbl := &routing.Table{
		Channels:    []routing.Channel{{Name: "a", Namespace: "llm", Provider: "openai", BaseURL: "https://a.example/v1", HasCredentials: true, Weight: 100}},
		Policies:    []routing.Policy{},
		Credentials: map[string]routing.Secret{"llm/a": routing.NewSecret("sk-secret")},
	}
	r, err := render(tbl)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.table.Data[TableKey], "sk-secret") || !strings.Contains(string(r.credentials), `"llm/a": "sk-secret"`) || r.hash != tbl.Hash() {
		t.Fatalf("render: table %s credentials %s hash %s", r.table.Data, r.credentials, r.hash)
	}
	back := parsePublished(r.objects())
	if !sameJSON(tbl, back) || back.Credentials["llm/a"].Reveal() != "sk-secret" || back.Hash() != r.hash {
		t.Errorf("round trip: %+v", back)
	}
}

// TestFingerprintSeesWhatCompileReads: a status write changes none of what Compile reads, so the
// memoized compile is reused; a spec edit, a label, an object deleted and recreated under the same
// name, a Secret's new data (resourceVersion) each give another fingerprint.
func TestFingerprintSeesWhatCompileReads(t *testing.T) {
	base := func() routing.Inputs {
		return routing.Inputs{
			Channels: []v1alpha1.ProviderChannel{{ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "a", UID: "u1", Generation: 1, ResourceVersion: "10"}}},
			Policies: []v1alpha1.RoutingPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "p", UID: "u2", Generation: 1}}},
			Secrets:  []corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: "llm", Name: "k", UID: "u3", ResourceVersion: "5"}}},
		}
	}
	fp := fingerprint(base())
	status := base()
	status.Channels[0].ResourceVersion = "11"
	status.Channels[0].Status.Phase = v1alpha1.PhaseEjected
	if fingerprint(status) != fp {
		t.Error("a status write changed the fingerprint")
	}
	for name, mod := range map[string]func(*routing.Inputs){
		"spec edit":        func(in *routing.Inputs) { in.Channels[0].Generation = 2 },
		"label":            func(in *routing.Inputs) { in.Channels[0].Labels = map[string]string{"tier": "gold"} },
		"recreated":        func(in *routing.Inputs) { in.Policies[0].UID = "u9" },
		"secret rotated":   func(in *routing.Inputs) { in.Secrets[0].ResourceVersion = "6" },
		"secret removed":   func(in *routing.Inputs) { in.Secrets = nil },
		"another reserved": func(in *routing.Inputs) { in.ReservedSecrets = map[string]bool{"x/y": true} },
	} {
		in := base()
		mod(&in)
		if fingerprint(in) == fp {
			t.Errorf("%s: same fingerprint", name)
		}
	}
}

// TestPanicEvents: entering panic routing is a Warning, leaving it a Normal Event, each once per
// object state; staying in it journals nothing.
func TestPanicEvents(t *testing.T) {
	panicking := metav1.Condition{Type: v1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: ReasonPanicRouting, Message: "no routable channel for mini: panic routing serves it"}
	routable := metav1.Condition{Type: v1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: ReasonAllModelsRoutable, Message: "every model has a routable channel"}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	got := panicEvents([]metav1.Condition{routable}, &panicking, "7", now)
	if len(got) != 1 || got[0].Type != corev1.EventTypeWarning || got[0].Reason != ReasonPanicRouting || got[0].Note != panicking.Message {
		t.Fatalf("entering panic routing: %+v", got)
	}
	if got := panicEvents([]metav1.Condition{panicking}, &panicking, "8", now); len(got) != 0 {
		t.Errorf("still in panic routing: %+v", got)
	}
	got = panicEvents([]metav1.Condition{panicking}, &routable, "9", now)
	if len(got) != 1 || got[0].Type != corev1.EventTypeNormal || got[0].Reason != ReasonPanicRoutingEnded {
		t.Errorf("leaving panic routing: %+v", got)
	}
	if got := panicEvents(nil, &routable, "1", now); len(got) != 0 {
		t.Errorf("never in panic routing: %+v", got)
	}
}
