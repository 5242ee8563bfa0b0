package proxy

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/routing"
	"github.com/switchyard-io/switchyard/internal/routing/routingtest"
)

// TestSeriesAtScale counts the series one idle proxy exports with the benchmarked scale applied
// (1,000 channels × 5 models, 5,000 keys): the health gauges are three per key (score, traffic,
// and the phase, exported only for the current phase), so a Prometheus scraping 200 replicas
// stores 3 million series for them, not 9 million (docs/fleet.md, "Metrics at scale").
func TestSeriesAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 5,000-key proxy")
	}
	tbl, problems := routing.Compile(routingtest.ScaleInputs("llm"))
	if len(routing.Blocking(problems)) > 0 {
		t.Fatal(problems)
	}
	s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.Apply(tbl, "routingtest")
	s.Step(context.Background())
	fams, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	keys := len(s.Engine().Status(s.clock.Now()))
	total, health := 0, 0
	per := map[string]int{}
	for _, f := range fams {
		n := len(f.GetMetric())
		if f.GetType().String() == "HISTOGRAM" {
			n = 0
			for _, m := range f.GetMetric() {
				n += len(m.GetHistogram().GetBucket()) + 3 // the buckets, +Inf, _sum and _count
			}
		}
		total += n
		per[f.GetName()] = n
		if strings.HasPrefix(f.GetName(), "switchyard_channel_") {
			health += n
		}
	}
	t.Logf("%d keys: %d series in all, %d of them health gauges (phase %d, score %d, traffic %d)", keys, total, health,
		per["switchyard_channel_phase"], per["switchyard_channel_health_score"], per["switchyard_channel_traffic_percent"])
	if keys != 5000 {
		t.Fatalf("%d keys, want the benchmarked 5,000", keys)
	}
	if got := per["switchyard_channel_phase"]; got != keys {
		t.Errorf("%d phase series for %d keys, want one per key (the current phase)", got, keys)
	}
	if health > 3*keys {
		t.Errorf("%d health series for %d keys, want at most 3 per key", health, keys)
	}
}
