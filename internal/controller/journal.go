package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/health"
)

// journalEntry is one Event to write about an object.
type journalEntry struct {
	Type   string // corev1.EventTypeNormal or corev1.EventTypeWarning
	Reason string
	Action string
	Note   string
	Time   time.Time
	// Key identifies the entry: the same key is the same Event, written once.
	Key string
}

// Journal writes Events (events.k8s.io/v1) with names derived from the entry's key, so an entry
// is written once however often it is recorded: after a failed status write, from a lagging
// cache, by a restarted controller or by two replicas' reports of one transition.
//
// It does not use an EventRecorder on purpose: the events API recorder folds events with the same
// reason on one object into a series that keeps the first note, so a second "Disabled" by
// another operator, or the second ejection of the day, would lose its message; and the core/v1
// recorder rate-limits and merges "similar" events. A journal must keep every entry as written.
type Journal struct {
	client   client.Client
	instance string
}

// Record writes one Event about obj. An entry already written is not an error.
func (j *Journal) Record(ctx context.Context, obj client.Object, kind string, e journalEntry) error {
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: eventName(obj.GetName(), string(obj.GetUID())+"/"+e.Key), Namespace: obj.GetNamespace()},
		EventTime:  metav1.NewMicroTime(e.Time),
		Regarding: corev1.ObjectReference{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: kind,
			Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
		},
		Type:                e.Type,
		Reason:              e.Reason,
		Action:              e.Action,
		Note:                truncate(e.Note, 1000),
		ReportingController: ReportingController,
		ReportingInstance:   j.instance,
	}
	if err := j.client.Create(ctx, ev); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to record Event %s on %s %s/%s: %w", e.Reason, kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// eventName is <object>.<hash of the key>, like the names Kubernetes gives its own Events.
