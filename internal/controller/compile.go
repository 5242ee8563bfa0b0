package controller

import (
	"context"
	"reflect"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/switchyard-io/switchyard/internal/routing"
)

// CompileReconciler is the one place the routing table is compiled and published. Every event
// that can change the table (an object of an inputKind created or deleted, or given another
// generation or labels; a Secret a channel references; the published ConfigMap and Secret
// themselves) maps to its one request, so a burst of events is one compile: the work queue holds
// a request once, an event during a compile makes one more compile after it, and the first event
// of a burst waits Options.CompileDelay so that the rest of the burst (a `kubectl apply` of a
// directory, a Helm upgrade) joins it.
//
// Each compile is kept as an immutable Snapshot, which the status reconcilers read. Only the
// objects whose verdict (what their status reads of a compile) differs from the previous
// snapshot's are queued to their status reconcilers: a publication that changes one channel
// reconciles that channel, not every object.
type CompileReconciler struct {
	publisher *Publisher
	snapshots *atomic.Pointer[Snapshot]
	queues    statusQueues
}

// Reconcile compiles and publishes (Publisher.Sync), keeps the result and queues the objects
// whose status it changes. A failed sync keeps the last snapshot, and the request is retried.
func (r *CompileReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	res, err := r.publisher.Sync(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	prev := r.snapshots.Load()
	if prev != nil && sameCompile(prev.Result, res) {
		// Our own write coming back, a resync: nothing any status reads has changed.
		return reconcile.Result{}, nil
	}
	next := newSnapshot(res)
	r.snapshots.Store(next)
	changed := changedObjects(prev, next)
	if len(changed) > 0 {
		logf.FromContext(ctx).V(1).Info("Queued status", "objects", len(changed))
	}
	for _, o := range changed {
		if !r.queues.enqueue(ctx, o.Kind, o.Namespace, o.Name) {
			return reconcile.Result{}, ctx.Err()
		}
	}
	return reconcile.Result{}, nil
}

// Snapshot is one compile's result as the status reconcilers read it. It is never modified once
// stored: a reconcile that holds one reads a consistent compile however many follow.
type Snapshot struct {
	// Result is the compile and what it published.
	Result *SyncResult
	// verdicts are what each compiled object's status reads of Result.
	verdicts map[objectRef]verdict
	// routedBy maps a channel ID to the policies whose published form routes it: those whose
	// status rows show that channel's figures.
	routedBy map[string][]types.NamespacedName
}

// objectRef names an object of an inputKind.
type objectRef struct{ Kind, Namespace, Name string }

// objectID is an object as compiled: its name, identity and generation.
type objectID struct {
	objectRef
	UID        types.UID
	Generation int64
}

// objectsOf lists the objects of every inputKind in in.
func objectsOf(in *routing.Inputs) []objectID {
	var out []objectID
	for _, k := range inputKinds {
		for _, m := range k.Objects(in) {
			out = append(out, objectID{objectRef{k.Kind, m.GetNamespace(), m.GetName()}, m.GetUID(), m.GetGeneration()})
		}
	}
	return out
}

// verdict is everything one object's status reads of a compile, so that comparing two verdicts
// says whether a new compile changes that status. A status function that starts reading more of
// a SyncResult must add it here (or the object would not be queued when it changes).
type verdict struct {
	// UID and Generation are the object's as compiled: a status reconcile of another generation
	// waits for the compile of its own.
	UID        types.UID
	Generation int64
	// Compiled is the kind's Ready verdict (readyCondition, or inputKind.Compiled): problems, held back,
	// or compiled into the published config.
	Compiled metav1.Condition
	// Problems are the object's (of its kind's problems), blocking or not (Accepted, ResolvedRefs).
	Problems []routing.Problem
	// AsCompiled: the object's compiled form is what is published (Programmed).
	AsCompiled bool
	// Published is what else the kind's status reads of the published table (inputKind.Published).
	Published any
}

// newSnapshot computes the verdict of every compiled object.
func newSnapshot(res *SyncResult) *Snapshot {
	s := &Snapshot{Result: res, verdicts: make(map[objectRef]verdict, len(res.objects)), routedBy: map[string][]types.NamespacedName{}}
	for _, o := range res.objects {
		k, _ := kindOf(o.Kind)
		v := verdict{
			UID:        o.UID,
			Generation: o.Generation,
			Compiled:   k.compiled(res, o.Namespace, o.Name),
			Problems:   problemsFor(k.problems(res), o.Kind, o.Namespace, o.Name),
			AsCompiled: publishedAsCompiled(o.Kind, o.Namespace, o.Name, res),
		}
		if k.Published != nil {
			v.Published = k.Published(res, o.Namespace, o.Name)
		}
		s.verdicts[o.objectRef] = v
	}
	if res.Published != nil {
		for _, p := range res.Published.Policies {
			for _, c := range p.Channels {
				s.routedBy[c.Channel] = append(s.routedBy[c.Channel], types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
			}
		}
	}
	return s
}

// verdict returns an object's verdict when the snapshot compiled this very object (UID) at this
// generation; otherwise its status waits for the compile that will queue it.
func (s *Snapshot) verdict(kind string, obj metav1.Object) (verdict, bool) {
	if s == nil {
		return verdict{}, false
	}
	v, ok := s.verdicts[objectRef{kind, obj.GetNamespace(), obj.GetName()}]
	if !ok || v.UID != obj.GetUID() || v.Generation != obj.GetGeneration() {
		return verdict{}, false
	}
	return v, true
}

// policiesRouting are the policies whose status rows show a channel (by ID).
func (s *Snapshot) policiesRouting(channelID string) []types.NamespacedName {
	if s == nil {
		return nil
	}
	return s.routedBy[channelID]
}

// sameCompile reports whether two results are the same compile (the memo's table: the same
// fingerprint, so the same objects at the same generations) published as the same table, so
// that every verdict would be the same.
func sameCompile(a, b *SyncResult) bool {
	return a.Compiled == b.Compiled && a.PublishedHash == b.PublishedHash && a.HeldBack == b.HeldBack
}

// changedObjects are the objects of next whose verdict differs from prev's (all of them when
// there is no prev). Objects gone from next need no status.
func changedObjects(prev, next *Snapshot) []objectRef {
	var out []objectRef
	for _, o := range next.Result.objects {
		v := next.verdicts[o.objectRef]
		if prev != nil {
			if old, ok := prev.verdicts[o.objectRef]; ok && reflect.DeepEqual(old, v) {
				continue
			}
		}
		out = append(out, o.objectRef)
	}
	return out
}

// statusQueues carry status reconciles to each inputKind's status reconciler (a source.Channel
// of its controller): from the compile, for the objects a snapshot changes, and from the poller,
// for those whose live data changed.
type statusQueues map[string]chan event.GenericEvent

func newStatusQueues() statusQueues {
	q := statusQueues{}
	for _, k := range inputKinds {
		// A full buffer blocks the sender until the controller takes events, never drops them.
		q[k.Kind] = make(chan event.GenericEvent, 1024)
	}
	return q
}

// enqueue queues the status reconcile of one object; false when ctx ended first.
func (q statusQueues) enqueue(ctx context.Context, kind, namespace, name string) bool {
	k, ok := kindOf(kind)
	if !ok {
		return true
	}
	obj := k.New()
	obj.SetNamespace(namespace)
	obj.SetName(name)
	select {
	case q[kind] <- event.GenericEvent{Object: obj}:
		return true
	case <-ctx.Done():
		return false
	}
}

// compileKick asks for a compile from outside the watches (a source.Channel of the compile
// controller): once when the controller starts, that is when it is elected, and from the poller
// when the count of ready proxy replicas changes. Its buffer of one is enough: a kick waiting in
// it is a compile still to come, which reads the state of its own time, so a kick sent while one
// waits adds nothing and is dropped rather than block the sender.
type compileKick chan event.GenericEvent

func newCompileKick() compileKick { return make(compileKick, 1) }

// kick asks for a compile without blocking.
func (k compileKick) kick() {
	select {
	case k <- event.GenericEvent{Object: &corev1.ConfigMap{}}:
	default:
	}
}

// compileRequest is the compile reconciler's one request: the ConfigMap it produces.
func compileRequest(o Options) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.ProxyNamespace, Name: o.ConfigMapName}}
}

