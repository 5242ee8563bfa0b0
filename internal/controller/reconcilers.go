package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
)

// ChannelReconciler publishes the config and writes a ProviderChannel's status: Ready from the
// compile, live health from the proxy replicas, the operator override at once.
type ChannelReconciler struct {
	reconcilerBase
}

// Reconcile gathers, computes the status with pure functions, journals and writes status once.
func (r *ChannelReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !r.watched(req.Namespace) {
		return reconcile.Result{}, nil
	}
	// Publish first, also for a deleted channel: the config must drop it.
	res, err := r.publisher.Sync(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	pc := &v1alpha1.ProviderChannel{}
	if err := r.client.Get(ctx, req.NamespacedName, pc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !pc.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}

	now := r.opts.Clock.Now()
	by := disabledBy(pc)
	ready := readyCondition("ProviderChannel", pc.Namespace, pc.Name, res)
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
	})
	entries := append(readyEvents(pc.Status.Conditions, ready, pc.ResourceVersion, now),
		disabledEvents(pc, effectiveDisabled(&pc.Spec, now), by, now)...)
	for _, e := range entries {
		if err := r.journal.Record(ctx, pc, "ProviderChannel", e); err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := r.writeStatus(ctx, pc, status); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.endExpiredOverride(ctx, pc, now); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: untilOverrideEnds(&pc.Spec, now)}, nil
}

// endExpiredOverride clears an override whose disabledUntil has passed (disabled, disabledUntil
// and disabledReason together, as the CRD requires). Left in place, the expired date would make a
// later `kubectl patch … {"spec":{"disabled":true}}` a no-op: the API server sees no change, and
// the on-call engineer sees nothing happen. The status and the journal have recorded the end
// already (status.disabled false, "override ended at disabledUntil").
func (r *ChannelReconciler) endExpiredOverride(ctx context.Context, pc *v1alpha1.ProviderChannel, now time.Time) error {
	if !pc.Spec.Disabled || pc.Spec.DisabledUntil == nil || now.Before(pc.Spec.DisabledUntil.Time) {
		return nil
	}
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

// PolicyReconciler publishes the config and writes a RoutingPolicy's status.
type PolicyReconciler struct {
	reconcilerBase
}

// Reconcile gathers, computes the status with pure functions, journals and writes status once.
func (r *PolicyReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !r.watched(req.Namespace) {
		return reconcile.Result{}, nil
	}
	res, err := r.publisher.Sync(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	rp := &v1alpha1.RoutingPolicy{}
	if err := r.client.Get(ctx, req.NamespacedName, rp); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !rp.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	var list v1alpha1.ProviderChannelList
	if err := r.client.List(ctx, &list, client.InNamespace(rp.Namespace)); err != nil {
		return reconcile.Result{}, fmt.Errorf("failed to list ProviderChannels: %w", err)
	}
	channels := make(map[string]*v1alpha1.ProviderChannel, len(list.Items))
	for i := range list.Items {
		channels[list.Items[i].Name] = &list.Items[i]
	}

	now := r.opts.Clock.Now()
	ready := readyCondition("RoutingPolicy", rp.Namespace, rp.Name, res)
	conds := conditionsFor("RoutingPolicy", rp.Namespace, rp.Name, rp.Generation, ready, res, r.live.View(), r.monitored(), rp.Status.Conditions)
	status := policyStatus(policyInputs{Policy: rp, Now: now, Ready: conds.Ready, Accepted: conds.Accepted, Programmed: conds.Programmed,
		ResolvedRefs: conds.ResolvedRefs, Published: res.Published, Channels: channels, Live: r.live.View()})
	if ready.Status == metav1.ConditionTrue && conds.ResolvedRefs.Status == metav1.ConditionFalse {
		// A hop that cannot be followed is journaled like a problem, and its end as resolved.
		ready = metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: conds.ResolvedRefs.Reason, Message: conds.ResolvedRefs.Message}
	}
	for _, e := range readyEvents(rp.Status.Conditions, ready, rp.ResourceVersion, now) {
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