func eventName(object, key string) string {
	sum := sha256.Sum256([]byte(key))
	if len(object) > 200 {
		object = object[:200]
	}
	return object + "." + hex.EncodeToString(sum[:8])
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// readyEvents journals Ready turning False with a new problem (a Warning) and turning True again.
// rv (the object's resourceVersion as read) makes the key unique per object state.
func readyEvents(oldConds []metav1.Condition, ready metav1.Condition, rv string, now time.Time) []journalEntry {
	old := meta.FindStatusCondition(oldConds, v1alpha1.ConditionReady)
	switch {
	case ready.Status == metav1.ConditionFalse && ready.Reason != ReasonConfigHeldBack &&
		(old == nil || old.Status != metav1.ConditionFalse || old.Reason != ready.Reason || old.Message != ready.Message):
		return []journalEntry{{Type: corev1.EventTypeWarning, Reason: ready.Reason, Action: "Compile", Note: ready.Message, Time: now,
			Key: "ready/" + rv + "/" + ready.Reason + "/" + ready.Message}}
	case ready.Status == metav1.ConditionTrue && old != nil && old.Status == metav1.ConditionFalse && isCompileProblem(old.Reason):
		return []journalEntry{{Type: corev1.EventTypeNormal, Reason: ReasonProblemResolved, Action: "Compile",
			Note: "compiled into the proxy config again (was " + old.Reason + ")", Time: now, Key: "ready/" + rv + "/resolved"}}
	}
	return nil
}

// ReasonPanicRoutingEnded journals a policy leaving panic routing: its models have routable
// channels again (or none is served at all, which Available says).
const ReasonPanicRoutingEnded = "PanicRoutingEnded"

// panicEvents journals a policy's Available condition entering panic routing (a Warning: its
// requests are answered by a channel the rules ejected) and leaving it.
func panicEvents(oldConds []metav1.Condition, available *metav1.Condition, rv string, now time.Time) []journalEntry {
	if available == nil {
		return nil
	}
	old := meta.FindStatusCondition(oldConds, v1alpha1.ConditionAvailable)
	wasPanic := old != nil && old.Reason == ReasonPanicRouting
	switch {
	case available.Reason == ReasonPanicRouting && !wasPanic:
		return []journalEntry{{Type: corev1.EventTypeWarning, Reason: ReasonPanicRouting, Action: "Route", Note: available.Message, Time: now,
			Key: "panic/" + rv}}
	case wasPanic && available.Reason != ReasonPanicRouting:
		return []journalEntry{{Type: corev1.EventTypeNormal, Reason: ReasonPanicRoutingEnded, Action: "Route",
			Note: "panic routing ended: " + available.Message, Time: now, Key: "panic/" + rv + "/ended"}}
	}
	return nil
}

// isCompileProblem reports whether a Ready=False reason was a problem of the object itself, as
// opposed to waiting: for other objects (ConfigHeldBack) or for the proxies to serve it (the
// Programmed reasons). Only the end of a problem is journaled as ProblemResolved.
func isCompileProblem(reason string) bool {
	switch reason {
	case ReasonConfigHeldBack, ReasonPending, ReasonStale, ReasonNoProxies:
		return false
	}
	return true
}

// disabledEvents journals the operator override: when spec.disabled takes effect, when it is
// lifted, when it runs out at disabledUntil (OverrideEnded, before the controller clears the
// fields) and when it is written with a disabledUntil already past (a Warning: nothing else would
// tell the operator that the override they just patched is not in effect). The Available
// condition's reason remembers the last override state, so the change is detected level-based and
// survives restarts; the keys make each Event once per generation.
func disabledEvents(pc *v1alpha1.ProviderChannel, st overrideState, by string, now time.Time) []journalEntry {
	old := meta.FindStatusCondition(pc.Status.Conditions, v1alpha1.ConditionAvailable)
	wasDisabled := old != nil && old.Reason == ReasonDisabled
	key := "override/" + pc.ResourceVersion
	gen := fmt.Sprintf("override/generation/%d/", pc.Generation)
	switch {
	case st == overrideOn && !wasDisabled:
		return []journalEntry{{Type: corev1.EventTypeNormal, Reason: ReasonDisabled, Action: "Disable",
			Note: disabledMessage(&pc.Spec, by) + "; out of rotation on every proxy replica", Time: now, Key: key + "/disabled"}}
	case st == overrideEnded:
		return []journalEntry{{Type: corev1.EventTypeNormal, Reason: ReasonOverrideEnded, Action: "Enable",
			Note: overrideEndedNote(&pc.Spec) + "; the channel re-enters through probes and the ramp", Time: now, Key: gen + "ended"}}
	case st == overrideInPast:
		return []journalEntry{{Type: corev1.EventTypeWarning, Reason: ReasonDisabledUntilInPast, Action: "Disable",
			Note: inPastNote(&pc.Spec), Time: now, Key: gen + "in-past/" + untilText(&pc.Spec)}}
	case st == overrideOff && wasDisabled:
		note := "enabled"
		if by != "" {
			note += " by " + by
		}
		return []journalEntry{{Type: corev1.EventTypeNormal, Reason: ReasonEnabled, Action: "Enable",
			Note: note + "; the channel re-enters through probes and the ramp", Time: now, Key: key + "/enabled"}}
	}
	return nil
}

// disabledBy names the field manager that last wrote spec.disabled (kubectl-patch,
// argocd-controller, ...). When the field was removed rather than set to false, no manager owns
// it; then the manager that last wrote any of the spec is the best answer.
func disabledBy(obj metav1.Object) string {
	var best, fallback metav1.ManagedFieldsEntry
	for _, mf := range obj.GetManagedFields() {
		if mf.Subresource != "" || mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		spec, ok := fields["f:spec"].(map[string]any)
		if !ok {
			continue
		}
		if _, owns := spec["f:disabled"]; owns && newer(mf, best) {
			best = mf
		}
		if newer(mf, fallback) {
			fallback = mf
		}
	}
	if best.Manager != "" {
		return best.Manager
	}
	return fallback.Manager
}

func newer(a, b metav1.ManagedFieldsEntry) bool {
	if b.Manager == "" {
		return true
	}
	if a.Time == nil || b.Time == nil {
		return a.Time != nil
	}
	return a.Time.After(b.Time.Time)
}

// transitionKey is one fleet transition as every replica reports it: replicas reach the same
// phase from different ones and by different rules (one trips on its counts, the others adopt
// the fleet verdict), so the target phase alone names it.
type transitionKey struct{ Channel, Model, To string }

// reportedEvent is a journal entry from one replica.
type reportedEvent struct {
	Replica, BootID string
	Event           adminapi.Event
}

// deduper turns the replicas' journals into one entry per transition: replicas eject a failing
// provider within seconds of each other, and each reports it.
type deduper struct {
	window time.Duration
	maxAge time.Duration
	seen   map[transitionKey]time.Time
}

func newDeduper(window, maxAge time.Duration) *deduper {
	return &deduper{window: window, maxAge: maxAge, seen: map[transitionKey]time.Time{}}
}

// filter returns the events that are news, oldest first (the input is sorted by time): not older
// than maxAge, and not the same transition as one already passed within the window.
func (d *deduper) filter(events []reportedEvent, now time.Time) []reportedEvent {
	var out []reportedEvent
	for _, re := range events {
		e := re.Event
		if now.Sub(e.Time) > d.maxAge {
			continue
		}
		k := transitionKey{e.Channel, e.Model, e.To}
		if last, ok := d.seen[k]; ok && absDuration(e.Time.Sub(last)) < d.window {
			continue
		}
		d.seen[k] = e.Time
		out = append(out, re)
	}
	for k, t := range d.seen {
		if now.Sub(t) > d.maxAge+d.window {
			delete(d.seen, k)
		}
	}
	return out
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// transitionEntry is the Event for a transition a proxy reported: reason is the rule, the note
// carries the model, the phases and the figures.
func transitionEntry(re reportedEvent) journalEntry {
	e := re.Event
	typ, action := corev1.EventTypeNormal, "PhaseTransition"
	if strings.HasPrefix(e.Reason, health.DryRunPrefix) {
		// A RoutingPolicy's dry run: what it would have done. Nothing happened to the channel, so
		// it is no warning, and the action says it was not taken.
		action = "DryRun"
	} else if e.To == string(v1alpha1.PhaseEjected) || e.To == string(v1alpha1.PhaseDegraded) || e.To == string(v1alpha1.PhaseRateLimited) {
		typ = corev1.EventTypeWarning
	}
	note := fmt.Sprintf("%s: %s -> %s: %s", e.Model, e.From, e.To, e.Message)
	if re.Replica != "" {
		note += " (reported by " + re.Replica + ")"
	}
	reason := e.Reason
	if reason == "" {
		reason = "PhaseTransition"
	}
	return journalEntry{Type: typ, Reason: reason, Action: action, Note: note, Time: e.Time,
		Key: fmt.Sprintf("transition/%s/%d", re.BootID, e.Seq)}
}
