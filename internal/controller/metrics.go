package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// proxyReplicas is the poller's view of the proxy replicas, on the controller's metrics endpoint
// (next to controller-runtime's own). The status of every ProviderChannel says the same in its
// ProxiesReporting condition; the metric is for the alert. Only the leader polls, so only the
// leader exports it.
var proxyReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "switchyard_controller_proxy_replicas",
	Help: "Proxy replicas the controller polls, by state: reporting (their health is in the status) or unreachable (left out of it).",
}, []string{"proxy_namespace", "state"})

func init() { ctrlmetrics.Registry.MustRegister(Collectors()...) }

// Collectors are the controller's own metrics (tests check the alerts against them).
func Collectors() []prometheus.Collector { return []prometheus.Collector{proxyReplicas} }

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
