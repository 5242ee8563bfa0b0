package demo

import (
	"fmt"
	"io"
	"maps"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one line of the Prometheus text exposition format: a metric name, its labels and
// its value (timestamps are ignored).
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics is a scrape of /metrics.
type Metrics []Sample

// ParseMetrics reads the Prometheus text exposition format (what promhttp serves without
// content negotiation) with the Prometheus library's own parser, into one Sample per line of the
// format: a histogram gives its _bucket (with le), _sum and _count samples, a summary its
// quantiles, _sum and _count. A malformed exposition is an error that names the line.
func ParseMetrics(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	var out Metrics
	for _, name := range names {
		for _, m := range fams[name].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			add := func(suffix string, v float64, extra ...string) {
				ls := labels
				if len(extra) == 2 {
					ls = maps.Clone(labels)
					ls[extra[0]] = extra[1]
				}
				out = append(out, Sample{Name: name + suffix, Labels: ls, Value: v})
			}
			switch {
			case m.Counter != nil:
				add("", m.GetCounter().GetValue())
			case m.Gauge != nil:
				add("", m.GetGauge().GetValue())
			case m.Untyped != nil:
				add("", m.GetUntyped().GetValue())
			case m.Histogram != nil:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add("_bucket", float64(b.GetCumulativeCount()), "le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
				}
				add("_bucket", float64(h.GetSampleCount()), "le", "+Inf")
				add("_sum", h.GetSampleSum())
				add("_count", float64(h.GetSampleCount()))
			case m.Summary != nil:
				sm := m.GetSummary()
				for _, q := range sm.GetQuantile() {
					add("", q.GetValue(), "quantile", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64))
				}
				add("_sum", sm.GetSampleSum())
				add("_count", float64(sm.GetSampleCount()))
			}
		}
	}
	return out, nil
}

// matches reports whether every label in match has that value on s.
func (s Sample) matches(name string, match map[string]string) bool {
	if s.Name != name {
		return false
	}
	for k, v := range match {
		if s.Labels[k] != v {
			return false
		}
	}
	return true
}

// Sum adds the values of the samples of name whose labels include match (nil: all of them).
func (m Metrics) Sum(name string, match map[string]string) float64 {
	total := 0.0
	for _, s := range m {
		if s.matches(name, match) {
			total += s.Value
		}
	}
	return total
}

// SumBy adds the values of the samples of name whose labels include match, grouped by the
// values of the labels in by (joined with "|").
func (m Metrics) SumBy(name string, match map[string]string, by ...string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if !s.matches(name, match) {
			continue
		}
		parts := make([]string, len(by))
		for i, l := range by {
			parts[i] = s.Labels[l]
		}
		out[strings.Join(parts, "|")] += s.Value
	}
	return out
}
