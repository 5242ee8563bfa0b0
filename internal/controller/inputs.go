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
// A new kind (a GatewayClient, say) is one entry in inputKinds, once routing.Inputs carries it and
// routing.Compile reports its problems under its Kind; its status reconciler reads the snapshot
// (see statusFromSnapshot) and is registered in Setup with the kind's queue.
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
