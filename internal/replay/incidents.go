package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Incident is a known real outage of a channel (for one model, or for all its models when Model
// is empty).
type Incident struct {
	Channel string
	Model   string
	Start   time.Time
	End     time.Time
	Line    int64
}

// ParseIncidents reads incidents as JSON Lines: {"channel":…, "model":…, "start":…, "end":…},
// with RFC 3339 times. Blank lines and lines starting with # are skipped. Bad lines are errors:
// the file is short and written by hand, so a typo must not silently drop an outage.
func ParseIncidents(r io.Reader) ([]Incident, error) {
	lr := newLineReader(r)
	out := []Incident{}
	var errs []error
	for {
		line, tooLong, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("failed to read incidents: %w", err)
		}
		if tooLong {
			errs = append(errs, fmt.Errorf("line %d: too long", lr.n))
			continue
		}
		s := strings.TrimSpace(string(line))
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		var v struct {
			Channel string    `json:"channel"`
			Model   string    `json:"model"`
			Start   time.Time `json:"start"`
			End     time.Time `json:"end"`
		}
		dec := json.NewDecoder(strings.NewReader(s))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", lr.n, err))
			continue
		}
		switch {
		case v.Channel == "":
			errs = append(errs, fmt.Errorf("line %d: missing \"channel\"", lr.n))
		case v.Start.IsZero() || v.End.IsZero():
			errs = append(errs, fmt.Errorf("line %d: missing \"start\" or \"end\"", lr.n))
		case !v.End.After(v.Start):
			errs = append(errs, fmt.Errorf("line %d: \"end\" must be after \"start\"", lr.n))
		default:
			out = append(out, Incident{Channel: v.Channel, Model: v.Model, Start: v.Start.UTC(), End: v.End.UTC(), Line: lr.n})
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid incidents file: %w", errors.Join(errs...))
	}
	return out, nil
}

// IncidentReport scores the policy against known outages.
type IncidentReport struct {
	// Total counts incident × model pairs (an incident without a model counts once per model
	// of its channel).
	Total          int     `json:"total"`
	Detected       int     `json:"detected"`
	Missed         int     `json:"missed"`
	FalseEjections int     `json:"falseEjections"`
	DelayP50       float64 `json:"detectionDelayP50Seconds"`
	DelayP95       float64 `json:"detectionDelayP95Seconds"`
	DelayMax       float64 `json:"detectionDelayMaxSeconds"`
	// Unknown lists incidents whose channel (or channel × model) the policy does not route.
	Unknown []string         `json:"unknown"`
	Items   []IncidentResult `json:"items"`
	False   []FalseEjection  `json:"falseEjectionList"`
}

// IncidentResult is one incident on one channel×model.
type IncidentResult struct {
	Channel  string `json:"channel"`
	Model    string `json:"model"`
	Start    string `json:"start"`
	End      string `json:"end"`
	Detected bool   `json:"detected"`
	// EjectedAt is the first ejection within the incident; empty when the channel was already out
	// of rotation at its start (then the delay is 0) or when it was missed.
	EjectedAt    string  `json:"ejectedAt,omitempty"`
	DelaySeconds float64 `json:"detectionDelaySeconds"`
	Reason       string  `json:"reason,omitempty"`
	Message      string  `json:"message,omitempty"`
	// OutOfRotationSeconds is how long the channel was out of rotation during the incident.
	OutOfRotationSeconds float64 `json:"outOfRotationSeconds"`
}

// FalseEjection is an ejection outside every known incident of its channel×model.
type FalseEjection struct {
	Channel string `json:"channel"`
	Model   string `json:"model"`
	At      string `json:"at"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// scoreIncidents: an incident is detected when the channel×model is ejected between its start
// and its end, or is already out of rotation at its start (delay 0); the delay is the first such
// ejection's time minus the start. An ejection is false when it lies outside every incident of its
// channel×model, each extended by the policy's window after its end (the window still holds the
// incident's failures for that long).
func (r *replayer) scoreIncidents() *IncidentReport {
	ir := &IncidentReport{Unknown: []string{}, Items: []IncidentResult{}, False: []FalseEjection{}}
	type span struct{ from, to int64 }
	spans := make([][]span, len(r.keys))
	var delays []float64
	for _, inc := range r.opts.Incidents {
		var keys []int32
		if inc.Model == "" {
			for _, mi := range sortedModels(r.byName[inc.Channel]) {
				keys = append(keys, r.byName[inc.Channel][mi])
			}
		} else if k, ok := r.byName[inc.Channel][inc.Model]; ok {
			keys = append(keys, k)
		}
		if len(keys) == 0 {
			ir.Unknown = append(ir.Unknown, fmt.Sprintf("line %d: channel %q model %q is not routed by the policy", inc.Line, inc.Channel, inc.Model))
			continue
		}
		s, e := inc.Start.UnixNano(), inc.End.UnixNano()
		for _, ki := range keys {
			ks := r.keys[ki]
			win := int64(r.setup.Models[ks.model].Settings.Window)
			spans[ki] = append(spans[ki], span{s, e + win})
			res := IncidentResult{Channel: ks.key.Channel, Model: ks.key.Model, Start: formatTS(s), End: formatTS(e)}
			for _, iv := range ks.out {
				if iv.from < s && iv.to > s {
					res.Detected = true
				}
				if lo, hi := max(iv.from, s), min(iv.to, e); hi > lo {
					res.OutOfRotationSeconds += float64(hi-lo) / 1e9
				}
			}
			res.OutOfRotationSeconds = math.Round(res.OutOfRotationSeconds*1000) / 1000
			if !res.Detected {
				for _, ej := range ks.ejections {
					if ej.at >= s && ej.at <= e {
						res.Detected, res.EjectedAt, res.Reason, res.Message = true, formatTS(ej.at), ej.reason, ej.message
						res.DelaySeconds = seconds(ej.at - s)
						break
					}
				}
			}
			ir.Total++
			if res.Detected {
				ir.Detected++
				delays = append(delays, res.DelaySeconds)
			} else {
				ir.Missed++
			}
			ir.Items = append(ir.Items, res)
		}
	}
	for mi := range r.setup.Models {
		for _, ki := range r.modelKey[mi] {
			ks := r.keys[ki]
			for _, ej := range ks.ejections {
				inside := false
				for _, sp := range spans[ki] {
					if ej.at >= sp.from && ej.at <= sp.to {
						inside = true
						break
					}
				}
				if !inside {
					ir.False = append(ir.False, FalseEjection{Channel: ks.key.Channel, Model: ks.key.Model,
						At: formatTS(ej.at), Reason: ej.reason, Message: ej.message})
				}
			}
		}
	}
	ir.FalseEjections = len(ir.False)
	if len(delays) > 0 {
		slices.Sort(delays)
		ir.DelayP50, ir.DelayP95, ir.DelayMax = quantile(delays, 50), quantile(delays, 95), delays[len(delays)-1]
	}
	return ir
}

// quantile is the nearest-rank percentile of sorted values.
func quantile(sorted []float64, p int) float64 {
	rank := (len(sorted)*p + 99) / 100
	return sorted[max(rank, 1)-1]
}

func sortedModels(m map[string]int32) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
