package health

import (
	"testing"
	"time"
)

// t0 is the start of every scenario; tests set every timestamp explicitly and never sleep.
var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

var (
	kA = Key{Channel: "openai-direct", Model: "gpt-4o"}
	kB = Key{Channel: "azure-eastus", Model: "gpt-4o"}
	kC = Key{Channel: "reseller", Model: "gpt-4o"}
)

func chat() Settings { return DefaultSettings("chat") }

func newEngine(t testing.TB, set Settings, keys ...Key) *Engine {
	t.Helper()
	if err := set.Validate(); err != nil {
		t.Fatalf("invalid test settings: %v", err)
	}
	e := NewEngine(0)
	var targets []Target
	for _, k := range keys {
		targets = append(targets, Target{Key: k, Settings: set})
	}
	e.Configure(t0, targets)
	return e
}

func success(at time.Time, latency time.Duration) Observation {
	return Observation{At: at, Outcome: OutcomeSuccess, Latency: latency}
}

func failure(at time.Time, o Outcome) Observation {
	return Observation{At: at, Outcome: o, Latency: time.Second}
}

func status(t testing.TB, e *Engine, now time.Time, k Key) Status {
	t.Helper()
	st, ok := e.StatusOf(now, k)
	if !ok {
		t.Fatalf("no status for %v", k)
	}
	return st
}

// eventsOf returns the journal entries of k.
func eventsOf(e *Engine, k Key) []Event {
	var out []Event
	for _, ev := range e.Events(0) {
		if ev.Channel == k.Channel && ev.Model == k.Model {
			out = append(out, ev)
		}
	}
	return out
}

func firstTo(evs []Event, p Phase) (Event, bool) {
	for _, ev := range evs {
		if ev.To == p {
			return ev, true
		}
	}
	return Event{}, false
}

func reasons(evs []Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.Reason)
	}
	return out
}

// eject takes k out with ConsecutiveFailures (chat: 5 timeouts, one per second from start).
// It returns the ejection time.
func eject(t testing.TB, e *Engine, k Key, start time.Time) time.Time {
	t.Helper()
	var last time.Time
	for i := range 5 {
		last = start.Add(time.Duration(i) * time.Second)
		e.Observe(k, failure(last, OutcomeTimeout))
	}
	if st := status(t, e, last, k); st.Phase != PhaseEjected {
		t.Fatalf("%v not ejected after 5 timeouts: %+v", k, st)
	}
	return last
}

// probeThrough answers every probe ProbesDue hands out for k with fast successes, from start,
// one ProbeInterval apart, until k ramps. It returns the time the ramp started.
func probeThrough(t testing.TB, e *Engine, k Key, start time.Time, interval time.Duration) time.Time {
	t.Helper()
	now := start
	for range 10 {
		due := e.ProbesDue(now, nil)
		if len(due) == 1 && due[0] == k {
			e.Observe(k, Observation{At: now, Outcome: OutcomeSuccess, Latency: time.Second, Probe: true})
			if st := status(t, e, now, k); st.Phase == PhaseRampingUp {
				return now
			}
		}
		now = now.Add(interval)
	}
	t.Fatalf("%v did not reach RampingUp", k)
	return time.Time{}
}

// toRamp ejects k at start and brings it to the first ramp step; it returns the ramp start.
func toRamp(t testing.TB, e *Engine, k Key, start time.Time) time.Time {
	t.Helper()
	ejectedAt := eject(t, e, k, start)
	st := status(t, e, ejectedAt, k)
	return probeThrough(t, e, k, st.CooldownUntil, chat().ProbeInterval)
}
