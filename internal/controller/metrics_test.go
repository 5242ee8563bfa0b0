package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchyard-io/switchyard/internal/routing"
)

// A GatewayClient with a problem is left out of the table (its callers get 401): it counts as
// not served, once however many problems it has, and the count falls back to 0 once it is fixed.
func TestNotServedCountsClientsLeftOut(t *testing.T) {
	held := []routing.Held{
		{Kind: "ProviderChannel", Namespace: "a", Name: "c1", Served: routing.ServedLastGood},
		{Kind: "RoutingPolicy", Namespace: "a", Name: "p1"},
	}
	problems := []routing.Problem{
		{Kind: "GatewayClient", Namespace: "team", Name: "search", Reason: routing.ReasonSecretNotFound},
		{Kind: "GatewayClient", Namespace: "team", Name: "search", Reason: routing.ReasonInvalidSpec},
		{Kind: "GatewayClient", Namespace: "team", Name: "batch", Reason: routing.ReasonKeyConflict},
	}
	recordNotServed(held, problems)
	for _, c := range []struct {
		kind, state string
		want        float64
	}{
		{"ProviderChannel", "last_good", 1}, {"RoutingPolicy", "left_out", 1},
		{"GatewayClient", "left_out", 2}, {"GatewayClient", "last_good", 0},
	} {
		if got := testutil.ToFloat64(objectsNotServed.WithLabelValues(c.kind, c.state)); got != c.want {
			t.Errorf("%s %s = %v, want %v", c.kind, c.state, got, c.want)
		}
	}
	recordNotServed(nil, nil)
	if got := testutil.ToFloat64(objectsNotServed.WithLabelValues("GatewayClient", "left_out")); got != 0 {
		t.Errorf("after the fix, GatewayClient left_out = %v, want 0", got)
	}
}
