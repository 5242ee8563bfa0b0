package controller

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
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

// Setup registers the compile reconciler, the status reconcilers (ProviderChannel, RoutingPolicy,
// GatewayClient) and the admin API poller with the manager. Build the manager with
// CacheOptions(opts).
//
// The compile reconciler alone compiles and publishes, on a single request (see
// CompileReconciler); the status reconcilers read its snapshot and the poller's live view and
// write status, and are queued by the compile (the objects a snapshot changes), the poller (the
// objects whose live data changed by enough to be written) and their own object's events (a
// status edited by hand is repaired).
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if err := opts.complete(); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.ProviderChannel{}, credentialsRefIndex, func(o client.Object) []string {
		return routing.SecretNames(o.(*v1alpha1.ProviderChannel))
	}); err != nil {
		return fmt.Errorf("failed to index ProviderChannels by Secret: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.GatewayClient{}, keysSecretRefIndex, func(o client.Object) []string {
		return []string{o.(*v1alpha1.GatewayClient).Spec.KeysSecretRef.Name}
	}); err != nil {
		return fmt.Errorf("failed to index GatewayClients by Secret: %w", err)
	}
	c := mgr.GetClient()
	journal := &Journal{client: c, instance: opts.ReportingInstance}
	queues := newStatusQueues()
	snapshots := &atomic.Pointer[Snapshot]{}
	kicks := newCompileKick()
	poller := newPoller(c, opts, journal, queues, kicks)
	if err := mgr.Add(poller); err != nil {
		return err
	}
	publisher := NewPublisher(c, mgr.GetAPIReader(), opts)
	publisher.replicas = func() int { return readyReplicas(poller.View()) }
	publishOnElection(kicks)

	compiler := &CompileReconciler{publisher: publisher, snapshots: snapshots, queues: queues}
	base := statusBase{client: c, opts: opts, snapshots: snapshots, journal: journal, live: poller}
	watched := func(_ context.Context, o client.Object) bool { return base.watched(o.GetNamespace()) }
	// One worker on one request: compiles never overlap, and events during one make one more.
	b := ctrl.NewControllerManagedBy(mgr).Named("routingtable").WithOptions(controller.Options{MaxConcurrentReconciles: 1})
	for _, k := range inputKinds {
		b = b.Watches(k.New(), toCompile(opts, watched), builder.WithPredicates(compiledChanged))
	}
	if err := b.
		// Secrets are watched (and cached) as metadata only: see secretReader.
		WatchesMetadata(&corev1.Secret{}, toCompile(opts, base.compiledSecret)).
		// The published objects, so that an edit or a deletion is repaired.
		Watches(&corev1.ConfigMap{}, toCompile(opts, func(_ context.Context, o client.Object) bool { return ownedObject(opts, o) })).
		// On election (publishOnElection) and when the ready replicas change (the poller).
		WatchesRawSource(source.Channel(kicks, toCompile(opts, nil))).
		Complete(compiler); err != nil {
		return fmt.Errorf("failed to set up the routing table controller: %w", err)
	}

	// No GenerationChangedPredicate on the primary watches: a status edited by hand is repaired.
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("providerchannel").
		For(&v1alpha1.ProviderChannel{}).
		WatchesRawSource(source.Channel(queues["ProviderChannel"], &handler.EnqueueRequestForObject{})).
		Complete(&ChannelReconciler{statusBase: base}); err != nil {
		return fmt.Errorf("failed to set up the ProviderChannel controller: %w", err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("routingpolicy").
		For(&v1alpha1.RoutingPolicy{}).
		// A policy's rows show its channels' figures.
		Watches(&v1alpha1.ProviderChannel{}, handler.EnqueueRequestsFromMapFunc(base.policiesShowing), builder.WithPredicates(rowFiguresChanged)).
		WatchesRawSource(source.Channel(queues["RoutingPolicy"], &handler.EnqueueRequestForObject{})).
		Complete(&PolicyReconciler{statusBase: base}); err != nil {
		return fmt.Errorf("failed to set up the RoutingPolicy controller: %w", err)
	}
	return setupClients(mgr, base, queues["GatewayClient"])
}

// publishOnElection makes the compile reconciler publish once when it starts, that is on
// election. A fresh install has no ProviderChannel, RoutingPolicy or GatewayClient, so no event
// would ever ask for a compile, the routing ConfigMap would never be written, and the proxies
// (ready once they have loaded one) would stay NotReady: `helm install --wait` would never
// return. The kick waits in its channel until the controller starts; a failed publication is
// retried by the controller's work queue, with its back-off, like any other compile.
func publishOnElection(kicks compileKick) { kicks.kick() }

// statusBase is what the status reconcilers share.
type statusBase struct {
	client    client.Client
	opts      Options
	snapshots *atomic.Pointer[Snapshot]
	journal   *Journal
	live      interface{ View() liveView }
}

// compiled returns the current snapshot and the object's verdict in it, when the snapshot
// compiled this generation of this object. A status reconciler of another kind starts the same
// way: the verdict is all it reads of the compile.
func (b *statusBase) compiled(kind string, obj client.Object) (*Snapshot, verdict, bool) {
	snap := b.snapshots.Load()
	v, ok := snap.verdict(kind, obj)
	return snap, v, ok
}

// monitored reports whether the controller polls any proxy, so that Programmed can be known.
func (b *statusBase) monitored() bool {
	return b.opts.ProxyService != "" || len(b.opts.AdminURLs) > 0
}

// watched reports whether a namespace is compiled into the config.
func (b *statusBase) watched(ns string) bool {
	return len(b.opts.WatchNamespaces) == 0 || slices.Contains(b.opts.WatchNamespaces, ns)
}

// compiledSecret reports whether a Secret is read by the compile: the credentials Secret the
// controller owns (an edit or a deletion is repaired), or one a watched channel or client
// references (a key added to or removed from a client's Secret is a rotation, published at once).
func (b *statusBase) compiledSecret(ctx context.Context, o client.Object) bool {
	if ownedObject(b.opts, o) {
		return true
	}
	if !b.watched(o.GetNamespace()) {
		return false
	}
	var list v1alpha1.ProviderChannelList
	if err := b.client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{credentialsRefIndex: o.GetName()}); err != nil {
		// The cache cannot fail on an index it has; compile rather than miss a rotation.
		return true
	}
	if len(list.Items) > 0 {
		return true
	}
	var clients v1alpha1.GatewayClientList
	if err := b.client.List(ctx, &clients, client.InNamespace(o.GetNamespace()), client.MatchingFields{keysSecretRefIndex: o.GetName()}); err != nil {
		return true
	}
	return len(clients.Items) > 0
}

// policiesShowing maps a channel to the policies whose status rows show it, in the current
// snapshot. A channel the snapshot does not route yet is in no row; the compile that routes it
// queues the policies.
func (b *statusBase) policiesShowing(_ context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, p := range b.snapshots.Load().policiesRouting(routing.ChannelID(o.GetNamespace(), o.GetName())) {
		out = append(out, reconcile.Request{NamespacedName: p})
	}
	return out
}

// rowFiguresChanged passes the updates of a channel that change what a policy's rows show of it:
// a model's phase, health score or traffic share.
var rowFiguresChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		a, okA := e.ObjectOld.(*v1alpha1.ProviderChannel)
		b, okB := e.ObjectNew.(*v1alpha1.ProviderChannel)
		if !okA || !okB {
			return true
		}
		return !slices.EqualFunc(a.Status.Models, b.Status.Models, func(x, y v1alpha1.ModelStatus) bool {
			return x.Name == y.Name && x.Phase == y.Phase && x.HealthScore == y.HealthScore && x.TrafficPercent == y.TrafficPercent
		})
	},
}
