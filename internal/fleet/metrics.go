package fleet

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the fleet link's metrics (contract: switchyard_fleet_*).
type Metrics struct {
	Connected    prometheus.Gauge
	SyncDuration prometheus.Histogram
	SyncErrors   prometheus.Counter
	Replicas     prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_fleet_connected", Help: "1 while this replica shares evidence and verdicts through the fleet store (--fleet-redis); 0 while it runs on its local evidence alone.",
		}),
		SyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "switchyard_fleet_sync_duration_seconds", Help: "Duration of one exchange with the fleet store (one round trip), failed ones included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
		SyncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_fleet_sync_errors_total", Help: "Exchanges with the fleet store that failed (timeout, connection, server error).",
		}),
		Replicas: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_fleet_replicas", Help: "Replicas that synced with the fleet store in the last liveness window, this one included; 0 in local mode.",
		}),
	}
	reg.MustRegister(m.Connected, m.SyncDuration, m.SyncErrors, m.Replicas)
	return m
}
