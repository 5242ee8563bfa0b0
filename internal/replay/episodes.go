package replay

import (
	"time"

	"github.com/switchyard-io/switchyard/internal/health"
)

// Episode is one ejection of a channel×model and what followed it until the next one.
type Episode struct {
	Channel   string
	Model     string
	EjectedAt time.Time
	Reason    string
	Message   string
	// BackAt is when the key left Ejected and Probing (its ramp began); zero when it was still
	// out of rotation at the end of the log.
	BackAt time.Time
	// HealthyAt is when it was Healthy again, at full traffic, before any next ejection; zero
	// when it never was (re-ejected during the ramp, or the log ended first).
	HealthyAt time.Time
}

// Episodes collects the ejections of every channel×model from a replay's transitions. Unlike the
// report's events it is not capped: a month of a flapping policy keeps every ejection.
type Episodes struct {
	byKey map[health.Key][]Episode
	keys  []health.Key // first-ejection order, for a stable listing
}

// Add takes one transition in journal order.
func (e *Episodes) Add(t Transition) {
	k := health.Key{Channel: t.Channel, Model: t.Model}
	if t.IsEjection() {
		if e.byKey == nil {
			e.byKey = map[health.Key][]Episode{}
		}
		if _, seen := e.byKey[k]; !seen {
			e.keys = append(e.keys, k)
		}
		e.byKey[k] = append(e.byKey[k], Episode{Channel: t.Channel, Model: t.Model, EjectedAt: t.At, Reason: t.Reason, Message: t.Message})
		return
	}
	eps := e.byKey[k]
	if len(eps) == 0 {
		return
	}
	last := &eps[len(eps)-1]
	out := func(p health.Phase) bool { return p == health.PhaseEjected || p == health.PhaseProbing }
	if last.BackAt.IsZero() && out(t.From) && !out(t.To) {
		last.BackAt = t.At
	}
	if last.HealthyAt.IsZero() && !last.BackAt.IsZero() && t.To == health.PhaseHealthy {
		last.HealthyAt = t.At
	}
}

// Of returns the ejections of one channel×model, oldest first.
func (e *Episodes) Of(channel, model string) []Episode {
	return e.byKey[health.Key{Channel: channel, Model: model}]
}

// Count is the number of ejections of every key.
func (e *Episodes) Count() int {
	n := 0
	for _, eps := range e.byKey {
		n += len(eps)
	}
	return n
}