// toCompile maps every event it handles to the compile request, delayed by opts.CompileDelay so
// that a burst is one compile (the queue keeps the earliest time of a request added twice).
// relevant filters the objects (nil: all).
func toCompile(opts Options, relevant func(context.Context, client.Object) bool) handler.TypedEventHandler[client.Object, reconcile.Request] {
	add := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if relevant == nil || relevant(ctx, o) {
			q.AddAfter(compileRequest(opts), opts.CompileDelay)
		}
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q)
		},
		GenericFunc: func(ctx context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(ctx, e.Object, q)
		},
	}
}

// compiledChanged passes the updates of an input object that the compile reads (the fingerprint:
// spec through the generation, and labels) and every create and delete; a status write is not one.
var compiledChanged = predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{})

// ownedObject reports whether o is the routing ConfigMap or the credentials Secret.
func ownedObject(opts Options, o client.Object) bool {
	if o.GetNamespace() != opts.ProxyNamespace {
		return false
	}
	if _, isCM := o.(*corev1.ConfigMap); isCM {
		return o.GetName() == opts.ConfigMapName
	}
	return o.GetName() == opts.CredentialsSecretName
}

// tableLookup finds a table's channels, policies and clients by name: with an index (indexTable) in
// constant time, without one (the zero value around a table) by the table's own scans. A
// snapshot looks up each of thousands of objects in two tables; scanning made it quadratic.
type tableLookup struct {
	table    *routing.Table
	channels map[string]*routing.Channel
	policies map[types.NamespacedName]*routing.Policy
	clients  map[types.NamespacedName]*routing.Client
}

