package controller

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/switchyard-io/switchyard/api/v1alpha1"
	"github.com/switchyard-io/switchyard/internal/routing"
)

// inputKind is one kind of object the routing table is compiled from, with a status that reports
// its compile. Everything the controller does per kind on the compile side reads this list: the
// compile reconciler's watches (Setup), the objects gathered (Publisher.gather), the fingerprint
// of the memo, the per-object verdicts a snapshot holds and the objects re-queued when they
// change, and the objects-not-served metric.
//
// A new kind is one entry in inputKinds, once routing.Inputs carries it and the compile reports its
// problems under its Kind; its status reconciler embeds statusBase, starts with
// `snap, v, ok := r.compiled(kind, obj)` and is registered in Setup with the kind's queue
// (WatchesRawSource(source.Channel(queues[kind], ...))). GatewayClient is the example of a kind
// compiled on its own (routing.CompileClients): its problems are apart and hold nothing back, so
// it sets Problems and Compiled.
type inputKind struct {
	// Kind is the kind as routing names it (routing.Problem.Kind, routing.ObjectKey).
	Kind string
	// New returns an empty object of the kind (the compile's watch, the status queue's events).
	New func() client.Object
	// List appends the kind's objects in namespace ns ("" for all) from c to in.
	List func(ctx context.Context, c client.Reader, ns string, in *routing.Inputs) error
	// Objects are the kind's objects in in.
	Objects func(in *routing.Inputs) []metav1.Object
	// AsCompiled reports whether the object's compiled form is exactly what is published.
	AsCompiled func(res *SyncResult, namespace, name string) bool
	// Published (optional) is what else the kind's status reads of the published table, in a
	// form reflect.DeepEqual compares: a new compile queues the object when it changes.
	Published func(res *SyncResult, namespace, name string) any
	// Problems (optional) are where the kind's problems are in a result (default res.Problems,
	// those of routing.Compile, which may hold publishing back).
	Problems func(res *SyncResult) []routing.Problem
	// Compiled (optional) is the kind's Ready verdict of a compile (default readyCondition).
	Compiled func(res *SyncResult, namespace, name string) metav1.Condition
}

// problems are the kind's problems in res.
func (k inputKind) problems(res *SyncResult) []routing.Problem {
	if k.Problems != nil {
		return k.Problems(res)
	}
	return res.Problems
}

// kindProblems are a kind's problems in res (nil for a kind not in inputKinds).
func kindProblems(kind string, res *SyncResult) []routing.Problem {
	k, ok := kindOf(kind)
	if !ok {
		return nil
	}
	return k.problems(res)
}

// compiled is the object's Ready verdict of res: problems, held back, or compiled into the
// published config.
func (k inputKind) compiled(res *SyncResult, namespace, name string) metav1.Condition {
	if k.Compiled != nil {
		return k.Compiled(res, namespace, name)
	}
	return readyCondition(k.Kind, namespace, name, res)
}

// inputKinds are the kinds compiled into the table, in the order the fingerprint reads them.
var inputKinds = []inputKind{
	{
		Kind: "ProviderChannel",
		New:  func() client.Object { return &v1alpha1.ProviderChannel{} },
		List: func(ctx context.Context, c client.Reader, ns string, in *routing.Inputs) error {
			var list v1alpha1.ProviderChannelList
			if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("failed to list ProviderChannels: %w", err)
			}
			in.Channels = append(in.Channels, list.Items...)
			return nil
		},
		Objects: func(in *routing.Inputs) []metav1.Object { return metas(in.Channels) },
		AsCompiled: func(res *SyncResult, namespace, name string) bool {
			id := routing.ChannelID(namespace, name)
			want, ok := res.compiled().channel(id)
			got, ok2 := res.published().channel(id)
			// The same entry when the compile is what is published (nothing held back).
			if !ok || !ok2 || (want != got && !sameJSON(want, got)) {
				return false
			}
			wk, wok := res.Compiled.Credentials[id]
			gk, gok := res.Published.Credentials[id]
			return wok == gok && wk.Reveal() == gk.Reveal()
		},
	},
	{
		Kind: "RoutingPolicy",
		New:  func() client.Object { return &v1alpha1.RoutingPolicy{} },
		List: func(ctx context.Context, c client.Reader, ns string, in *routing.Inputs) error {
			var list v1alpha1.RoutingPolicyList
			if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("failed to list RoutingPolicies: %w", err)
			}
			in.Policies = append(in.Policies, list.Items...)
			return nil
		},
		Objects: func(in *routing.Inputs) []metav1.Object { return metas(in.Policies) },
		AsCompiled: func(res *SyncResult, namespace, name string) bool {
			want, ok := res.compiled().policy(namespace, name)
			got, ok2 := res.published().policy(namespace, name)
			return ok && ok2 && (want == got || sameJSON(want, got))
		},
		// The status rows: which channel × model pairs the published policy routes.
		Published: func(res *SyncResult, namespace, name string) any {
			rows, ok := policyRows(res.published(), namespace, name)
			return publishedRows{rows, ok}
		},
	},
	{
		// Compiled apart from the channels and policies (compileClientsInto): a client with a
		// problem is left out and holds nothing back, and clients are published as compiled
		// even while other objects' problems hold the rest back.
		Kind: "GatewayClient",
		New:  func() client.Object { return &v1alpha1.GatewayClient{} },
		List: func(ctx context.Context, c client.Reader, ns string, in *routing.Inputs) error {
			var list v1alpha1.GatewayClientList
			if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("failed to list GatewayClients: %w", err)
			}
			in.Clients = append(in.Clients, list.Items...)
			return nil
		},
		Objects:    func(in *routing.Inputs) []metav1.Object { return metas(in.Clients) },
		AsCompiled: publishedClient,
		// status.keys: how many keys the published client accepts.
		Published: func(res *SyncResult, namespace, name string) any {
			if c, ok := res.published().client(namespace, name); ok {
				return int32(len(c.KeyHashes))
			}
			return int32(0)
		},
		Problems: func(res *SyncResult) []routing.Problem { return res.ClientProblems },
		Compiled: clientCompiledCondition,
	},
}

// kindOf returns the entry of a kind.
func kindOf(kind string) (inputKind, bool) {
	for _, k := range inputKinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return inputKind{}, false
}

// metas are pointers to the objects of a slice, as metav1.Object.
func metas[T any, PT interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = PT(&items[i])
	}
	return out
}

// publishedRows are a policy's status rows before the channels' figures, and whether it is
// published at all.
type publishedRows struct {
	Rows      []v1alpha1.PolicyChannelStatus
	Published bool
}
