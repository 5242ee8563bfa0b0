package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/switchyard-io/switchyard/internal/routing"
)

// proxyReplicas is the poller's view of the proxy replicas, on the controller's metrics endpoint
// (next to controller-runtime's own). The status of every ProviderChannel says the same in its
// ProxiesReporting condition; the metric is for the alert. Only the leader polls, so only the
// leader exports it.
var proxyReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "switchyard_controller_proxy_replicas",
	Help: "Proxy replicas the controller polls, by state: reporting (their health is in the status) or unreachable (left out of it).",
}, []string{"proxy_namespace", "state"})

// objectsNotServed counts the objects whose problem keeps their current spec out of the published
// config: served in their last good form (last_good) or not at all (left_out). The alert
// SwitchyardObjectNotServed fires when it stays above 0.
var objectsNotServed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "switchyard_controller_objects_not_served",
	Help: "ProviderChannels, RoutingPolicies and GatewayClients whose current spec is not in the published config, by kind and state (last_good: the last good form serves; left_out: not served at all — a GatewayClient's callers then get 401).",
}, []string{"kind", "state"})

func init() { ctrlmetrics.Registry.MustRegister(Collectors()...) }

// Collectors are the controller's own metrics (tests check the alerts against them).
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{proxyReplicas, objectsNotServed}
}

// recordNotServed sets objectsNotServed from one sync: the channels and policies held back, and
// the GatewayClients left out for a problem (a client is never served in a last good form: its
// callers get 401, failing closed, so it counts as left_out).
func recordNotServed(held []routing.Held, clientProblems []routing.Problem) {
	counts := map[[2]string]int{}
	for _, k := range inputKinds {
		counts[[2]string{k.Kind, "last_good"}], counts[[2]string{k.Kind, "left_out"}] = 0, 0
	}
	for _, h := range held {
		state := "left_out"
		if h.Served == routing.ServedLastGood {
			state = "last_good"
		}
		counts[[2]string{h.Kind, state}]++
	}
	left := map[string]bool{} // a client with two problems is one client
	for _, p := range clientProblems {
		if id := p.Namespace + "/" + p.Name; !left[id] {
			left[id] = true
			counts[[2]string{p.Kind, "left_out"}]++
		}
	}
	for k, n := range counts {
		objectsNotServed.WithLabelValues(k[0], k[1]).Set(float64(n))
	}
}

// recordReplicas sets the gauge from one poll.
func recordReplicas(proxyNamespace string, infos []replicaInfo) {
	reporting, unreachable := 0, 0
	for _, r := range infos {
		if r.Reachable {
			reporting++
		} else {
			unreachable++
		}
	}
	proxyReplicas.WithLabelValues(proxyNamespace, "reporting").Set(float64(reporting))
	proxyReplicas.WithLabelValues(proxyNamespace, "unreachable").Set(float64(unreachable))
}
