package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// GatewayClients in the published table: the kind is an inputKind (inputs.go), so the compile
// reconciler lists, watches and compiles it with the others; the compile-input part here
// (gatherClients, clientsFingerprint, compileClientsInto) is what Publisher.Sync adds for it. The
// rest is the GatewayClient status reconciler, which reads the snapshot and writes status.

// keysSecretRefIndex indexes GatewayClients by the Secret holding their keys.
const keysSecretRefIndex = "spec.keysSecretRef.name"

// clientStatusRefresh is the most often a client's status is rewritten for a small change of its
// use (requestsToday, tokensToday, lastUsed): a busy client's figures change on every poll, and
// a status write per client per poll would cost the API server more than the figures are worth.
// A significant change (usageNews) is written at the poll that sees it.
const clientStatusRefresh = 30 * time.Second

// gatherClients adds the keys Secrets of the GatewayClients in in (listed with the other
// inputKinds); seen collects the Secrets whose data the Publisher keeps.
func (p *Publisher) gatherClients(ctx context.Context, in *routing.Inputs, seen map[client.ObjectKey]bool) error {
	for i := range in.Clients {
		gc := &in.Clients[i]
		key := client.ObjectKey{Namespace: gc.Namespace, Name: gc.Spec.KeysSecretRef.Name}
		if key.Name == "" || seen[key] {
			continue
		}
		seen[key] = true
		if key == p.credentialsKey() {
			continue // CompileClients refuses it by name; its data is not read for a client
		}
		switch s, err := p.secrets.get(ctx, key); {
		case apierrors.IsNotFound(err):
			// CompileClients reports the missing Secret on the client.
		case err != nil:
			return fmt.Errorf("failed to get Secret %s: %w", key, err)
		default:
			in.Secrets = append(in.Secrets, *s)
		}
	}
	return nil
}

// clientsFingerprint adds to the Publisher's fingerprint what CompileClients reads beyond the
// objects (the clients and their keys Secrets are in fingerprint, as an inputKind): the replica
// count the limits are shared by, when there are clients to share them.
func clientsFingerprint(in routing.Inputs, replicas int) string {
	if len(in.Clients) == 0 {
		return ""
	}
	return fmt.Sprintf("/clients:replicas=%d", replicas)
}

// compileClientsInto compiles the clients of in into t (with the replica count, when there are
// any) and returns their problems.
func compileClientsInto(t *routing.Table, in routing.Inputs, replicas int) []routing.Problem {
	clients, problems := routing.CompileClients(in)
	t.Clients = clients
	if len(clients) > 0 {
		t.ProxyReplicas = replicas
	}
	return problems
}

// proxyReplicas is the number of ready replicas each client limit is divided among: the replicas
// the last poll reached with a config loaded, at least 1 (a controller that polls no proxy
// cannot count them, and each replica then enforces the whole limit).
func (p *Publisher) proxyReplicas() int {
	if p.replicas == nil {
		return 1
	}
	return max(p.replicas(), 1)
}

// readyReplicas counts the replicas of a view that answer and serve a config.
func readyReplicas(v liveView) int {
	n := 0
	for _, r := range v.Replicas {
		if r.Reachable && r.Hash != "" {
			n++
		}
	}
	return n
}

// clientUsage is one client's use today, summed over the replicas.
type clientUsage struct {
	Requests, Tokens int64
	LastUsed         time.Time
}

// aggregateClients sums the replicas' reports of today's use (UTC day of now) per client;
// yesterday's figures from a replica that has not served since midnight are not today's.
func aggregateClients(reports []*adminapi.ChannelsResponse, now time.Time) map[string]clientUsage {
	today := now.UTC().Format(time.DateOnly)
	var out map[string]clientUsage
	for _, r := range reports {
		for _, u := range r.Clients {
			if u.Day != today {
				continue
			}
			if out == nil {
				out = map[string]clientUsage{}
			}
			a := out[u.Client]
			a.Requests += max(u.Requests, 0)
			a.Tokens += max(u.Tokens, 0)
			if u.LastUsed != nil && u.LastUsed.After(a.LastUsed) {
				a.LastUsed = *u.LastUsed
			}
			out[u.Client] = a
		}
	}
	return out
}

// clientSent is the use of a client the poller last enqueued it for, and when.
type clientSent struct {
	usage clientUsage
	at    time.Time
}

