package demo

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
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
// content negotiation). Comments and blank lines are skipped; a malformed line is an error that
// names it.
func ParseMetrics(r io.Reader) (Metrics, error) {
	var out Metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w: %q", n, err, line)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSample(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		var err error
		rest, err = parseLabels(rest[1:], s.Labels)
		if err != nil {
			return s, err
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 || len(fields) > 2 {
		return s, fmt.Errorf("want a value and an optional timestamp")
	}
	v, err := parseValue(fields[0])
	if err != nil {
		return s, err
	}
	s.Value = v
	return s, nil
}

// parseLabels reads `name="value",...}` into into and returns what follows the closing brace.
func parseLabels(s string, into map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " \t")
		if strings.HasPrefix(s, "}") {
			return s[1:], nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return "", fmt.Errorf("bad label")
		}
		name := strings.TrimSpace(s[:eq])
		s = strings.TrimLeft(s[eq+1:], " \t")
		if !strings.HasPrefix(s, `"`) {
			return "", fmt.Errorf("label %s: value not quoted", name)
		}
		var b strings.Builder
		j := 1
		closed := false
		for ; j < len(s); j++ {
			c := s[j]
			if c == '\\' && j+1 < len(s) {
				j++
				switch s[j] {
				case 'n':
					b.WriteByte('\n')
				default: // \\ and \"
					b.WriteByte(s[j])
				}
				continue
			}
			if c == '"' {
				closed = true
				break
			}
			b.WriteByte(c)
		}
		if !closed {
			return "", fmt.Errorf("label %s: unterminated value", name)
		}
		into[name] = b.String()
		s = strings.TrimLeft(s[j+1:], " \t")
		switch {
		case strings.HasPrefix(s, ","):
			s = s[1:]
		case strings.HasPrefix(s, "}"):
		default:
			return "", fmt.Errorf("label %s: want , or }", name)
		}
	}
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf", "Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("bad value %q", s)
	}
	return v, nil
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
