package controller

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// credentialsRefIndex indexes ProviderChannels by the Secrets they reference (routing.SecretNames:
// credentialsRef and the TLS client certificate).
const credentialsRefIndex = "spec.credentialsRef.name"

// Setup registers the reconcilers (ProviderChannel, RoutingPolicy, GatewayClient) and the admin API poller with the manager. Build the
// manager with CacheOptions(opts).
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := opts.complete(); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.ProviderChannel{}, credentialsRefIndex, func(o client.Object) []string {
		return routing.SecretNames(o.(*v1alpha1.ProviderChannel))
	}); err != nil {
		return fmt.Errorf("failed to index ProviderChannels by Secret: %w", err)
	}
	c := mgr.GetClient()
	journal := &Journal{client: c, instance: opts.ReportingInstance}
	publisher := NewPublisher(c, mgr.GetAPIReader(), opts)
	poller := newPoller(c, opts, journal)
	if err := mgr.Add(poller); err != nil {
		return err
	}
	publisher.replicas = func() int { return readyReplicas(poller.View()) }
	base := reconcilerBase{client: c, opts: opts, publisher: publisher, journal: journal, live: poller}

	owned := predicate.NewPredicateFuncs(func(o client.Object) bool {
		if o.GetNamespace() != opts.ProxyNamespace {
			return false
		}
		_, isCM := o.(*corev1.ConfigMap)
		return (isCM && o.GetName() == opts.ConfigMapName) || (!isCM && o.GetName() == opts.CredentialsSecretName)
	})
	cr := &ChannelReconciler{reconcilerBase: base}
	// No GenerationChangedPredicate on the primary watch: a status edited by hand is repaired.
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("providerchannel").
		For(&v1alpha1.ProviderChannel{}).
		// Secrets are watched (and cached) as metadata only: see secretReader.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(cr.channelsForSecret)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(cr.allChannels), builder.WithPredicates(owned)).
		WatchesRawSource(source.Channel(poller.changes, &handler.EnqueueRequestForObject{})).
		Complete(cr); err != nil {
		return fmt.Errorf("failed to set up the ProviderChannel controller: %w", err)
	}
	pr := &PolicyReconciler{reconcilerBase: base}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("routingpolicy").
		For(&v1alpha1.RoutingPolicy{}).
		Watches(&v1alpha1.ProviderChannel{}, handler.EnqueueRequestsFromMapFunc(pr.policiesInNamespace)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(pr.allPolicies), builder.WithPredicates(owned)).
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(pr.allPolicies), builder.WithPredicates(owned)).
		// A replica loading another config changes the policies' Programmed condition.
		WatchesRawSource(source.Channel(poller.policyChanges, &handler.EnqueueRequestForObject{})).
		Complete(pr); err != nil {
		return fmt.Errorf("failed to set up the RoutingPolicy controller: %w", err)
	}
	return setupClients(ctx, mgr, base, owned)
}

// reconcilerBase is what both reconcilers share.
type reconcilerBase struct {
	client    client.Client
	opts      Options
	publisher *Publisher
	journal   *Journal
	live      interface{ View() liveView }
}

// monitored reports whether the controller polls any proxy, so that Programmed can be known.
func (b *reconcilerBase) monitored() bool {
	return b.opts.ProxyService != "" || len(b.opts.AdminURLs) > 0
}

// watched reports whether a namespace is compiled into the config.
func (b *reconcilerBase) watched(ns string) bool {
	return len(b.opts.WatchNamespaces) == 0 || slices.Contains(b.opts.WatchNamespaces, ns)
}

// channelsForSecret maps a Secret to the channels that reference it; the credentials Secret
// the controller owns maps to every channel (an edit or a deletion is repaired).
func (r *ChannelReconciler) channelsForSecret(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() == r.opts.ProxyNamespace && o.GetName() == r.opts.CredentialsSecretName {
		return r.allChannels(ctx, o)
	}
	if !r.watched(o.GetNamespace()) {
		return nil
	}
	var list v1alpha1.ProviderChannelList
	if err := r.client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{credentialsRefIndex: o.GetName()}); err != nil {
		return nil
	}
	return requests(list.Items, func(pc *v1alpha1.ProviderChannel) types.NamespacedName {
		return types.NamespacedName{Namespace: pc.Namespace, Name: pc.Name}
	})
}

func (r *ChannelReconciler) allChannels(ctx context.Context, _ client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, ns := range namespacesOrAll(r.opts.WatchNamespaces) {
		var list v1alpha1.ProviderChannelList
		if err := r.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return out
		}
		out = append(out, requests(list.Items, func(pc *v1alpha1.ProviderChannel) types.NamespacedName {
			return types.NamespacedName{Namespace: pc.Namespace, Name: pc.Name}
		})...)
	}
	return out
}

func (r *PolicyReconciler) policiesInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	if !r.watched(o.GetNamespace()) {
		return nil
	}
	var list v1alpha1.RoutingPolicyList
	if err := r.client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	return requests(list.Items, func(rp *v1alpha1.RoutingPolicy) types.NamespacedName {
		return types.NamespacedName{Namespace: rp.Namespace, Name: rp.Name}
	})
}

func (r *PolicyReconciler) allPolicies(ctx context.Context, _ client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, ns := range namespacesOrAll(r.opts.WatchNamespaces) {
		var list v1alpha1.RoutingPolicyList
		if err := r.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return out
		}
		out = append(out, requests(list.Items, func(rp *v1alpha1.RoutingPolicy) types.NamespacedName {
			return types.NamespacedName{Namespace: rp.Namespace, Name: rp.Name}
		})...)
	}
	return out
}

func requests[T any](items []T, key func(*T) types.NamespacedName) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(items))
	for i := range items {
		out = append(out, reconcile.Request{NamespacedName: key(&items[i])})
	}
	return out
}