// usageNews reports whether a client's use moved enough to be written at once: its first use,
// figures that went down (a new UTC day, a replica restarted or gone), or a big move of either
// figure (bigMove, the channels' rule for their volumes). Anything smaller waits for
// clientStatusRefresh.
func usageNews(sent, next clientUsage) bool {
	return (sent == clientUsage{}) != (next == clientUsage{}) ||
		next.Requests < sent.Requests || next.Tokens < sent.Tokens ||
		bigMove(sent.Requests, next.Requests, 10) || bigMove(sent.Tokens, next.Tokens, 1000)
}

// clientNeedsReconcile is the poller's rule for a GatewayClient (pure): reconcile it when the
// replicas came, went or changed reachability, when a replica serves another generation of it
// (Programmed), or when its use changed: at once if usageNews, else once clientStatusRefresh has
// passed since it was last enqueued. sent is what it was last enqueued with.
func clientNeedsReconcile(prev, next liveView, key string, sent clientSent, usage clientUsage, now time.Time) bool {
	if usage != sent.usage && (usageNews(sent.usage, usage) || now.Sub(sent.at) >= clientStatusRefresh) {
		return true
	}
	return replicasMoved(prev, next) || servedChanged(prev, next, key)
}

// enqueueClients is the poller's hook for GatewayClients (called on every poll): it enqueues
// those clientNeedsReconcile picks. Nothing else requeues a client for its use, so an idle one
// costs nothing between polls. It returns how many clients are watched, and false when ctx ended.
func (p *Poller) enqueueClients(ctx context.Context, prev, view liveView, now time.Time) (int, bool) {
	seen := map[string]bool{}
	for _, ns := range namespacesOrAll(p.opts.WatchNamespaces) {
		var list v1alpha1.GatewayClientList
		if err := p.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			logf.FromContext(ctx).Error(err, "Failed to list GatewayClients")
			return len(seen), true
		}
		for i := range list.Items {
			gc := &list.Items[i]
			id := routing.ChannelID(gc.Namespace, gc.Name)
			seen[id] = true
			sent := p.clientSent[id]
			usage := view.Clients[id]
			if !clientNeedsReconcile(prev, view, routing.ObjectKey("GatewayClient", gc.Namespace, gc.Name), sent, usage, now) {
				continue
			}
			// The reconcile writes the use of this view (or a later one).
			p.clientSent[id] = clientSent{usage: usage, at: now}
			if !p.queues.enqueue(ctx, "GatewayClient", gc.Namespace, gc.Name) {
				return len(seen), false
			}
		}
	}
	for id := range p.clientSent {
		if !seen[id] {
			delete(p.clientSent, id)
		}
	}
	return len(seen), true
}

// ClientReconciler writes a GatewayClient's status: conditions from the compile's snapshot and
// the replicas, usage from the replicas. Like the other status reconcilers it never compiles: the
// compile reconciler publishes a client's keys (as hashes) and drops those of a deleted client.
type ClientReconciler struct {
	statusBase
}

// Reconcile computes the status with pure functions and writes it once.
func (r *ClientReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !r.watched(req.Namespace) {
		return reconcile.Result{}, nil
	}
	gc := &v1alpha1.GatewayClient{}
	if err := r.client.Get(ctx, req.NamespacedName, gc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !gc.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	snap, v, ok := r.compiled("GatewayClient", gc)
	if !ok {
		// Not compiled at this generation yet: that compile queues the client.
		return reconcile.Result{}, nil
	}
	now := r.opts.Clock.Now()
	live := r.live.View()
	conds := conditionsFor("GatewayClient", gc.Namespace, gc.Name, gc.Generation, v.Compiled, snap.Result, live, r.monitored(), gc.Status.Conditions)
	status := clientStatus(gc, conds, v.Published.(int32), live, now)
	for _, e := range readyEvents(gc.Status.Conditions, v.Compiled, gc.ResourceVersion, now) {
		if err := r.journal.Record(ctx, gc, "GatewayClient", e); err != nil {
			return reconcile.Result{}, err
		}
	}
	if !equality.Semantic.DeepEqual(gc.Status, status) {
		orig := gc.DeepCopy()
		gc.Status = status
		if err := r.client.Status().Patch(ctx, gc, client.MergeFrom(orig)); err != nil {
			return reconcile.Result{}, fmt.Errorf("failed to update GatewayClient status: %w", err)
		}
	}
	return reconcile.Result{RequeueAfter: untilClientChange(gc, now)}, nil
}

// untilClientChange is when the status must be looked at again without news from the poller
// (0: never): at expiresAt (Ready stays, but the proxies refuse the client from then on, and the
// printer column shows it), and at the next UTC midnight while the status shows today's use (the
// figures go to 0 then, even when no replica answers to say so).
func untilClientChange(gc *v1alpha1.GatewayClient, now time.Time) time.Duration {
	var d time.Duration
	if e := gc.Spec.ExpiresAt; e != nil && e.After(now) {
		d = e.Sub(now) + 100*time.Millisecond
	}
	if gc.Status.RequestsToday != 0 || gc.Status.TokensToday != 0 {
		y, m, day := now.UTC().Date()
		midnight := time.Date(y, m, day+1, 0, 0, 0, 0, time.UTC).Sub(now) + 100*time.Millisecond
		if d == 0 || midnight < d {
			d = midnight
		}
	}
	return d
}

// clientCompiledCondition is the client's compile verdict: its problem, or whether the published
// table holds its compiled form (the Ready condition before the replicas are asked).
func clientCompiledCondition(res *SyncResult, namespace, name string) metav1.Condition {
	if ps := problemsFor(res.ClientProblems, "GatewayClient", namespace, name); len(ps) > 0 {
		msgs := make([]string, len(ps))
		for i, p := range ps {
			msgs[i] = p.String()
		}
		return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: ps[0].Reason,
			Message: strings.Join(msgs, "; ") + "; the client is left out of the proxy config (its keys are refused) until fixed"}
	}
	if publishedClient(res, namespace, name) {
		return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonCompiled,
			Message: "compiled into the proxy config"}
	}
	return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonConfigHeldBack,
		Message: "not in the proxy config yet"}
}