func indexTable(t *routing.Table) tableLookup {
	l := tableLookup{table: t}
	if t == nil {
		return l
	}
	l.channels = make(map[string]*routing.Channel, len(t.Channels))
	for i := range t.Channels {
		l.channels[t.Channels[i].ID()] = &t.Channels[i]
	}
	l.policies = make(map[types.NamespacedName]*routing.Policy, len(t.Policies))
	for i := range t.Policies {
		l.policies[types.NamespacedName{Namespace: t.Policies[i].Namespace, Name: t.Policies[i].Name}] = &t.Policies[i]
	}
	l.clients = make(map[types.NamespacedName]*routing.Client, len(t.Clients))
	for i := range t.Clients {
		l.clients[types.NamespacedName{Namespace: t.Clients[i].Namespace, Name: t.Clients[i].Name}] = &t.Clients[i]
	}
	return l
}

func (l tableLookup) channel(id string) (*routing.Channel, bool) {
	if l.channels == nil {
		if l.table == nil {
			return nil, false
		}
		return l.table.Channel(id)
	}
	c, ok := l.channels[id]
	return c, ok
}

func (l tableLookup) policy(namespace, name string) (*routing.Policy, bool) {
	if l.policies == nil {
		return l.table.Policy(namespace, name)
	}
	p, ok := l.policies[types.NamespacedName{Namespace: namespace, Name: name}]
	return p, ok
}

func (l tableLookup) client(namespace, name string) (*routing.Client, bool) {
	if l.clients == nil {
		if l.table == nil {
			return nil, false
		}
		c := findClient(l.table, namespace, name)
		return c, c != nil
	}
	c, ok := l.clients[types.NamespacedName{Namespace: namespace, Name: name}]
	return c, ok
}
