package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/adminapi"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// GatewayClients in the published table: the compile-input part (gatherClients,
// clientsFingerprint, compileClientsInto) is what Publisher.Sync calls; the rest is the
// GatewayClient reconciler, which publishes through the same Publisher and writes status.

// keysSecretRefIndex indexes GatewayClients by the Secret holding their keys.
const keysSecretRefIndex = "spec.keysSecretRef.name"

// clientStatusRefresh is how often a GatewayClient's status picks up the replicas' usage figures
// (requestsToday, tokensToday, lastUsed) and their Programmed state when nothing else changed.
const clientStatusRefresh = 30 * time.Second

// gatherClients adds the watched GatewayClients and their keys Secrets to in; seen collects the
// Secrets whose data the Publisher keeps.
func (p *Publisher) gatherClients(ctx context.Context, in *routing.Inputs, seen map[client.ObjectKey]bool) error {
	for _, ns := range namespacesOrAll(p.opts.WatchNamespaces) {
		var list v1alpha1.GatewayClientList
		if err := p.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return fmt.Errorf("failed to list GatewayClients: %w", err)
		}
		in.Clients = append(in.Clients, list.Items...)
	}
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

// clientsFingerprint adds what CompileClients reads to the Publisher's fingerprint: each client's
// identity and generation (its keys Secret's resourceVersion is in fingerprint already) and the
// replica count the limits are shared by.
func clientsFingerprint(in routing.Inputs, replicas int) string {
	if len(in.Clients) == 0 {
		return ""
	}
	h := sha256.New()
	for i := range in.Clients {
		m := &in.Clients[i].ObjectMeta
		fmt.Fprintf(h, "GatewayClient\x00%s\x00%s\x00%s\x00%d\x00", m.Namespace, m.Name, m.UID, m.Generation)
	}
	fmt.Fprintf(h, "replicas\x00%d", replicas)
	return "/clients:" + hex.EncodeToString(h.Sum(nil))
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

// ClientReconciler publishes the config (a client's keys are in it, as hashes) and writes a
// GatewayClient's status: conditions from the compile and the replicas, usage from the replicas.
type ClientReconciler struct {
	reconcilerBase
}

// Reconcile publishes, computes the status with pure functions and writes it once.
func (r *ClientReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !r.watched(req.Namespace) {
		return reconcile.Result{}, nil
	}
	// Publish first, also for a deleted client: its keys must stop working.
	res, err := r.publisher.Sync(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	gc := &v1alpha1.GatewayClient{}
	if err := r.client.Get(ctx, req.NamespacedName, gc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !gc.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	now := r.opts.Clock.Now()
	live := r.live.View()
	compiled := clientCompiledCondition(gc, res)
	view := &SyncResult{Compiled: res.Compiled, Problems: res.ClientProblems, Published: res.Published}
	conds := conditionsFor("GatewayClient", gc.Namespace, gc.Name, gc.Generation, compiled, view, live, r.monitored(), gc.Status.Conditions)
	status := clientStatus(gc, conds, res.Published, live, now)
	for _, e := range readyEvents(gc.Status.Conditions, compiled, gc.ResourceVersion, now) {
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

// untilClientChange is when the status must be looked at again: at expiresAt (Ready stays, but
// the proxies refuse the client from then on, and the printer column shows it), and every
// clientStatusRefresh for the usage figures.
func untilClientChange(gc *v1alpha1.GatewayClient, now time.Time) time.Duration {
	d := clientStatusRefresh
	if e := gc.Spec.ExpiresAt; e != nil && e.After(now) {
		d = min(d, e.Sub(now)+100*time.Millisecond)
	}
	return d
}

// clientCompiledCondition is the client's compile verdict: its problem, or whether the published
// table holds its compiled form (the Ready condition before the replicas are asked).
func clientCompiledCondition(gc *v1alpha1.GatewayClient, res *SyncResult) metav1.Condition {
	if ps := problemsFor(res.ClientProblems, "GatewayClient", gc.Namespace, gc.Name); len(ps) > 0 {
		msgs := make([]string, len(ps))
		for i, p := range ps {
			msgs[i] = p.String()
		}
		return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: ps[0].Reason,
			Message: strings.Join(msgs, "; ") + "; the client is left out of the proxy config (its keys are refused) until fixed"}
	}
	if publishedClient(res, gc.Namespace, gc.Name) {
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
	want, got := findClient(res.Compiled, namespace, name), findClient(res.Published, namespace, name)
	return want != nil && got != nil && sameJSON(want, got)
}

func findClient(t *routing.Table, namespace, name string) *routing.Client {
	for i := range t.Clients {
		if t.Clients[i].Namespace == namespace && t.Clients[i].Name == name {
			return &t.Clients[i]
		}
	}
	return nil
}

// clientStatus is the status to write: pure over its inputs. Usage figures keep their last values
// while no replica is polled (a controller restart must not zero the day's counts in status).
func clientStatus(gc *v1alpha1.GatewayClient, conds objectConditions, published *routing.Table, live liveView, now time.Time) v1alpha1.GatewayClientStatus {
	st := v1alpha1.GatewayClientStatus{Conditions: cloneConditions(gc.Status.Conditions), ObservedGeneration: gc.Generation}
	for _, c := range []metav1.Condition{conds.Accepted, conds.Programmed, conds.Ready} {
		c.ObservedGeneration = gc.Generation
		meta.SetStatusCondition(&st.Conditions, c)
	}
	if published != nil {
		if c := findClient(published, gc.Namespace, gc.Name); c != nil {
			st.Keys = int32(len(c.KeyHashes))
		}
	}
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

// setupClients registers the GatewayClient reconciler.
func setupClients(ctx context.Context, mgr ctrl.Manager, base reconcilerBase, owned predicate.Predicate) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v1alpha1.GatewayClient{}, keysSecretRefIndex, func(o client.Object) []string {
		return []string{o.(*v1alpha1.GatewayClient).Spec.KeysSecretRef.Name}
	}); err != nil {
		return fmt.Errorf("failed to index GatewayClients by Secret: %w", err)
	}
	r := &ClientReconciler{reconcilerBase: base}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("gatewayclient").
		For(&v1alpha1.GatewayClient{}).
		// A key added to or removed from the Secret is a rotation: publish at once.
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.clientsForSecret)).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.allClients), builder.WithPredicates(owned)).
		Complete(r); err != nil {
		return fmt.Errorf("failed to set up the GatewayClient controller: %w", err)
	}
	return nil
}

func (r *ClientReconciler) clientsForSecret(ctx context.Context, o client.Object) []reconcile.Request {
	if !r.watched(o.GetNamespace()) {
		return nil
	}
	var list v1alpha1.GatewayClientList
	if err := r.client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{keysSecretRefIndex: o.GetName()}); err != nil {
		return nil
	}
	return requests(list.Items, func(gc *v1alpha1.GatewayClient) types.NamespacedName {
		return types.NamespacedName{Namespace: gc.Namespace, Name: gc.Name}
	})
}

func (r *ClientReconciler) allClients(ctx context.Context, _ client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, ns := range namespacesOrAll(r.opts.WatchNamespaces) {
		var list v1alpha1.GatewayClientList
		if err := r.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return out
		}
		out = append(out, requests(list.Items, func(gc *v1alpha1.GatewayClient) types.NamespacedName {
			return types.NamespacedName{Namespace: gc.Namespace, Name: gc.Name}
		})...)
	}
	return out
}