// publishedClient reports whether the published table holds the client as compiled.
func publishedClient(res *SyncResult, namespace, name string) bool {
	if res.Published == nil || res.Compiled == nil {
		return false
	}
	want, ok := res.compiled().client(namespace, name)
	got, ok2 := res.published().client(namespace, name)
	// The same entry when the compile is what is published (nothing held back).
	return ok && ok2 && (want == got || sameJSON(want, got))
}

func findClient(t *routing.Table, namespace, name string) *routing.Client {
	for i := range t.Clients {
		if t.Clients[i].Namespace == namespace && t.Clients[i].Name == name {
			return &t.Clients[i]
		}
	}
	return nil
}

// clientStatus is the status to write: pure over its inputs (keys: how many keys the published
// client accepts). Usage figures keep their last values while no replica is polled (a controller
// restart must not zero the day's counts in status).
func clientStatus(gc *v1alpha1.GatewayClient, conds objectConditions, keys int32, live liveView, now time.Time) v1alpha1.GatewayClientStatus {
	st := v1alpha1.GatewayClientStatus{Conditions: cloneConditions(gc.Status.Conditions), ObservedGeneration: gc.Generation}
	for _, c := range []metav1.Condition{conds.Accepted, conds.Programmed, conds.Ready} {
		c.ObservedGeneration = gc.Generation
		meta.SetStatusCondition(&st.Conditions, c)
	}
	st.Keys = keys
	st.RequestsToday, st.TokensToday, st.LastUsed = gc.Status.RequestsToday, gc.Status.TokensToday, gc.Status.LastUsed
	if last := gc.Status.LastUsed; last != nil && last.UTC().Format(time.DateOnly) != now.UTC().Format(time.DateOnly) {
		st.RequestsToday, st.TokensToday = 0, 0 // a new day, whatever the replicas say
	}
	if live.Polled && readyReplicas(live) > 0 {
		u := live.Clients[routing.ChannelID(gc.Namespace, gc.Name)]
		st.RequestsToday, st.TokensToday = u.Requests, u.Tokens
		if !u.LastUsed.IsZero() && (st.LastUsed == nil || u.LastUsed.After(st.LastUsed.Time)) {
			st.LastUsed = &metav1.Time{Time: u.LastUsed.UTC().Truncate(time.Second)}
		}
	}
	return st
}

func cloneConditions(c []metav1.Condition) []metav1.Condition {
	if c == nil {
		return nil
	}
	return append([]metav1.Condition(nil), c...)
}

// setupClients registers the GatewayClient status reconciler: queued by the compile (the clients
// whose verdict a snapshot changes) and by the poller (their use, the generation served).
func setupClients(mgr ctrl.Manager, base statusBase, queue <-chan event.GenericEvent) error {
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("gatewayclient").
		For(&v1alpha1.GatewayClient{}).
		WatchesRawSource(source.Channel(queue, &handler.EnqueueRequestForObject{})).
		Complete(&ClientReconciler{statusBase: base}); err != nil {
		return fmt.Errorf("failed to set up the GatewayClient controller: %w", err)
	}
	return nil
}
