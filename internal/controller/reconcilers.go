package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
)

// ChannelReconciler writes a ProviderChannel's status: Ready, Accepted and Programmed from the
// compile's snapshot and the proxies' live view, live health from the proxy replicas, the operator
// override at once. It never compiles: the CompileReconciler does, and queues the channels whose
// status a compile changes.
type ChannelReconciler struct {
	statusBase
}

// Reconcile gathers, computes the status with pure functions, journals and writes status once.
func (r *ChannelReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !r.watched(req.Namespace) {
		return reconcile.Result{}, nil
	}
	pc := &v1alpha1.ProviderChannel{}
	if err := r.client.Get(ctx, req.NamespacedName, pc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !pc.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	snap, v, ok := r.compiled("ProviderChannel", pc)
	if !ok {
		// Not compiled at this generation yet: that compile queues the channel.
		return reconcile.Result{}, nil
	}
	res := snap.Result

	now := r.opts.Clock.Now()
	by := disabledBy(pc)
	override := overrideAt(now, &pc.Spec, pc.Generation, pc.Status.Conditions)
	ready := v.Compiled
	live := r.live.View()
	conds := conditionsFor("ProviderChannel", pc.Namespace, pc.Name, pc.Generation, ready, res, live, r.monitored(), pc.Status.Conditions)
	status := channelStatus(channelInputs{
		Channel:    pc,
		Now:        now,
		Ready:      conds.Ready,
		Accepted:   conds.Accepted,
		Programmed: conds.Programmed,
		Live:       live,
		ScoreStep:  r.opts.ScoreStep,
		DisabledBy: by,
		Override:   override,
	})
	entries := append(readyEvents(pc.Status.Conditions, ready, pc.ResourceVersion, now),
		disabledEvents(pc, override, by, now)...)
	for _, e := range entries {
		if err := r.journal.Record(ctx, pc, "ProviderChannel", e); err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := r.writeStatus(ctx, pc, status); err != nil {
		return reconcile.Result{}, err
	}
	if override == overrideEnded {
		if err := r.endExpiredOverride(ctx, pc); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: untilOverrideEnds(&pc.Spec, now)}, nil
}

// endExpiredOverride clears an override whose disabledUntil has come while it was in effect
// (disabled, disabledUntil and disabledReason together, as the CRD requires). Left in place, the
// expired date would make a later `kubectl patch … {"spec":{"disabled":true}}` a no-op: the API
// server sees no change, and the on-call engineer sees nothing happen. The OverrideEnded Event
// and the status have recorded the end already. An override written with a disabledUntil already
// past is not cleared (overrideInPast): what the operator wrote stays, and a Warning says why it
// is not in effect.
func (r *ChannelReconciler) endExpiredOverride(ctx context.Context, pc *v1alpha1.ProviderChannel) error {
	orig := pc.DeepCopy()
	pc.Spec.Disabled, pc.Spec.DisabledUntil, pc.Spec.DisabledReason = false, nil, ""
	if err := r.client.Patch(ctx, pc, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("failed to clear the expired override of ProviderChannel %s/%s: %w", pc.Namespace, pc.Name, err)
	}
	return nil
}

func (r *ChannelReconciler) writeStatus(ctx context.Context, pc *v1alpha1.ProviderChannel, status v1alpha1.ProviderChannelStatus) error {
	if equality.Semantic.DeepEqual(pc.Status, status) {
		return nil
	}
	orig := pc.DeepCopy()
	pc.Status = status
	if err := r.client.Status().Patch(ctx, pc, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("failed to update ProviderChannel status: %w", err)
	}
	return nil
}

// untilOverrideEnds is when the controller must look again for disabledUntil to take effect.
func untilOverrideEnds(spec *v1alpha1.ProviderChannelSpec, now time.Time) time.Duration {
	if !effectiveDisabled(spec, now) || spec.DisabledUntil == nil {
		return 0
	}
	// A little past the instant, so the next pass sees it expired.
	return spec.DisabledUntil.Sub(now) + 100*time.Millisecond
}

// PolicyReconciler writes a RoutingPolicy's status from the compile's snapshot, the proxies' live
// view and the status of the channels it routes. Like ChannelReconciler, it never compiles.
type PolicyReconciler struct {
	statusBase
}

// Reconcile gathers, computes the status with pure functions, journals and writes status once.
func (r *PolicyReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !r.watched(req.Namespace) {
		return reconcile.Result{}, nil
	}
	rp := &v1alpha1.RoutingPolicy{}
	if err := r.client.Get(ctx, req.NamespacedName, rp); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !rp.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	snap, v, ok := r.compiled("RoutingPolicy", rp)
	if !ok {
		return reconcile.Result{}, nil
	}
	res := snap.Result
	// Only the channels its rows show, not the namespace's: at a thousand channels, listing them
	// all for each policy was most of a policy reconcile.
	channels := map[string]*v1alpha1.ProviderChannel{}
	for _, row := range v.Published.(publishedRows).Rows {
		if _, done := channels[row.Channel]; done {
			continue
		}
		pc := &v1alpha1.ProviderChannel{}
		switch err := r.client.Get(ctx, client.ObjectKey{Namespace: rp.Namespace, Name: row.Channel}, pc); {
		case err == nil:
			channels[row.Channel] = pc
		case apierrors.IsNotFound(err):
			channels[row.Channel] = nil // deleted since the compile, which will queue the policy
		default:
			return reconcile.Result{}, fmt.Errorf("failed to get ProviderChannel %s/%s: %w", rp.Namespace, row.Channel, err)
		}
	}

	now := r.opts.Clock.Now()
	ready := v.Compiled
	conds := conditionsFor("RoutingPolicy", rp.Namespace, rp.Name, rp.Generation, ready, res, r.live.View(), r.monitored(), rp.Status.Conditions)
	status := policyStatus(policyInputs{Policy: rp, Now: now, Ready: conds.Ready, Accepted: conds.Accepted, Programmed: conds.Programmed,
		ResolvedRefs: conds.ResolvedRefs, Published: res.Published, Channels: channels, Live: r.live.View()})
	if ready.Status == metav1.ConditionTrue && conds.ResolvedRefs.Status == metav1.ConditionFalse {
		// A hop that cannot be followed is journaled like a problem, and its end as resolved.
		ready = metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: conds.ResolvedRefs.Reason, Message: conds.ResolvedRefs.Message}
	}
	entries := append(readyEvents(rp.Status.Conditions, ready, rp.ResourceVersion, now),
		panicEvents(rp.Status.Conditions, meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionAvailable), rp.ResourceVersion, now)...)
	for _, e := range entries {
		if err := r.journal.Record(ctx, rp, "RoutingPolicy", e); err != nil {
			return reconcile.Result{}, err
		}
	}
	if equality.Semantic.DeepEqual(rp.Status, status) {
		return reconcile.Result{}, nil
	}
	orig := rp.DeepCopy()
	rp.Status = status
	if err := r.client.Status().Patch(ctx, rp, client.MergeFrom(orig)); err != nil {
		return reconcile.Result{}, fmt.Errorf("failed to update RoutingPolicy status: %w", err)
	}
	return reconcile.Result{}, nil
}
